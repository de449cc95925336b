"""The one seam through which the fake reads time.

The fake never stores a clock of its own: it reads ``time.time()`` at the moment of each
call, looked up on the module every time, so whatever moves the process's time
(``mgmt_clock``, a user's own freezegun or time-machine) moves the fake too, and the
client under test and the fake agree. Unit tests pass a :class:`ManualClock` instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from .options import check_advance

#: Seconds since the epoch, like ``time.time``.
Clock = Callable[[], float]


def system_clock() -> float:
    # Attribute lookup at call time, on purpose: freezegun replaces ``time.time``.
    return time.time()


class ManualClock:
    """A clock that moves only when told to (domain unit tests, the standalone server)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += check_advance(self.now, seconds=seconds)


class OffsetClock:
    """Real time plus an offset that only grows (the standalone server's clock).

    :meth:`advance` moves it forward without waiting; between advances it runs at the
    speed of real time, so ``Retry-After`` waits and token lifetimes pass as usual.
    """

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        """Move forward ``seconds`` (checked by :func:`check_advance`: a refused advance
        leaves the clock where it was)."""
        with self._lock:
            self._offset += check_advance(self(), seconds=seconds)

    @property
    def offset(self) -> float:
        """Seconds advanced so far."""
        return self._offset


def to_datetime(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)
