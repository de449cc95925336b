"""A per-session test CA (trustme) and the TLS contexts made from it."""

from __future__ import annotations

import os
import ssl
import tempfile
from functools import cached_property


class TestCA:
    """Issues the fake's server certificate for 127.0.0.1 and localhost."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self) -> None:
        import trustme  # on first use: ~45 ms a suite without HTTPS should not pay

        self._ca = trustme.CA(organization_name="pytest-mgmtauth test CA")
        self._cert = self._ca.issue_cert("127.0.0.1", "localhost", "::1")
        self._dir = tempfile.TemporaryDirectory(prefix="mgmtauth-ca-")

    @cached_property
    def ca_bundle(self) -> str:
        """Path of the CA certificate (PEM): ``verify=`` for requests, ``cafile=`` for ssl."""
        path = os.path.join(self._dir.name, "mgmtauth-ca.pem")
        self._ca.cert_pem.write_to_path(path)
        return path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._cert.configure_cert(context)
        # No TLS 1.3 session tickets (and none in TLS 1.2): Python clients never resume
        # a session on their next connection, so a ticket is work nobody uses. Each new
        # connection pays for them (every request with keep_alive=False, a client that
        # does not pool): two tickets cost ~0.7 ms of a ~2 ms handshake
        # (benchmarks/bench_transport.py).
        context.num_tickets = 0
        context.options |= ssl.OP_NO_TICKET
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the CA (and nothing else): cheap, unlike
        ``ssl.create_default_context()``, which loads the system store."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._ca.configure_trust(context)
        return context

    def close(self) -> None:
        self._dir.cleanup()
