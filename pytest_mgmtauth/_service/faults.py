"""Scripted faults: what the next auth or login calls get instead of a normal answer.

Pure data and bookkeeping; the transport carries a fault out (it owns the socket). A
fault is scripted for the next ``count`` authentication calls of one flow (``version``, a
flow's name) or of any (``version=None``). Faults fire in the order they were scripted; a
call takes the first pending fault that applies to it.

A scripted fault never changes the service's state: a scripted 1401 is no failed login
(no step towards a lockout), a scripted 429 is no throttling, and no credential is
granted. It is what the client sees, recorded in the timeline as ``FaultInjected``.

A *scheduled* fault (:class:`ScheduledFault`) fires at a trigger point instead of "the
next call": just before protected call ``k`` (``call3``) or at authentication call ``k``
(``auth2``). The plan counts both kinds of call; the service carries out what fires.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from typing import TYPE_CHECKING, Any, cast

from .flows.registry import FLOWS, check_version
from .limits import MAX_DURATION, check_count, check_seconds, shown

if TYPE_CHECKING:
    from .limits import ScheduledKind, ScriptedKind

#: Service errors a scripted failure may name besides HTTP statuses (answered as 401).
SERVICE_ERRORS = (1401, 1402)
FAULT_KINDS = ("fail", "hang", "reset", "malformed")
HANG_CLOCKS = ("real", "simulated")
#: Retry-After of a scripted 429 when none is given, in seconds.
DEFAULT_RETRY_AFTER = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScriptedFault:
    """One kind of misbehaviour, for the next ``count`` matching calls.

    ``kind`` is ``"fail"`` (answer ``status`` with ``returnCode`` ``return_code``),
    ``"hang"`` (hold the request ``seconds`` on the ``clock``, then answer normally),
    ``"reset"`` (drop the TCP connection with a reset, no answer) or ``"malformed"``
    (200 with a truncated JSON body).
    """

    kind: ScriptedKind
    count: int = 1
    version: str | None = None
    status: int | None = None
    return_code: int | None = None
    retry_after: int | None = None
    seconds: float | None = None
    clock: str | None = None

    def applies_to(self, version: str) -> bool:
        return self.version is None or self.version == version

    def describe(self) -> str:
        """What the client gets, in a few words (timeline, control API)."""
        if self.kind == "fail":
            what = f"error {self.return_code}"
            if self.return_code != self.status:
                what += f" (HTTP {self.status})"
            if self.retry_after is not None:
                what += f", Retry-After {self.retry_after}s"
        elif self.kind == "hang":
            what = f"hang {self.seconds:g} s on the {self.clock} clock"
        elif self.kind == "reset":
            what = "connection reset, no answer"
        else:
            what = "200 with malformed (truncated) JSON"
        return what

    @property
    def endpoints(self) -> str:
        """The paths of the endpoints it applies to."""
        flows = [FLOWS[self.version]] if self.version else list(FLOWS.values())
        return " or ".join(e.path for flow in flows for e in flow.fault_endpoints())


def _scripted(kind: ScriptedKind, count: object, version: object, **fields: Any) -> ScriptedFault:
    """A :class:`ScriptedFault` whose ``count`` and ``version`` are checked: the flow it is
    for has endpoints faults apply to, or is ``None`` (any)."""
    checked = check_count("count", count, what="", hint=" (how many calls get the fault)")
    name = check_version(version, what="version", none="any")
    if name is not None and not FLOWS[name].fault_endpoints():
        with_points = ", ".join(repr(n) for n, f in FLOWS.items() if f.fault_endpoints())
        raise ValueError(
            f"version={name!r}: the {name} flow has no endpoint that scripted faults apply "
            f"to (its calls present the {FLOWS[name].secret} itself, with no authentication "
            f"call to fail): fault one of {with_points}, or make a route's handler answer "
            "the failure"
        )
    return ScriptedFault(kind=kind, count=checked, version=name, **fields)


def failure(
    error: int, *, count: int = 1, version: str | None = None, retry_after: int | None = None
) -> ScriptedFault:
    """The next calls answer ``error``: an HTTP status (4xx, 5xx; 429 gets ``Retry-After``)
    or a service error (1401 wrong credentials, 1402 locked out; both as HTTP 401)."""
    if isinstance(error, bool) or not isinstance(error, int):
        raise TypeError(f"error must be an int (an HTTP status or 1401/1402), got {shown(error)}")
    if error in SERVICE_ERRORS:
        status = 401
    elif 400 <= error <= 599:
        status = error
    else:
        raise ValueError(
            f"error must be an HTTP error status (400-599) or a service error "
            f"({', '.join(map(str, SERVICE_ERRORS))}), got {shown(error)}"
        )
    if retry_after is not None and (
        isinstance(retry_after, bool)
        or not isinstance(retry_after, int)
        or not 0 <= retry_after <= MAX_DURATION
    ):
        raise ValueError(
            f"retry_after must be an int >= 0 and <= {MAX_DURATION:.0f} (seconds), "
            f"got {shown(retry_after)}"
        )
    if retry_after is None and status == 429:
        retry_after = DEFAULT_RETRY_AFTER
    return _scripted(
        "fail", count, version, status=status, return_code=error, retry_after=retry_after
    )


def hang(
    seconds: float, *, clock: str = "real", count: int = 1, version: str | None = None
) -> ScriptedFault:
    """The next calls are held ``seconds`` before they are answered normally: on the
    ``"real"`` clock (client timeouts fire), or until the ``"simulated"`` clock has
    moved on by ``seconds`` (someone else advances it)."""
    seconds = check_seconds("seconds", seconds, what="")
    if clock not in HANG_CLOCKS:
        raise ValueError(f"clock must be 'real' or 'simulated', got {shown(clock)}")
    return _scripted("hang", count, version, seconds=seconds, clock=clock)


def reset(*, count: int = 1, version: str | None = None) -> ScriptedFault:
    """The next calls get their TCP connection reset, without an answer."""
    return _scripted("reset", count, version)


def malformed(*, count: int = 1, version: str | None = None) -> ScriptedFault:
    """The next calls get 200 with a JSON body cut off in the middle."""
    return _scripted("malformed", count, version)


#: Kinds of scheduled fault, and the kind of point each is triggered at: ``expire`` and
#: ``revoke`` end the credential in use just before protected call k, ``reset`` drops the
#: connection of protected call k, ``throttle`` (429) and ``unavailable`` (503) answer
#: authentication call k, ``busy`` answers protected call k 503 (an exploration's only).
SCHEDULED_KINDS: dict[str, str] = {
    "expire": "call",
    "revoke": "call",
    "throttle": "auth",
    "unavailable": "auth",
    "reset": "call",
    "busy": "call",
}
#: What the transport does instead of answering a protected call, per kind.
CALL_ANSWERS = {"reset": "the connection was reset, no answer", "busy": "answered 503"}
_POINT = re.compile(r"(call|auth)([1-9][0-9]*)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduledFault:
    """A fault at a trigger point: ``kind`` (see ``SCHEDULED_KINDS``) at ``on`` ``"call"``
    (protected call ``index``, counted from 1) or ``"auth"`` (authentication call
    ``index``: ``/v2/auth`` and ``/v1/login`` requests, counted together)."""

    kind: ScheduledKind
    on: str
    index: int

    @property
    def point(self) -> str:
        """The point as written: ``call3``, ``auth2``."""
        return f"{self.on}{self.index}"

    def __str__(self) -> str:
        return f"{self.kind}@{self.point}"

    def describe(self) -> str:
        """What happens, in a few words."""
        return {
            "expire": f"the credential in use expires just before protected call {self.index}",
            "revoke": f"the credential in use is revoked just before protected call {self.index}",
            "reset": f"the connection of protected call {self.index} is reset",
            "throttle": f"authentication call {self.index} answers 429 with Retry-After",
            "unavailable": f"authentication call {self.index} answers 503",
            "busy": f"protected call {self.index} answers 503",
        }[self.kind]


def scheduled(kind: object, at: object) -> ScheduledFault:
    """A :class:`ScheduledFault` from its kind and point (``"call3"``, ``"auth2"``, or an
    int for the point the kind is triggered at); ValueError saying what is accepted."""
    if not isinstance(kind, str) or kind not in SCHEDULED_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(SCHEDULED_KINDS)}")
    known = cast("ScheduledKind", kind)
    on = SCHEDULED_KINDS[known]
    if isinstance(at, int) and not isinstance(at, bool):
        if at < 1:
            raise ValueError(f"at must be >= 1 (calls are counted from 1), got {at!r}")
        return ScheduledFault(kind=known, on=on, index=at)
    match = _POINT.fullmatch(at) if isinstance(at, str) else None
    if match is None:
        raise ValueError(
            f"at must be a point like '{on}3' ({on}s counted from 1) or an int, got {at!r}"
        )
    if match.group(1) != on:
        what = "a protected call ('call3')" if on == "call" else "an authentication ('auth2')"
        raise ValueError(f"{kind} is triggered at {what}, not at {at!r}")
    return ScheduledFault(kind=known, on=on, index=int(match.group(2)))


def scheduled_failure(fault: ScheduledFault) -> ScriptedFault | None:
    """What the transport carries out for a scheduled fault on the call it fired at: a
    429 with Retry-After (``throttle``), a 503 (``unavailable``), a reset (``reset``);
    ``None`` for ``expire``/``revoke``, which the service carries out itself."""
    if fault.kind in ("throttle", "unavailable"):
        return failure(429 if fault.kind == "throttle" else 503)
    return reset() if fault.kind == "reset" else None


@dataclasses.dataclass(frozen=True)
class FiredFault:
    """A scripted fault taken by one call: ``ordinal`` of ``fault.count``. ``reason``:
    why the call gets it, where the fault is not one the test scripted (a retry inside
    the Retry-After of a scripted 429)."""

    fault: ScriptedFault
    ordinal: int
    reason: str | None = None


@dataclasses.dataclass
class _Entry:
    fault: ScriptedFault
    used: int = 0


class FaultPlan:
    """The queue of scripted faults of one test (or one standalone server). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[_Entry] = []
        self._scheduled: list[ScheduledFault] = []
        #: Clock moves due just before a protected call: (call index, seconds).
        self._moves: list[tuple[int, float]] = []
        #: Calls counted so far, for the trigger points of scheduled faults.
        self.auth_calls = 0
        self.protected_calls = 0

    # -- scheduled faults (trigger points) -------------------------------------------

    def schedule(self, fault: ScheduledFault) -> None:
        with self._lock:
            self._scheduled.append(fault)

    def auth_call(self) -> ScheduledFault | None:
        """Count an authentication call; the scheduled fault it triggers, if any."""
        with self._lock:
            self.auth_calls += 1
            return self._fire("auth", self.auth_calls)

    def protected_call(self) -> ScheduledFault | None:
        """Count a protected call; the scheduled fault carried out on it, if any
        (``reset``, ``busy``; ``expire`` and ``revoke`` fire from :meth:`before_call`)."""
        with self._lock:
            self.protected_calls += 1
            if not self._scheduled:
                return None
            return self._fire("call", self.protected_calls, kinds=tuple(CALL_ANSWERS))

    def schedule_move(self, index: int, seconds: float) -> None:
        """Move the clock on by ``seconds`` just before protected call ``index``."""
        with self._lock:
            self._moves.append((index, seconds))

    def before_call(self, index: int) -> tuple[list[float], list[ScheduledFault]]:
        """The clock moves and the ``expire``/``revoke`` faults due before protected call
        ``index`` (taken: each fires once)."""
        with self._lock:
            if not self._moves and not self._scheduled:
                return [], []
            moves = [seconds for at, seconds in self._moves if at == index]
            self._moves = [(at, seconds) for at, seconds in self._moves if at != index]
            # Both kinds are triggered at protected calls only (SCHEDULED_KINDS).
            due = [
                f for f in self._scheduled if f.index == index and f.kind in ("expire", "revoke")
            ]
            for fault in due:
                self._scheduled.remove(fault)
            return moves, due

    def _fire(
        self, on: str, index: int, kinds: tuple[str, ...] | None = None
    ) -> ScheduledFault | None:
        for fault in self._scheduled:
            if fault.on == on and fault.index == index and (kinds is None or fault.kind in kinds):
                self._scheduled.remove(fault)
                return fault
        return None

    def scheduled(self) -> list[ScheduledFault]:
        """Scheduled faults that have not fired (yet)."""
        with self._lock:
            return list(self._scheduled)

    def add(self, fault: ScriptedFault) -> None:
        with self._lock:
            self._pending.append(_Entry(fault))

    def take(self, version: str) -> FiredFault | None:
        """The fault the next call of ``version`` gets, if any, and count it as used."""
        with self._lock:
            for entry in self._pending:
                if entry.fault.applies_to(version):
                    entry.used += 1
                    if entry.used >= entry.fault.count:
                        self._pending.remove(entry)
                    return FiredFault(entry.fault, entry.used)
            return None

    def any_for(self, version: str) -> bool:
        """Whether a fault is pending for a call of ``version`` (a cheap look first: most
        calls meet no fault)."""
        with self._lock:
            return any(e.fault.applies_to(version) for e in self._pending)

    def pending(self) -> list[ScriptedFault]:
        """Faults not fired yet, each with the number of calls it still applies to."""
        with self._lock:
            return [
                dataclasses.replace(e.fault, count=e.fault.count - e.used) for e in self._pending
            ]

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()
            self._scheduled.clear()
            self._moves.clear()
