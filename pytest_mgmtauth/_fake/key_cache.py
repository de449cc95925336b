"""The session's RS512 signing key: read from pytest's cache, or generated and kept there.

Apart from the pool (``_fake/session.py``) so that starting the key imports nothing but this and
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

from .._service.threads import hand_over, start
from .._service.tokens import generate_private_key_pem, import_key_modules, load_private_key

if TYPE_CHECKING:
    from pathlib import Path

#: Reads / writes the PEM of the signing key across runs (pytest's cache); may be None.
KeyCache = tuple[Callable[[], bytes | None], Callable[[bytes], None]]
#: Held while a missing cached key is generated and written: processes sharing the cache
#: (xdist workers) generate one key, the others wait and read it. Called with a function
#: to call before it waits for another process to let go.
KeyLock = Callable[[Callable[[], None]], AbstractContextManager[object]]
#: Seconds :meth:`SigningKey.prepare` hands the GIL to the key's thread for it to read
#: the cached key or to begin generating one (importing cryptography takes ~20 ms).
PREPARE_HANDOVER_WAIT = 0.1


@contextlib.contextmanager
def file_lock(path: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (made if missing) between processes; a
    no-op where ``fcntl`` is missing (Windows: workers may then each make a key, and the
    atomic rename of write_private_file keeps the file whole). ``on_wait`` is called
    before waiting for another process that holds it."""
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
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
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

    def lock(on_wait: Callable[[], None]) -> AbstractContextManager[object]:
        key = path()
        return file_lock(key.with_name(f"{key.name}.lock"), on_wait)

    return (read, write), lock


class SigningKey:
    """The PEM of the session's signing key, made once: read from ``cache``, else
    generated (under ``lock``, so that processes sharing the cache make one) and
    written there. :meth:`prepare` starts that in a background thread; :meth:`pem`
    waits for it (and starts it if nothing did). Thread-safe.

    A caller of :meth:`pem` that finds this process generating the key starts a second
    generation beside the first and takes whichever ends first: the caller has nothing
    to do but wait, so a core is free, and how long a 4096-bit key takes is luck (the
    prime search: 0.1 to 1 s). The first key made is the one used and written to the
    cache. The other generation cannot be stopped: it ends in its daemon thread, or
    with the process, and its key is dropped.

    Each generation runs in a thread of its own, and the thread that took the lock
    holds it until a key is in the cache, not until the first generation ends: another
    process waiting for the lock (an xdist worker) reads the key the race won at once."""

    def __init__(self, cache: KeyCache | None = None, lock: KeyLock | None = None) -> None:
        self._cache = cache
        self._lock = lock
        #: Guards the fields below; notified when a generation starts and when the
        #: outcome is known.
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._first: threading.Thread | None = None
        self._racer: threading.Thread | None = None
        self._generating = False
        #: The first outcome: the PEM, or the exception that made it impossible
        #: (re-raised where the key is needed).
        self._outcome: bytes | BaseException | None = None
        #: Set once the outcome is known and, if it is a key generated here, written.
        self._kept = threading.Event()
        #: Set once the background work no longer needs the GIL for a while: a
        #: generation has begun, another process's is waited for, or the outcome is
        #: known.
        self._underway = threading.Event()

    @property
    def started(self) -> bool:
        """Whether the key is being made in the background, or was."""
        return self._thread is not None

    def prepare(self) -> None:
        """Start reading (or generating) the key in a background thread now, and hand
        that thread the GIL until it has read the key or begun generating one (at most
        :data:`PREPARE_HANDOVER_WAIT`). Does nothing once started.

        Why wait: the thread needs the GIL to import cryptography, read the cache and
        take the lock, and it gets it only between the caller's 5 ms time slices. Left
        to compete with collection, a cold run's generation began about 60 ms after
        this call, 30 ms before the first test asked for the key; handed over, it
        begins within about 25 ms (``docs/benchmarks.md``)."""
        with self._changed:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._make, daemon=True, name="mgmtauth-keygen")
            if not start(thread):  # pem() makes the key in its caller
                return
            self._thread = thread
        hand_over(self._underway, PREPARE_HANDOVER_WAIT)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for a background key to be made and kept; say
        whether it was (False also when nothing was started)."""
        return self._thread is not None and self._kept.wait(timeout)

    def pem(self) -> bytes:
        self.prepare()
        if self._thread is None:  # no background thread could start
            self._make()
        with self._changed:
            while self._outcome is None:
                if self._generating and self._racer is None:
                    # Named before it starts: _generate tells the racer by identity.
                    self._racer = threading.Thread(
                        target=self._generate, daemon=True, name="mgmtauth-keygen-race"
                    )
                    start(self._racer)  # if no thread can be had: no race
                self._changed.wait()
            outcome = self._outcome
        self._kept.wait()  # a key generated here is in the cache once this returns
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _settle(self, outcome: bytes | BaseException) -> bool:
        """Record ``outcome`` if it is the first; say whether it was."""
        with self._changed:
            if self._outcome is not None:
                return False
            self._outcome = outcome
            self._changed.notify_all()
        self._underway.set()
        return True

    def _make(self) -> None:
        try:
            cached = self._cached()
            if cached is None:
                # Waiting for another process's key needs no GIL: prepare() may go on.
                lock = self._lock(self._underway.set) if self._lock else contextlib.nullcontext()
                with lock:
                    # Another process (xdist worker) holding the lock may have made it.
                    cached = self._cached()
                    if cached is None:
                        with self._changed:
                            first = threading.Thread(
                                target=self._generate, daemon=True, name="mgmtauth-keygen-first"
                            )
                            started = start(first)
                            self._first = first
                            self._generating = True
                            self._changed.notify_all()
                        if not started:  # no thread to be had: generate here
                            self._generate()
                        # The lock is held until a key is in the cache, whichever
                        # generation made it (see the class's docstring).
                        self._kept.wait()
                        return
            self._settle(cached)
            self._kept.set()
        except BaseException as exc:  # re-raised where the key is needed
            if self._settle(exc):
                self._kept.set()

    def _generate(self) -> None:
        """Generate a key; the first made (of the first and a racing generation) is
        kept. The first generation's failure is the outcome unless a key came before;
        a racing generation that fails changes nothing."""
        try:
            import_key_modules()
            self._underway.set()  # the generation itself releases the GIL
            pem = generate_private_key_pem()
        except BaseException as exc:
            if threading.current_thread() is not self._racer and self._settle(exc):
                self._kept.set()
            return
        if self._settle(pem):
            try:
                if self._cache is not None:
                    self._cache[1](pem)
            finally:
                self._kept.set()

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
