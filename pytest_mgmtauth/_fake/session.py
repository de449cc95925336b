"""What a test session shares: the HTTP(S) servers, the signing key, the test CA.

Each piece is made the first time a test needs it, so a suite that installs the plugin
but never uses its fixtures starts no server and generates no key. The signing key
(``key_cache.py``) may be started earlier, in a background thread: the plugin starts it
at the end of collection when a test uses its fixtures.
"""

from __future__ import annotations

import threading

from .._http.app import LateErrors
from .._http.server import FakeHTTPServer
from .._http.tls import TestCA
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
        self._servers: dict[bool, FakeHTTPServer] = {}
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
            server = self._servers.get(https)
            if server is None:
                server = FakeHTTPServer(
                    host=self._host,
                    port=self._port,
                    ssl_context=ca.server_context() if ca else None,
                )
                self._servers[https] = server
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
