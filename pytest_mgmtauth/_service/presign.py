"""Signing a token before it is asked for, on another core.

An RS512 signature with a 4096-bit key costs about 1.7 ms, most of ``/v2/auth``. When
an account is added, the client will most likely authenticate with it soon, at the same
clock second: its first token's claims are known but for ``jti``, which is random and
may be drawn now. :class:`Presigner` signs those claims in a background thread while the
test goes on (``cryptography`` releases the GIL while it signs), and ``issue`` takes the
result when the request's claims turn out to be exactly the anticipated ones. Anything
else (another second, another TTL, a moved clock) is signed on demand as before: the
client gets the same token either way, only sooner. The session pool does the same at
a test's end for the next test's first generated account, whose username it draws then
(``SessionPool.anticipate_next_account``), so that the signing runs beside pytest's work
between the tests rather than beside the next test's client.

Guesses that are never used cost CPU on the other core, which a parallel run (xdist)
needs: each miss spends credit, each hit earns it back, and without credit only every
:data:`PROBE_EVERY`-th account is anticipated, so a suite that never authenticates with
its accounts' API keys wastes at most a few percent of a signature per account.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Generic, TypeVar

from .threads import hand_over, start

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

T = TypeVar("T")
_Job = tuple["Future[T]", "Callable[[], T]", int, threading.Event]

#: Anticipated results kept waiting for their request; the oldest beyond it is a miss.
MAX_PENDING = 4
#: The credit a new presigner starts with, and its ceiling.
MAX_CREDIT = 8
#: Seconds a caller hands the GIL to the thread for a job to start (it takes ~0.1 ms).
HANDOVER_WAIT = 0.01
#: Without credit, one anticipation in this many still runs, to notice a suite that
#: started using what it anticipates.
PROBE_EVERY = 32


class Presigner(Generic[T]):
    """Computes ``make()`` in a background thread ahead of a request keyed ``key``.

    Thread-safe. ``take(key)`` returns the result anticipated for ``key``, waiting for it
    if it is being computed or is the thread's next job, or None: never anticipated,
    queued behind other work (then it is cancelled: the caller computes it at once
    rather than wait for the others), or it failed (the caller computes it again and
    sees the error itself).
    """

    def __init__(self, name: str = "mgmtauth-presign") -> None:
        self._name = name
        self._lock = threading.Lock()
        #: Results not taken yet, with their place in the queue (a ticket).
        self._pending: dict[object, tuple[Future[T], int]] = {}
        #: (the result, how to make it, its ticket, set once the thread has started it)
        self._jobs: queue.SimpleQueue[_Job[T]] = queue.SimpleQueue()
        self._tickets = 0
        #: The tickets the thread has taken from the queue, and whether it is at work.
        self._dequeued = 0
        self._working = False
        self._thread: threading.Thread | None = None
        self._credit = MAX_CREDIT
        self._skipped = 0
        #: Counters, for tests and benchmarks: results used, and results never used.
        self.hits = 0
        self.misses = 0

    def anticipate(self, key: object, make: Callable[[], T]) -> None:
        """Start computing ``make()`` for a later ``take(key)``, if credit allows."""
        from concurrent.futures import Future  # not at import: the plugin loads this early

        with self._lock:
            if key in self._pending:
                return
            if self._credit <= 0:
                self._skipped += 1
                if self._skipped % PROBE_EVERY:
                    return
            while len(self._pending) >= MAX_PENDING:
                oldest = next(iter(self._pending))
                self._pending.pop(oldest)[0].cancel()
                self._missed()
            if self._thread is None:
                thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                if not start(thread):
                    # Nothing is made ahead: take() answers None and the caller signs; a
                    # later call tries again. (Kept unstarted, the thread left every
                    # take() waiting.)
                    return
                self._thread = thread
            future: Future[T] = Future()
            ticket = self._tickets
            self._tickets += 1
            self._pending[key] = (future, ticket)
            next_up = ticket == self._dequeued and not self._working
            started = threading.Event()
            self._jobs.put((future, make, ticket, started))
        if next_up:
            # Hand the GIL over until the job has started: else the thread signs only once
            # the client blocks on its request, beside the server instead of ahead of
            # it. Costs the caller ~0.1 ms.
            hand_over(started, HANDOVER_WAIT)

    def is_pending(self, key: object) -> bool:
        """Whether a result for ``key`` is anticipated and not taken yet."""
        with self._lock:
            return key in self._pending

    def take(self, key: object) -> T | None:
        with self._lock:
            pending = self._pending.pop(key, None)
            if pending is None:
                return None
            future, ticket = pending
            ahead = ticket - self._dequeued + self._working
            if ahead > 0 and future.cancel():  # queued behind others: sooner done here
                self._missed()
                return None
            self.hits += 1
            self._credit = min(MAX_CREDIT, self._credit + 1)
        try:
            return future.result()
        except Exception:  # the caller computes it again and gets the error itself
            return None

    def _missed(self) -> None:
        self.misses += 1
        self._credit = max(0, self._credit - 1)

    def _work(self) -> None:
        while True:
            future, make, ticket, started = self._jobs.get()
            with self._lock:
                self._dequeued = ticket + 1
                if not future.set_running_or_notify_cancel():
                    continue
                self._working = True
            started.set()
            try:
                future.set_result(make())
            except BaseException as exc:  # handed to take(), which signs again
                future.set_exception(exc)
            finally:
                with self._lock:
                    self._working = False
