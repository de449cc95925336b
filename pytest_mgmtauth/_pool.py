"""What a test session shares: the HTTP(S) servers, the signing key, the test CA.

Each piece is made the first time a test needs it, so a suite that installs the plugin
but never uses its fixtures starts no server and generates no key.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from cryptography.exceptions import UnsupportedAlgorithm

from ._domain._tokens import TokenSigner, generate_private_key_pem, load_private_key
from ._transport._app import LateErrors
from ._transport._server import FakeHTTPServer
from ._transport._tls import TestCA

if TYPE_CHECKING:
    from pathlib import Path

#: Reads / writes the PEM of the signing key across runs (pytest's cache); may be None.
KeyCache = tuple[Callable[[], bytes | None], Callable[[bytes], None]]


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and readable by its owner only (0600) from
    the first byte: a temporary file in the same directory, made 0600 by mkstemp, then
    renamed over ``path``. A reader (another xdist worker) sees the old file or the
    whole new one, never half of it, and nobody else ever sees the key."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o600)  # mkstemp's mode already; said for the reader
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class SessionPool:
    def __init__(
        self, key_cache: KeyCache | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._key_cache = key_cache
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
                self._signer = TokenSigner(load_private_key(self._signing_key_pem()))
            return self._signer

    def _signing_key_pem(self) -> bytes:
        if self._key_cache is not None:
            cached = self._key_cache[0]()
            if cached:
                try:
                    load_private_key(cached)
                except (ValueError, TypeError, UnsupportedAlgorithm):
                    # A damaged entry (edited, or left by an older version whose writes
                    # were not atomic): make a new key instead.
                    pass
                else:
                    return cached
        pem = generate_private_key_pem()
        if self._key_cache is not None:
            self._key_cache[1](pem)
        return pem

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
