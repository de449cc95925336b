"""Time and the timeline of one test.

The clock: the one seam through which the fake reads time. The fake never stores a clock
of its own: it reads ``time.time()`` at the moment of each call, looked up on the module
every time, so whatever moves the process's time (``mgmt_clock``, a user's own freezegun
or time-machine) moves the fake too, and the client under test and the fake agree. Unit
tests pass a :class:`ManualClock` instead.

The timeline part of the service: recording events with every secret masked, the one
way to refuse (record, then raise), the time origin of offsets, and the records of calls
that reach no flow.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NoReturn

from .events import (
    ApiCall,
    BadRequest,
    Event,
    TunnelClosed,
    UnknownRoute,
    format_moment,
    timeline_origin,
)
from .limits import check_advance
from .records import Refusal
from .secret_text import SecretMasker

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .records import Authorization

#: Seconds since the epoch, like ``time.time``.
Clock = Callable[[], float]


#: Seconds the process's clock was moved by the plugin's own clocks (``mgmt_clock``, a
#: :class:`ManualClock` or :class:`OffsetClock`): a timeline tells these moves, which
#: are part of a test's story, from a jump by another tool.
_known_moves = [0.0]


def clock_moved(seconds: float) -> None:
    """Record that one of the plugin's clocks moved time by ``seconds``."""
    _known_moves[0] += seconds


#: The last time a plugin clock was set (``mgmt_clock.move_to``): how many sets so far,
#: the moment it was set to, and the plugin's clocks' moves then.
_last_set = [(0, 0.0, 0.0)]


def clock_set(to: float) -> None:
    """Record that one of the plugin's clocks was set to ``to`` (after its
    :func:`clock_moved`): a test that sets its clock before anything happens starts
    its timeline there."""
    _last_set[0] = (_last_set[0][0] + 1, to, _known_moves[0])


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


def to_datetime(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)


class Timeline:
    """The events of one test, oldest first, and the clock they are read on."""

    def __init__(self, clock: Clock, lock: threading.RLock) -> None:
        self._clock = clock
        self._lock = lock
        #: The test's start on the clock the fake uses: when it was created, or, when
        #: another tool (time-machine, the test's own freezegun) moved the clock before
        #: anything happened, the first event's time on the moved clock.
        self.started_at = clock()
        self._moves_at_start = _known_moves[0]
        self._sets_at_start = _last_set[0][0]
        self._real_at_start = real_seconds()
        self._events: list[Event] = []
        # Every secret this service holds or handed out, masked wherever text leaves it.
        self._masker = SecretMasker()
        #: Events that happened by a moment without a request (idle expiries), not yet
        #: recorded: the credentials part says which.
        self.due: Callable[[float], list[Event]] = lambda now: []
        #: Notified on each event recorded while someone waits (:meth:`wait`): what
        #: ``MgmtServer.wait`` sleeps on.
        self.recorded = threading.Condition(lock)
        self._waiting = 0

    def now(self) -> float:
        return self._clock()

    def record(self, event: Event) -> None:
        masked = self._masked_event(event)
        with self._lock:
            if not self._events:
                self._anchor(event.at.timestamp())
            self._events.append(masked)
            if self._waiting:  # a notification costs five calls: only for a waiter
                self.recorded.notify_all()

    def wait(self, timeout: float) -> None:
        """Sleep until an event is recorded, at most ``timeout`` seconds (holding
        :attr:`recorded`, as ``Condition.wait`` does)."""
        self._waiting += 1
        try:
            self.recorded.wait(timeout)
        finally:
            self._waiting -= 1

    #: Seconds of slack in telling a jump: a frozen clock stands still while real time
    #: runs on, and mgmt_clock freezes at a whole second.
    _JUMP_SLACK = 2.0

    def _anchor(self, first: float) -> None:
        """Move time zero to ``first`` when the clock jumped before the first event by
        more than real time and the plugin's own clocks account for (another tool's
        ``travel`` or ``move_to``): offsets then count from the test's start on the
        clock the fake uses instead of reading like ``27174:37:44``. A ``move_to`` of the
        plugin's clock before the first event (pinning the date, as the OAuth example's
        fixture does) sets time zero to where it moved the clock; its advances after that
        still count."""
        sets, set_to, moves_then = _last_set[0]
        if sets != self._sets_at_start:
            self.started_at, self._moves_at_start = set_to, moves_then
        expected = self.started_at + (_known_moves[0] - self._moves_at_start)
        real = real_seconds() - self._real_at_start
        if abs(first - expected) > real + self._JUMP_SLACK:
            self.started_at = first

    def refuse(
        self,
        event: Event,
        code: int,
        reason: str,
        *,
        status: int = 401,
        message: str | None = None,
        retry_after: int | None = None,
        then: Event | None = None,
        body: Mapping[str, object] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> NoReturn:
        """Say no: record ``event`` (and ``then`` after it), then raise the
        :class:`Refusal` the transport renders as ``status`` with ``code`` and ``reason``
        (or as ``body`` with ``headers``, a flow's own error shape). The one way every
        part refuses."""
        self.record(event)
        if then is not None:
            self.record(then)
        raise Refusal(
            status,
            code,
            reason,
            message=message,
            retry_after=retry_after,
            body=body,
            headers=headers,
        )

    def redact(self, text: str) -> str:
        """``text`` with every secret of this test's accounts, tokens and sessions (also
        rotated-out and ended ones) replaced by its fingerprint: apply it to anything
        that quotes what a client sent before it leaves the fake."""
        return self._masker.mask(text)

    def masking_generation(self) -> int:
        """Changes whenever :meth:`redact` comes to mask another secret: a text redacted at
        one generation redacts alike while it stays."""
        return self._masker.generation

    def keep_masking(self, previous: Timeline) -> None:
        """Mask the secrets of ``previous`` too (the standalone server's state before a
        reset: its clients may still send the old sessions' ids)."""
        self._masker.add_all(previous._masker)

    def hold_secrets(self, *values: str) -> None:
        for value in values:
            self._masker.add(value)

    def _masked_event(self, event: Event) -> Event:
        """``event`` with every secret in its texts masked, in one pass over all of them
        (joined by NUL, which no secret spelling spans), not one pass per field."""
        texts = [
            (name, value)
            for name in _field_names(type(event))
            if isinstance(value := getattr(event, name), str) and value
        ]
        if not texts:
            return event
        changes: dict[str, Any] = {}
        joined = _FIELD_SEPARATOR.join([value for _, value in texts])  # a list: one call
        parts: list[str] = []
        if len(texts) > 1 and joined.count(_FIELD_SEPARATOR) == len(texts) - 1:
            # Each field is written out on its own, never the NULs joining them: fields
            # all visible ASCII get no escape a secret could run through.
            plain = joined.replace(_FIELD_SEPARATOR, "")
            masked = self._masker.mask(
                joined, escaped=not plain.isascii() or not plain.isprintable()
            )
            if masked == joined:
                return event
            parts = masked.split(_FIELD_SEPARATOR)
        if len(parts) != len(texts):  # one text, or one with a NUL of its own
            parts = [self._masker.mask(value) for _, value in texts]
        for (name, value), part in zip(texts, parts, strict=True):
            if part != value:
                changes[name] = part
        return dataclasses.replace(event, **changes) if changes else event

    @property
    def events(self) -> list[Event]:
        """The timeline, oldest first (a copy). Reading writes nothing: what has come
        due since the last write (a session's idle expiry) is computed here and recorded
        by the next write."""
        with self._lock:
            due = [self._masked_event(e) for e in self.due(self.now())]
            return sorted([*self._events, *due], key=lambda e: e.at)

    def offset(self, timestamp: float) -> str:
        """``HH:MM:SS`` from the same origin as the verdicts' timelines (or the date and
        time, 100 hours or more away)."""
        return format_moment(timestamp, timeline_origin(self._events, self.started_at))

    def record_now(self, event: Callable[[datetime], Event]) -> None:
        """Record the event ``event`` makes for this moment, under the lock."""
        with self._lock:
            self.record(event(to_datetime(self.now())))

    def record_call(
        self,
        auth: Authorization,
        method: str,
        path: str,
        status: int,
        *,
        host: str | None = None,
    ) -> None:
        """An authenticated call reached its route's handler and got ``status``
        (``host``: where it went, if not its flow's usual host)."""
        self.record_now(
            lambda at: ApiCall(
                at=at,
                username=auth.username,
                method=method,
                path=path,
                version=auth.version,
                credential=auth.credential,
                status=status,
                host=host,
            )
        )

    def record_bad_request(self, method: str, path: str, status: int, reason: str) -> None:
        self.record_now(
            lambda at: BadRequest(
                at=at, username=None, method=method, path=path, status=status, reason=reason
            )
        )

    def record_tunnel_closed(self, target: str, reason: str, via: str = "CONNECT") -> None:
        self.record_now(
            lambda at: TunnelClosed(at=at, username=None, target=target, reason=reason, via=via)
        )

    def record_unknown_route(self, method: str, path: str, status: int) -> None:
        self.record_now(
            lambda at: UnknownRoute(at=at, username=None, method=method, path=path, status=status)
        )


#: Joins an event's texts for one masking pass: a secret never contains it, so no
#: masked span crosses from one text into the next.
_FIELD_SEPARATOR = "\x00"


#: The field names of each kind of event, read once per kind.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type[Event]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(field.name for field in dataclasses.fields(kind))
    return names
