"""A per-session test CA (trustme) and the TLS contexts made from it: the fake's own
address (127.0.0.1, localhost, ::1), and under interception each host of the service it
stands in for, one certificate per host name."""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

#: Attribute set on a server-side TLS socket whose handshake the SNI check refused: why.
SNI_PROBLEM = "mgmtauth_sni_problem"


class TestCA:
    """Issues the fake's server certificate for 127.0.0.1 and localhost."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self) -> None:
        import trustme  # on first use: a suite without HTTPS should not pay for it

        self._ca = trustme.CA(organization_name="pytest-mgmtauth test CA")
        self._cert = self._ca.issue_cert("127.0.0.1", "localhost", "::1")
        self._dir = tempfile.TemporaryDirectory(prefix="mgmtauth-ca-")
        self._lock = threading.Lock()
        self._host_contexts: dict[str, ssl.SSLContext] = {}

    @cached_property
    def ca_bundle(self) -> str:
        """Path of the CA certificate (PEM): ``verify=`` for requests, ``cafile=`` for ssl."""
        path = os.path.join(self._dir.name, "mgmtauth-ca.pem")
        self._ca.cert_pem.write_to_path(path)
        return path

    @cached_property
    def intercept_bundle(self) -> str:
        """Path of a PEM bundle of the test CA and the system's CA certificates, for the
        CA variables of interception: clients that read it (requests, curl, OpenSSL)
        trust the fake's hosts and, as before, every other host."""
        path = os.path.join(self._dir.name, "mgmtauth-intercept-bundle.pem")
        parts = [self._ca.cert_pem.bytes()]
        paths = ssl.get_default_verify_paths()
        for system in (paths.cafile, paths.openssl_cafile):
            if system and os.path.isfile(system):
                with open(system, "rb") as file:
                    parts.append(file.read())
                break
        with open(path, "wb") as file:
            file.write(b"\n".join(parts))
        return path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._cert.configure_cert(context)
        _no_tickets(context)
        return context

    def host_context(self, host: str) -> ssl.SSLContext:
        """The server context of a tunnel to ``host`` (a host of the service, under
        interception): a certificate for that name, and a handshake that completes only
        when the client's SNI names it (else an ``unrecognized_name`` alert, and the
        socket's :data:`SNI_PROBLEM` says why). Made once per name."""
        with self._lock:
            context = self._host_contexts.get(host)
            if context is None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                self._ca.issue_cert(host).configure_cert(context)
                _no_tickets(context)
                context.sni_callback = _sni_check(host)
                self._host_contexts[host] = context
            return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the CA (and nothing else): cheap, unlike
        ``ssl.create_default_context()``, which loads the system store."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._ca.configure_trust(context)
        return context

    def close(self) -> None:
        self._dir.cleanup()


def _sni_check(host: str) -> Callable[[ssl.SSLObject, str, ssl.SSLContext], int | None]:
    def check(sock: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> int | None:
        # The first argument is the SSLSocket under wrap_socket (typeshed: SSLObject);
        # name is None when the client sent no SNI.
        if name == host:
            return None
        problem = (
            "the TLS handshake named no host (no SNI)"
            if name is None
            else f"the TLS handshake named {name!r} (SNI), not {host!r} as the CONNECT did"
        )
        setattr(sock, SNI_PROBLEM, problem)
        return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME

    return check


def _no_tickets(context: ssl.SSLContext) -> None:
    # No TLS 1.3 session tickets (and none in TLS 1.2): Python clients never resume
    # a session on their next connection, so a ticket is work nobody uses. Each new
    # connection pays for them (every request with keep_alive=False, a client that
    # does not pool): the tickets are a large part of a handshake
    # (benchmarks/bench_transport.py).
    context.num_tickets = 0
    context.options |= ssl.OP_NO_TICKET
