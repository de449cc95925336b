"""The simulated clock: freezegun underneath, so the client and the fake see one time."""

from __future__ import annotations

import contextlib
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

from .._service.limits import LATEST_TIME, check_advance
from .._service.timeline import clock_moved, clock_set

#: Modules whose calls keep real time (see ``MgmtClock.__init__``).
_IGNORED = ("_pytest.timing", "hypothesis.internal.conjecture.junkdrawer")


@contextlib.contextmanager
def time_held() -> Iterator[None]:
    """freezegun's patches held in place, at real time (ticking), while the block runs:
    the clocks started inside it are nested, and freezegun looks through every loaded
    module for references to patch only at an outermost start (about 5 ms with pytest,
    requests and the plugin loaded). An exploration holds them over its runs, so that
    each run's ``mgmt_clock`` starts without that search. Inside, outside a clock, the
    time functions are freezegun's at real time: ``time.monotonic()`` counts from the
    epoch, as under any ticking freezegun. Elsewhere than CPython, where freezegun does
    not tick, nothing is held."""
    if sys.implementation.name != "cpython":
        yield
        return
    import freezegun

    holder = freezegun.freeze_time(
        datetime.now(timezone.utc), tick=True, real_asyncio=True, ignore=list(_IGNORED)
    )
    holder.start()
    try:
        yield
    finally:
        holder.stop()


class MgmtClock:
    """Frozen time that moves only when told to: the ``mgmt_clock`` fixture.

    It starts frozen at the current real time (UTC, whole seconds). It is freezegun
    underneath (``tick=False``, ``real_asyncio=True``), so ``time.time()``,
    ``time.monotonic()``, ``datetime.now()`` and PyJWT's checks in the client under test
    see the same simulated time as the fake, which reads ``time.time()`` at every
    request. asyncio keeps real time: ``asyncio.sleep`` and the timeouts of
    ``httpx.AsyncClient`` and aiohttp still work. Tests that do not ask for
    ``mgmt_clock`` run on real time and pay nothing for it.

    Tokens expire, v1 sessions time out and lockouts end on this clock. Using the clock
    after its test has ended raises ``RuntimeError``.

    Internal constructor, may change: use the ``mgmt_clock`` fixture.
    """

    def __init__(self, start: datetime | None = None) -> None:
        if start is None:
            start = datetime.now(timezone.utc).replace(microsecond=0)
        import freezegun  # on first use: a suite that never asks should not pay for it

        self._freezer = freezegun.freeze_time(
            _as_utc(start),
            tick=False,
            real_asyncio=True,
            # pytest's own timer would otherwise report durations of ~1.8e9 s. Hypothesis
            # (a test's own @given, beside mgmt_clock) keeps the real perf_counter it saved
            # for its gc callback: patched, that callback reads freezegun's clock from
            # whatever thread collects (the fake's included), and a collection between
            # freezegun's stop() popping the clock and popping its ignore list raises
            # IndexError there: an unraisable exception failing a random teardown. Only
            # that module: freezegun gives real time to calls within a few frames of an
            # ignored module, and a @given body runs a frame below hypothesis.core.
            ignore=list(_IGNORED),
        )
        self._factory: Any = None
        #: In a live run: skips the test at a move (only the fake's time can move).
        self.fake_only: Callable[[str], NoReturn] | None = None

    def _refuse_live(self, call: str) -> None:
        if self.fake_only is not None:
            self.fake_only(
                f"mgmt_clock.{call} moves the fake's clock, which a live run does not use "
                "(the service keeps real time): skipped in a live run (--mgmtauth-live)"
            )

    def start(self) -> MgmtClock:
        before = time.time()
        self._factory = self._freezer.start()
        clock_moved(time.time() - before)  # the fake's timelines tell its moves apart
        return self

    def stop(self) -> None:
        if self._factory is not None:
            before = time.time()
            self._freezer.stop()
            self._factory = None
            clock_moved(time.time() - before)

    def _running(self) -> Any:
        if self._factory is None:
            raise RuntimeError("the mgmt_clock is not running (its test has ended)")
        return self._factory

    def now(self) -> datetime:
        """The simulated time, an aware UTC datetime."""
        naive: datetime = self._running()()
        return datetime(*naive.timetuple()[:6], naive.microsecond, tzinfo=timezone.utc)

    def advance(
        self,
        delta: timedelta | None = None,
        *,
        seconds: float = 0,
        minutes: float = 0,
        hours: float = 0,
    ) -> datetime:
        """Move time forward by ``delta`` and/or the keyword amounts (they add up);
        returns the new time. Tokens expire, sessions time out and lockouts end on this
        clock.

        Each amount must be a finite number >= 0, the total at most 100 years
        (3153600000 s), and the new time before 3000-01-01; anything else (backwards,
        NaN, infinity, a huge number, a bool or a string) raises ``ValueError`` or
        ``TypeError`` and leaves the clock where it was. Use :meth:`move_to` to go back.
        """
        self._refuse_live("advance")
        extra = 0.0
        if delta is not None:
            if not isinstance(delta, timedelta):
                raise TypeError(
                    f"advance() takes a timedelta or seconds=/minutes=/hours=, got {delta!r}"
                )
            if delta < timedelta(0):
                raise ValueError(
                    f"advance() moves time forward only (got {delta}); use move_to() to jump back"
                )
            extra = delta.total_seconds()
        factory = self._running()
        # Checked before the clock moves: finite, >= 0, at most 100 years, and the new
        # time stays before 3000-01-01 (so tokens and locks can still be dated).
        back = "; use move_to() to jump back"
        now = self.now().timestamp()
        total = check_advance(now, seconds=seconds, minutes=minutes, hours=hours, backwards=back)
        total = check_advance(now, seconds=total + extra)
        factory.tick(timedelta(seconds=total))
        clock_moved(total)
        return self.now()

    def move_to(self, when: datetime) -> datetime:
        """Jump to the instant ``when`` (a naive datetime is taken as UTC), forwards or
        backwards, between 1970-01-01 and 3000-01-01 (else ``ValueError``); returns it."""
        self._refuse_live("move_to")
        if not isinstance(when, datetime):
            raise TypeError(f"move_to() takes a datetime, got {when!r}")
        when = _as_utc(when)
        if not 0 <= when.timestamp() <= LATEST_TIME:
            raise ValueError(
                f"move_to() takes a time from 1970-01-01 to 3000-01-01 (UTC), got "
                f"{when.isoformat()}"
            )
        before = self.now().timestamp()
        self._running().move_to(when)
        clock_moved(self.now().timestamp() - before)
        clock_set(self.now().timestamp())
        return self.now()

    def __repr__(self) -> str:
        state = self.now().isoformat() if self._factory is not None else "stopped"
        return f"<MgmtClock {state}>"


def _as_utc(when: datetime) -> datetime:
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)
