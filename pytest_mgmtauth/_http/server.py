"""The socket: a pytest-httpserver ``HTTPServer`` tuned to serve a whole test session.

Differences from the stock server, each for a measured reason (see the field notes):

* threaded, so concurrent clients and a client that stalls mid-request block nobody:
  a thread per open connection, which then waits up to 30 s to serve the next one
  (handing a connection over costs less than starting a thread);
* our own request handler class, so Werkzeug's per-request log lines (slow, noisy) are
  off, Nagle's algorithm is off (with it, HTTPS round trips waited on delayed ACKs), and
  ``protocol_version`` is set on our class instead of on Werkzeug's shared one;
* an accept loop that sleeps until a connection comes or ``stop()`` wakes it, so that
  ``stop()`` returns at once (the stock loop looks for it every 0.5 s);
* nothing is appended to ``log``: a session-long server would grow without bound;
* TLS handshakes happen in the request's thread, not in the accepting one, so a
  client that connects and never speaks TLS blocks nobody;
* a request whose Host or Content-Length headers are invalid (RFC 9112) is marked for a
  400, and repeated ``Cookie`` headers are joined with "; " (Werkzeug joins with ",");
* after the answer, what the client still sends is discarded only briefly (see
  :class:`BriefDrain`): Werkzeug's own drain could hold a connection for 30 s;
* HTTP/1.1 keep-alive, as the real service answers (``Connection: keep-alive``), when
  the test's ``keep_alive`` option allows it and the answer leaves the connection in a
  known state (the request's body was read whole, no framing problem, the client did not
  ask to close); otherwise ``Connection: close`` and the brief drain. Werkzeug always
  closes. A connection's first request belongs to the test during which it was accepted;
  each further one to the test bound when its first byte arrived. Connections idle
  between requests are closed when a test ends (:meth:`ConnectionServer.drop_idle_connections`),
  as a real server's idle timeout would: clients check a pooled connection before reusing
  it and open a new one.

Here too: the TLS it serves, from a per-session test CA (:class:`TestCA`).
"""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pytest_httpserver import HTTPServer

from .._service.flows.registry import service_hosts
from .app import FakeApp
from .arrival import wsgi_application
from .connections import ConnectionServer, handshake_of
from .handler import ConnectionHandler

if TYPE_CHECKING:
    from collections.abc import Callable

    from werkzeug import Request, Response


class FakeHTTPServer(HTTPServer):
    """One per test session (per xdist worker) and scheme; tests bind their state to
    :attr:`app` for their duration."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        app: FakeApp | None = None,
        listener: str | None = None,
        tunnel_context: Callable[[str], ssl.SSLContext] | None = None,
    ) -> None:
        super().__init__(host=host, port=port, ssl_context=ssl_context, threaded=True)
        #: Another listener's app to share (the region address answers for the same
        #: test as the fake's own address), else one of its own.
        self.app = app if app is not None else FakeApp()
        #: Which listener it is, in the Arrival of each request it reads (see
        #: _http/arrival.py and hosts.py).
        self.listener = listener
        #: The TLS context of a tunnel to a host: set, this listener is the proxy of the
        #: intercept option (see _http/hosts.py).
        self.tunnel_context = tunnel_context
        self._start_lock = threading.Lock()

    def start(self) -> None:
        with self._start_lock:
            if self.is_running():
                return
            # Plain TCP server; TLS is layered per connection in get_request.
            server = ConnectionServer(
                self.host, self.port, wsgi_application(self.app), handler=ConnectionHandler
            )
            server.fake_app = self.app
            server.tunnel_context = self.tunnel_context
            server.listener = self.listener
            if self.ssl_context is not None:
                server._tls_context = self.ssl_context
                server.ssl_context = self.ssl_context  # Werkzeug reports wsgi.url_scheme
            self.server = server
            self.port = server.port
            self.app.when_open(server.wake)
            self.server_thread = threading.Thread(
                target=self.thread_target, daemon=True, name="mgmtauth-server"
            )
            self.server_thread.start()

    @property
    def connections_accepted(self) -> int:
        """TCP connections this server accepted so far."""
        server = self.server
        return server.connections_accepted if isinstance(server, ConnectionServer) else 0

    def drop_idle_connections(self) -> int:
        """Close the kept-alive connections idle between requests now; how many."""
        server = self.server
        return server.drop_idle_connections() if isinstance(server, ConnectionServer) else 0

    def dispatch(self, request: Request) -> Response:
        return self.app(request)

    @property
    def base_url(self) -> str:
        return self.url_for("/").rstrip("/")


# -- TLS ---------------------------------------------------------------------------


def _trustme() -> Any:
    """trustme (imported on first use: a suite without HTTPS should not pay for it), its
    validity window (its own, 2000 to 3000) made now: under a frozen clock (mgmt_clock's
    freezegun) cryptography signs only datetimes of the class ``datetime.datetime`` is
    then, and trustme's module-level ones are not (the test CA, or a tunnel's first
    certificate, is often made during a test on mgmt_clock)."""
    import datetime

    import trustme

    trustme.DEFAULT_NOT_BEFORE = datetime.datetime(2000, 1, 1)
    trustme.DEFAULT_EXPIRY = datetime.datetime(3000, 1, 1)
    return trustme


class TestCA:
    """Issues the fake's server certificate for 127.0.0.1 and localhost."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self) -> None:
        trustme = _trustme()
        self._ca = trustme.CA(organization_name="pytest-mgmtauth test CA")
        self._cert = self._ca.issue_cert("127.0.0.1", "localhost", "::1")
        self._dir = tempfile.TemporaryDirectory(prefix="mgmtauth-ca-")
        self._lock = threading.Lock()
        self._host_contexts: dict[str, ssl.SSLContext] = {}
        self._bundles: dict[tuple[object, ...], str] = {}

    @cached_property
    def ca_bundle(self) -> str:
        """Path of the CA certificate (PEM): ``verify=`` for requests, ``cafile=`` for ssl."""
        path = os.path.join(self._dir.name, "mgmtauth-ca.pem")
        self._ca.cert_pem.write_to_path(path)
        return path

    def bundle_with(self, source: str | None) -> str:
        """Path of a PEM bundle of the test CA and the CA certificates ``source`` names
        (a file, or a directory of them, as a CA variable may), else the system's: for
        the CA variables of interception, so that clients that read it trust the fake's
        hosts and, as before, every host they trusted. Made once per source and version."""
        if source and os.path.dirname(os.path.abspath(source)) == self._dir.name:
            return source  # one of these bundles already: it holds the test CA
        key = _source_key(source)
        with self._lock:
            path = self._bundles.get(key)
            if path is None:
                path = os.path.join(self._dir.name, f"mgmtauth-bundle-{len(self._bundles)}.pem")
                with open(path, "wb") as file:
                    file.write(b"\n".join([self._ca.cert_pem.bytes(), *_certificates(key)]))
                self._bundles[key] = path
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
        socket's ``Handshake`` says why). Made once per name."""
        with self._lock:
            context = self._host_contexts.get(host)
            if context is None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                _trustme()  # a tunnel's first request may come under mgmt_clock
                self._ca.issue_cert(host).configure_cert(context)
                _no_tickets(context)
                context.sni_callback = _sni_check(host)
                self._host_contexts[host] = context
            return context

    def by_name_context(self) -> ssl.SSLContext:
        """The server context of the listener that this process's connections to the
        service's hosts go to under interception (``_fake/resolution.py``): the client's
        SNI chooses the host's certificate, among the hosts of the connection's test;
        no SNI or another name gets ``unrecognized_name`` and a ``TunnelClosed`` event."""
        context = self.server_context()
        context.sni_callback = _sni_choose(self.host_context)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the CA (and nothing else): cheap, unlike
        ``ssl.create_default_context()``, which loads the system store."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._ca.configure_trust(context)
        return context

    def close(self) -> None:
        self._dir.cleanup()


def _source_key(source: str | None) -> tuple[object, ...]:
    """What a CA variable names (else the system's CA file), and its version: a bundle
    is made again when it changes."""
    paths = ssl.get_default_verify_paths()
    for path in (source, paths.cafile or paths.openssl_cafile):
        try:
            if path:
                stat = os.stat(path)
                return (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
        except OSError:
            pass  # not there: a client trusts nothing of it
    return ("",)


def _certificates(key: tuple[object, ...]) -> list[bytes]:
    """The PEM texts of what :func:`_source_key` described: a file, or the files of a
    directory (those holding a certificate)."""
    source = str(key[0])
    if not source:
        return []
    files = [source]
    if os.path.isdir(source):
        files = sorted(os.path.join(source, name) for name in os.listdir(source))
    texts = []
    for path in files:
        try:
            with open(path, "rb") as file:
                text = file.read()
        except OSError:
            continue  # unreadable, a directory, gone: nothing a client could trust
        if b"-----BEGIN CERTIFICATE-----" in text:
            texts.append(text)
    return texts


def _sni_check(host: str) -> Callable[[ssl.SSLObject, str, ssl.SSLContext], int | None]:
    def check(sock: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> int | None:
        # The first argument is the SSLSocket under wrap_socket (typeshed: SSLObject);
        # name is None when the client sent no SNI.
        if name is not None and name.lower() == host:
            return None  # host names are case-insensitive (RFC 6066 3); Node keeps the URL's case
        problem = (
            "the TLS handshake named no host (no SNI)"
            if name is None
            else f"the TLS handshake named {name!r} (SNI), not {host!r} as the CONNECT did"
        )
        handshake_of(sock).sni_problem = problem
        return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME

    return check


def _sni_choose(
    contexts: Callable[[str], ssl.SSLContext],
) -> Callable[[ssl.SSLObject, str, ssl.SSLContext], int | None]:
    def choose(sock: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> int | None:
        handshake = handshake_of(sock)
        binding = handshake.binding
        if binding is None or binding.closed.is_set():
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME  # no test: nothing to serve
        hosts = service_hosts(binding.service.options)
        if name is not None and name.lower() in hosts:
            sock.context = contexts(name.lower())
            handshake.sni_host = name.lower()
            return None
        binding.service.timeline.record_tunnel_closed(
            f"{name or '-'}:443",
            f"the TLS handshake named {'no host (no SNI)' if name is None else repr(name)}: "
            f"where lookups of the service's hosts lead, the fake serves TLS for "
            f"{', '.join(hosts)} only, named by SNI",
            via="TLS",
        )
        return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME

    return choose


def _no_tickets(context: ssl.SSLContext) -> None:
    # No TLS 1.3 session tickets (and none in TLS 1.2): Python clients never resume
    # a session on their next connection, so a ticket is work nobody uses. Each new
    # connection pays for them (every request with keep_alive=False, a client that
    # does not pool): the tickets are a large part of a handshake
    # (benchmarks/bench_transport.py).
    context.num_tickets = 0
    context.options |= ssl.OP_NO_TICKET
