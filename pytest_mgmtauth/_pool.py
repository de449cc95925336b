"""What a test session shares: the HTTP(S) servers, the signing key, the test CA.

Each piece is made the first time a test needs it, so a suite that installs the plugin
but never uses its fixtures starts no server and generates no key. The signing key may
be started earlier, in a background thread (:meth:`SessionPool.prepare_signing_key`): the
plugin does so once collection shows a test that uses its fixtures, so that a cold run
(no cached key) generates the 4096-bit key while pytest collects and sets up;
``cryptography`` releases the GIL while it generates.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
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
#: Held while a missing cached key is generated and written: processes sharing the cache
#: (xdist workers) generate one key, the others wait and read it.
KeyLock = Callable[[], AbstractContextManager[object]]


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (made if missing) between processes; a
    no-op where ``fcntl`` is missing (Windows: workers may then each make a key, and the
    atomic rename of write_private_file keeps the file whole)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        handle = open(path, "a+b")  # noqa: SIM115 - held for the with block
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


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


def key_files(
    path: Callable[[], Path], *, after_write: Callable[[], None] | None = None
) -> tuple[KeyCache, KeyLock]:
    """The signing key kept across runs in the file ``path()`` (0600, written
    atomically), and the lock file beside it (``<name>.lock``) that processes sharing it
    take while one of them generates a missing key. A write that fails warns (each run
    then generates its own key); ``after_write`` runs after a write that succeeded."""

    def read() -> bytes | None:
        try:
            return path().read_bytes()
        except OSError:
            return None

    def write(pem: bytes) -> None:
        try:
            write_private_file(path(), pem)
        except OSError as exc:
            warnings.warn(
                f"pytest-mgmtauth could not keep the signing key in pytest's cache ({exc}); "
                "each run generates a new one",
                stacklevel=1,
            )
            return
        if after_write is not None:
            after_write()

    def lock() -> AbstractContextManager[object]:
        key = path()
        return file_lock(key.with_name(f"{key.name}.lock"))

    return (read, write), lock


class SessionPool:
    def __init__(
        self,
        key_cache: KeyCache | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        key_lock: KeyLock | None = None,
    ) -> None:
        self._key_cache = key_cache
        self._key_lock = key_lock
        #: The background generation of the key (prepare_signing_key), and its result:
        #: the PEM, or the exception it raised (re-raised where the key is needed).
        self._key_thread: threading.Thread | None = None
        self._key_result: list[bytes | BaseException] = []
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

    def prepare_signing_key(self) -> None:
        """Start reading (or generating) the signing key in a background thread now;
        :attr:`signer` waits for it. Does nothing once started or made."""
        with self._lock:
            if self._signer is not None or self._key_thread is not None:
                return
            self._key_thread = threading.Thread(
                target=self._prepare, daemon=True, name="mgmtauth-keygen"
            )
            self._key_thread.start()

    def _prepare(self) -> None:
        try:
            self._key_result.append(self._signing_key_pem())
        except BaseException as exc:  # re-raised where the key is needed
            self._key_result.append(exc)

    @property
    def signer(self) -> TokenSigner:
        with self._lock:
            if self._signer is None:
                if self._key_thread is not None:
                    self._key_thread.join()
                    result = self._key_result[0]
                    if isinstance(result, BaseException):
                        raise result
                    pem = result
                else:
                    pem = self._signing_key_pem()
                self._signer = TokenSigner(load_private_key(pem))
            return self._signer

    def _cached_key_pem(self) -> bytes | None:
        if self._key_cache is None:
            return None
        cached = self._key_cache[0]()
        if not cached:
            return None
        try:
            load_private_key(cached)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            # A damaged entry (edited, or left by an older version whose writes were not
            # atomic): make a new key instead.
            return None
        return cached

    def _signing_key_pem(self) -> bytes:
        cached = self._cached_key_pem()
        if cached:
            return cached
        with self._key_lock() if self._key_lock is not None else contextlib.nullcontext():
            # Another process (xdist worker) holding the lock may have made it meanwhile.
            cached = self._cached_key_pem()
            if cached:
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
