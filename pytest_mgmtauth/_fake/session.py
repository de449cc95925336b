"""What a test session shares: the HTTP(S) servers, the signing key, the test CA.

Each piece is made the first time a test needs it, so a suite that installs the plugin
but never uses its fixtures starts no server and generates no key. The signing key
(``key_cache.py``) may be started earlier, in a background thread: the plugin starts it
at the end of collection when a test uses its fixtures.
"""

from __future__ import annotations

import threading

from .._http.binding import LateErrors
from .._http.hosts import REGION_LISTENER
from .._http.server import FakeHTTPServer, TestCA
from .._service.tokens import TokenSigner
from .key_cache import SigningKey


class SessionResources:
    def __init__(
        self,
        signing_key: SigningKey | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        #: The signing key, maybe being made already (the plugin starts it at
        #: collection); without one, a new key kept in memory, made on first use.
        self.signing_key = signing_key or SigningKey()
        # Where the servers listen: any free loopback port under pytest; the standalone
        # server passes its --host/--port.
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._signer: TokenSigner | None = None
        self._ca: TestCA | None = None
        #: By role and scheme: the fake's own address ("main"), the region address
        #: that stands for the v3 region host ("region", sharing the main one's app),
        #: the proxy of the intercept option ("proxy", plain HTTP).
        self._servers: dict[tuple[str, bool], FakeHTTPServer] = {}
        #: Errors raised in the server for a test that had already ended.
        self.late_errors = LateErrors()

    @property
    def signer(self) -> TokenSigner:
        with self._lock:
            if self._signer is None:
                self._signer = TokenSigner(self.signing_key.key())
            return self._signer

    @property
    def ca(self) -> TestCA:
        with self._lock:
            if self._ca is None:
                self._ca = TestCA()
            return self._ca

    def server(self, *, https: bool) -> FakeHTTPServer:
        ca = self.ca if https else None
        with self._lock:
            server = self._servers.get(("main", https))
            if server is None:
                server = FakeHTTPServer(
                    host=self._host,
                    port=self._port,
                    ssl_context=ca.server_context() if ca else None,
                )
                self._servers[("main", https)] = server
        server.start()
        return server

    def region_server(self, *, https: bool) -> FakeHTTPServer:
        """The second address of the fake (any free port), which stands for the v3
        region host without interception: it answers for the same test as
        :meth:`server`, whose app it shares. Started on first use."""
        main = self.server(https=https)
        with self._lock:
            server = self._servers.get(("region", https))
            if server is None:
                server = FakeHTTPServer(
                    host=self._host,
                    port=0,
                    ssl_context=main.ssl_context,
                    app=main.app,
                    listener=REGION_LISTENER,
                )
                self._servers[("region", https)] = server
        server.start()
        return server

    def started_region(self, *, https: bool) -> FakeHTTPServer | None:
        """The region address's listener if a request has needed it, else None."""
        with self._lock:
            return self._servers.get(("region", https))

    def proxy_server(self) -> FakeHTTPServer:
        """The HTTP proxy of the intercept option (plain HTTP, any free port): tunnels to
        the service's hosts end in it, in TLS from the test CA. Started on first use."""
        ca = self.ca
        with self._lock:
            server = self._servers.get(("proxy", False))
            if server is None:
                server = FakeHTTPServer(host=self._host, port=0, tunnel_context=ca.host_context)
                self._servers[("proxy", False)] = server
        server.start()
        return server

    def close(self) -> None:
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
            ca, self._ca = self._ca, None
        for server in servers:
            if server.is_running():
                server.stop()
        if ca is not None:
            ca.close()
