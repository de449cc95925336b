"""The words and numbers the fake takes: the vocabulary of its parameters and fields as
types, the limits of every number (durations, counts, clock advances) and the one check
of each, with an error that names the value and the allowed range: used by
:class:`~.options.Options` and by the clock, locks, hangs and faults alike."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Literal, TypeAlias

#: The secret an account authenticates with (each flow says which).
SecretKind: TypeAlias = Literal["API key", "password", "client secret"]
#: Why a session ended: ``/v1/logout``, idle timeout, or on cue.
EndReason: TypeAlias = Literal["logout", "timeout", "revoked", "expired"]
#: How a credential is ended on cue (``mgmt_server.expire`` / ``revoke``).
EndOnCue: TypeAlias = Literal["expired", "revoked"]
#: A scripted fault of the next auth calls (``fail_next`` and friends).
ScriptedKind: TypeAlias = Literal["fail", "hang", "reset", "malformed"]
#: A fault a sweep schedules at a trigger point (``schedule_fault`` takes them all).
SweepKind: TypeAlias = Literal["expire", "revoke", "throttle", "unavailable", "reset"]
#: A fault scheduled at a trigger point (``schedule_fault``): a sweep's, or ``busy`` (a
#: 503 on a protected call), which only an exploration draws.
ScheduledKind: TypeAlias = Literal[SweepKind, "busy"]

_YEAR = 365 * 86400
#: The longest duration an option, a lock or a hang may be: 10 years, in seconds.
MAX_DURATION: float = 10 * _YEAR
#: The farthest one clock advance may move: 100 years, in seconds.
MAX_ADVANCE: float = 100 * _YEAR
#: The simulated time never goes past this instant (3000-01-01 UTC, seconds since the
#: epoch), so that it plus :data:`MAX_DURATION` stays a ``datetime``, a JWT ``exp`` and a
#: freezegun time.
LATEST_TIME: float = 32503680000.0
#: The largest count option (lockout_threshold, throttle) or fault count.
MAX_COUNT = 1_000_000


def describe_range(low: float, high: float, allow_zero: bool, unit: str) -> str:
    lower = ">= 0" if allow_zero and low == 0 else f">= {low:g}" if low else "> 0"
    years = f" ({high / _YEAR:g} years)" if unit == "seconds" and high >= _YEAR else ""
    return f"{lower} and <= {high:.0f} {unit}{years}"


def shown(value: object) -> str:
    """A value in a message: its repr if short, else only its type and size (no
    5000-digit number, no megabyte; and never part of a string, which might be the
    prefix of a secret that the masking of whole secrets would not recognise)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return "a huge int"
    text = repr(value)
    return text if len(text) <= 60 else f"a {type(value).__name__} of {len(text)} characters"


def check_seconds(
    name: str,
    value: object,
    *,
    allow_zero: bool = False,
    maximum: float = MAX_DURATION,
    what: str = "mgmtauth option",
) -> float:
    """``value`` as finite seconds in range, or a TypeError/ValueError naming ``name``,
    the value and the allowed range. The one check of every duration: options (marker,
    ini, command line), the clock, locks and hangs."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    allowed = describe_range(0, maximum, allow_zero, "seconds")
    label = f"{what} {name!r}" if what else name
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{label} takes seconds (int, float or timedelta) {allowed}, "
            f"got {type(value).__name__} {shown(value)}"
        )
    negative = value < 0 or (value == 0 and math.copysign(1.0, value) < 0)
    bad = (
        (isinstance(value, float) and math.isnan(value))
        or negative
        or (value == 0 and not allow_zero)
        or value > maximum  # an int of any size compares without overflow
    )
    if bad:
        raise ValueError(f"{label} must be {allowed}, got {shown(value)}")
    return float(value)


def check_count(name: str, value: object, *, what: str = "mgmtauth option", hint: str = "") -> int:
    """``value`` as an int in 1..:data:`MAX_COUNT`, or an error naming the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        label = f"{what} {name!r}" if what else name
        raise ValueError(
            f"{label} must be an int >= 1 and <= {MAX_COUNT}{hint}, got {shown(value)}"
        )
    return value


def check_advance(
    now: float,
    *,
    seconds: object = 0,
    minutes: object = 0,
    hours: object = 0,
    what: str = "advance()",
    backwards: str = "",
) -> float:
    """How far to move a clock that reads ``now``: the sum of the parts in seconds, each
    finite and >= 0, the sum at most :data:`MAX_ADVANCE` and the new time not past
    :data:`LATEST_TIME`; otherwise a TypeError/ValueError that names the part."""
    subject = what or "the clock"
    total = 0.0
    for name, value, unit in (
        ("seconds", seconds, 1),
        ("minutes", minutes, 60),
        ("hours", hours, 3600),
    ):
        if isinstance(value, timedelta):
            raise TypeError(f"{subject} {name}= takes a number of {name}, got a timedelta")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise ValueError(
                f"{subject} moves time forward only (got {name}={shown(value)}){backwards}"
            )
        checked = check_seconds(name, value, allow_zero=True, maximum=MAX_ADVANCE / unit, what=what)
        total += checked * unit
    if total > MAX_ADVANCE:
        raise ValueError(
            f"{subject} moves at most {MAX_ADVANCE:.0f} seconds (100 years) at once, got "
            f"{total:.0f} seconds"
        )
    if now + total > LATEST_TIME:
        raise ValueError(
            f"{subject} would move past 3000-01-01 (the latest time it can show "
            f"with room for every duration); it can move {max(0.0, LATEST_TIME - now):.0f} "
            f"seconds more, got {total:.0f}"
        )
    return total
