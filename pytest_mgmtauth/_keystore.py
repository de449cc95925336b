"""The session's RS512 signing key: read from pytest's cache, or generated and kept there.

Apart from the pool (``_pool.py``) so that starting the key imports nothing but this and
the token module: collection starts it as soon as it meets a module naming the plugin's
fixtures (``plugin.py``), before the transport and the fake are loaded (about 70 ms).
``cryptography`` releases the GIL while it generates, so a background generation runs
beside pytest's collection and setup.
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

from ._domain._tokens import generate_private_key_pem, load_private_key

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


class SigningKey:
    """The PEM of the session's signing key, made once: read from ``cache``, else
    generated (under ``lock``, so that processes sharing the cache make one) and
    written there. :meth:`prepare` starts that in a background thread; :meth:`pem`
    waits for it, or does it at once if nothing started it. Thread-safe."""

    def __init__(self, cache: KeyCache | None = None, lock: KeyLock | None = None) -> None:
        self._cache = cache
        self._lock = lock
        self._guard = threading.Lock()
        #: The background generation (prepare) and its result: the PEM, or the
        #: exception it raised (re-raised where the key is needed).
        self._thread: threading.Thread | None = None
        self._result: list[bytes | BaseException] = []
        self._pem: bytes | None = None

    @property
    def started(self) -> bool:
        """Whether the key is being made in the background, or was."""
        return self._thread is not None

    def prepare(self) -> None:
        """Start reading (or generating) the key in a background thread now. Does
        nothing once started or made."""
        with self._guard:
            if self._pem is not None or self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._prepare, daemon=True, name="mgmtauth-keygen"
            )
            self._thread.start()

    def _prepare(self) -> None:
        try:
            self._result.append(self._read_or_make())
        except BaseException as exc:  # re-raised where the key is needed
            self._result.append(exc)

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for a background key to be made (and kept)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def pem(self) -> bytes:
        with self._guard:
            if self._pem is None:
                if self._thread is not None:
                    self._thread.join()
                    result = self._result[0]
                    if isinstance(result, BaseException):
                        raise result
                    self._pem = result
                else:
                    self._pem = self._read_or_make()
            return self._pem

    def _cached(self) -> bytes | None:
        if self._cache is None:
            return None
        cached = self._cache[0]()
        if not cached:
            return None
        from cryptography.exceptions import UnsupportedAlgorithm

        try:
            load_private_key(cached)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            # A damaged entry (edited, or left by an older version whose writes were not
            # atomic): make a new key instead.
            return None
        return cached

    def _read_or_make(self) -> bytes:
        cached = self._cached()
        if cached:
            return cached
        with self._lock() if self._lock is not None else contextlib.nullcontext():
            # Another process (xdist worker) holding the lock may have made it meanwhile.
            cached = self._cached()
            if cached:
                return cached
            pem = generate_private_key_pem()
            if self._cache is not None:
                self._cache[1](pem)
        return pem
