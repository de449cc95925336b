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


#: Seconds the process's clock was moved by the plugin's own clocks (``mgmt_clock``, a
#: :class:`ManualClock` or :class:`OffsetClock`): a timeline tells these moves, which
#: are part of a test's story, from a jump by another tool.
_known_moves = [0.0]


def clock_moved(seconds: float) -> None:
    """Record that one of the plugin's clocks moved time by ``seconds``."""
    _known_moves[0] += seconds


def known_moves() -> float:
    """Seconds moved so far by the plugin's own clocks (see :func:`clock_moved`)."""
    return _known_moves[0]


def real_seconds() -> float:
    """A monotonic reading of real time that neither freezegun nor time-machine moves."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


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
        step = check_advance(self.now, seconds=seconds)
        self.now += step
        clock_moved(step)


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
            step = check_advance(self(), seconds=seconds)
            self._offset += step
            clock_moved(step)

    @property
    def offset(self) -> float:
        """Seconds advanced so far."""
        return self._offset


def to_datetime(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)
