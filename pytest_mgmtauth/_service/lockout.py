"""The lockout rule, which any flow calls (``Flow.check_account``): failed
authentications in a row lock an account for ``lockout_duration`` (the service's 1402),
and a test may lock or unlock an account on cue. Attempts during a lockout do not end it
sooner, and a client that keeps trying is told it is hammering."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, NoReturn

from .events import AccountLocked, AccountLockedManually, AccountUnlocked
from .limits import check_seconds
from .records import AUTH_FAILED, LOCKED_OUT, SERVICE_MESSAGES
from .timeline import to_datetime

if TYPE_CHECKING:
    import threading

    from .account_book import AccountBook
    from .flows.base import Flow, Refuse
    from .options import Options
    from .timeline import Timeline


@dataclasses.dataclass(eq=False)
class Lockout:
    """The locks of one test's accounts: after failed authentications, and on cue."""

    _timeline: Timeline
    _accounts: AccountBook
    _options: Options
    _lock: threading.RLock
    #: Failed authentications in a row, per account.
    failures: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Lockouts after failed authentications: username -> (start, end).
    lockouts: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    #: Attempts per account during its current lockout.
    attempts_while_locked: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Locks set by :meth:`lock`: username -> (start, end); end is inf until unlocked.
    manual_locks: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def message(self) -> str:
        """The service's text of a 1402."""
        minutes = max(1, math.ceil(self._options.lockout_duration / 60))
        return SERVICE_MESSAGES[LOCKED_OUT].format(minutes=minutes)

    def check(self, flow: Flow, username: str, now: float, refuse: Refuse) -> None:
        """Refuse (1402) an authentication of a locked account."""
        offset = self._timeline.offset
        lock = self.manual_locks.get(username)
        if lock is not None and now < lock[1]:
            start, end = lock
            until = "until unlocked" if end == math.inf else f"until {offset(end)}"
            reason = f"account locked on cue since {offset(start)}, {until}"
            refuse(username, LOCKED_OUT, reason, message=self.message())
        lockout = self.lockouts.get(username)
        if lockout is None or now >= lockout[1]:
            return
        start, end = lockout
        attempts = self.attempts_while_locked.get(username, 0) + 1
        self.attempts_while_locked[username] = attempts
        hammering = ""
        if attempts > 1:
            # A client that retries in a loop on 1402 hammers the service for nothing:
            # say so, with the count.
            hammering = (
                f"; the client is still hammering the locked account: {attempts} "
                f"{flow.attempt} attempts since the lockout began, stop retrying on 1402"
            )
        reason = (
            f"account locked since {offset(start)} until {offset(end)} after "
            f"{self._options.lockout_threshold} failed {flow.attempt}s; attempts during a "
            f"lockout do not end it sooner: wait {math.ceil(end - now)} s{hammering}"
        )
        refuse(username, LOCKED_OUT, reason, message=self.message())

    def failed(
        self, flow: Flow, username: str, now: float, problem: str, refuse: Refuse
    ) -> NoReturn:
        """A wrong secret: one step towards a lockout, then the refusal (1401)."""
        failures = self.failures.get(username, 0) + 1
        self.failures[username] = failures
        locked = None
        if failures >= self._options.lockout_threshold:
            until = now + self._options.lockout_duration
            self.lockouts[username] = (now, until)
            self.failures[username] = 0
            self.attempts_while_locked[username] = 0
            locked = AccountLocked(
                at=to_datetime(now),
                username=username,
                failures=failures,
                until=to_datetime(until),
                version=flow.name,
            )
        refuse(username, AUTH_FAILED, problem, then=locked)

    def succeeded(self, username: str) -> None:
        self.failures[username] = 0

    def lock(self, username: str, *, seconds: float | None = None) -> None:
        """Lock the account now: authentications of the flows that lock out answer 1402
        until :meth:`unlock`, or for ``seconds`` of simulated time."""
        with self._lock:
            self._accounts.known(username)
            if seconds is not None:
                seconds = check_seconds("seconds", seconds, what="lock()")
            now = self._timeline.now()
            end = math.inf if seconds is None else now + seconds
            # Everything that can fail is done before the state changes.
            event = AccountLockedManually(
                at=to_datetime(now),
                username=username,
                until=None if seconds is None else to_datetime(end),
            )
            self.manual_locks[username] = (now, end)
            self._timeline.record(event)

    def unlock(self, username: str) -> None:
        """End any lock of the account (on cue or after failed authentications) and
        forget its failures."""
        with self._lock:
            self._accounts.known(username)
            self.manual_locks.pop(username, None)
            self.lockouts.pop(username, None)
            self.failures[username] = 0
            self._timeline.record_now(lambda at: AccountUnlocked(at=at, username=username))
