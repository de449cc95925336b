"""The words and numbers the fake takes: the vocabulary of its parameters and fields as
types, the limits of every number (durations, counts, clock advances) and the one check
of each, with an error that names the value and the allowed range: used by
:class:`~.options.Options` and by the clock, locks, hangs and faults alike. And how an
option is declared and read (:class:`OptionSpec`, the checks of host names and
paths); the declarations themselves are in ``options.py``."""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import timedelta
from typing import Generic, Literal, TypeAlias, TypeVar, overload

#: The secret an account authenticates with (each flow says which).
SecretKind: TypeAlias = Literal["API key", "password", "client secret"]
#: Why a session ended: ``/v1/logout``, idle timeout, or on cue.
EndReason: TypeAlias = Literal["logout", "timeout", "revoked", "expired"]
#: How a credential is ended on cue (``mgmt_server.expire`` / ``revoke``).
EndOnCue: TypeAlias = Literal["expired", "revoked"]
#: A scripted fault of the next auth calls (``fail_next`` and friends).
ScriptedKind: TypeAlias = Literal["fail", "hang", "reset", "malformed"]
#: A fault scheduled at a trigger point (``schedule_fault``, sweeps).
ScheduledKind: TypeAlias = Literal["expire", "revoke", "throttle", "unavailable", "reset"]

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


# -- options: how one is declared, parsed and checked -------------------------------

#: What a duration option reads back as: seconds (``float``), or ``float | None`` for
#: ``refresh_margin``, whose ``None`` means "derive it".
_Read = TypeVar("_Read", bound="float | None")


class Duration(Generic[_Read]):
    """A duration field of :class:`~.options.Options`: set as seconds or a ``timedelta``,
    read back as seconds.

    A descriptor for the sake of type checkers, which take ``__set__``'s value type as
    the parameter's and ``__get__``'s return type as the attribute's: so
    ``Options(token_ttl=timedelta(minutes=5))``, as documented, type-checks, and
    ``options.token_ttl`` is still a ``float``. The value is kept in the instance's
    ``__dict__`` under the field's name, as without the descriptor; ``__post_init__``
    checks it and converts it to seconds, as it does every other field."""

    def __init__(self, default: _Read) -> None:
        self._default = default
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type) -> _Read: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _Read: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> _Read:
        if instance is None:  # the class's attribute: dataclasses reads the default here
            return self._default
        try:
            value: _Read = instance.__dict__[self._name]
        except KeyError:  # not set yet: what hasattr() and getattr(..., default) expect
            raise AttributeError(self._name) from None
        return value

    def __set__(self, instance: object, value: float | timedelta | _Read) -> None:
        instance.__dict__[self._name] = value


_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_HOST_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})+$")


def is_host_name(value: object) -> bool:
    """A DNS name of two labels or more, lower case, without scheme, port or path."""
    return isinstance(value, str) and len(value) <= 253 and bool(_HOST_NAME.match(value))


def check_path(name: str, path: object) -> None:
    """A path option: an absolute path without query, fragment or spaces, outside the
    control API's prefix."""
    if not isinstance(path, str):
        raise TypeError(f"mgmtauth option {name!r} must be a str, got {shown(path)}")
    if not path.startswith("/") or path == "/":
        raise ValueError(
            f"mgmtauth option {name!r} must be a path like '/oauth/token', got {shown(path)}"
        )
    if (
        any(c in path for c in "?#{}%")
        or path.startswith("//")
        or not path.isascii()
        or not path.isprintable()
    ):
        # What no request reaches as written: the path is matched decoded, without the
        # query, and '//x' is read as a host.
        raise ValueError(
            f"mgmtauth option {name!r} must be a plain path (no query, fragment, braces, "
            f"percent-escapes, leading '//', spaces or non-ASCII), got {shown(path)}"
        )
    if " " in path or path.startswith("/_mgmtauth"):
        raise ValueError(
            f"mgmtauth option {name!r}: {shown(path)} has a space or is under /_mgmtauth "
            "(mgmtauth-server's control API)"
        )


def _shown_text(text: str) -> str:
    """A typed value in a message: whole if short, else its start and length."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One option's declaration. ``kind`` is ``"seconds"``, ``"count"``, ``"bool"``,
    ``"text"`` or ``"choice"``; ``none_words`` are the texts that mean ``None``."""

    name: str
    kind: str
    help: str
    metavar: str = ""
    none_words: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    #: What a text that does not parse should have been (defaults by kind).
    expected: str = ""
    #: Meaningful inside pytest only (not a ``mgmtauth-server`` flag).
    test_only: bool = False
    #: The help of the flag of a ``"bool"`` option that is on by default (the flag
    #: switches it off: ``--no-<name>``); ``help`` stays the ini setting's.
    off_help: str = ""

    @property
    def default(self) -> object:
        from .options import Options  # the options import this module: read it when used

        return Options.__dataclass_fields__[self.name].default

    @property
    def flag(self) -> str:
        """The ``mgmtauth-server`` flag; pytest's is ``--mgmtauth-`` + the same. A flag
        switches a ``"bool"`` option away from its default: ``--no-<name>`` for one that
        is on by default (``--no-keep-alive``), ``--<name>`` otherwise."""
        negated = self.kind == "bool" and self.default is True
        return ("--no-" if negated else "--") + self.name.replace("_", "-")

    @property
    def flag_help(self) -> str:
        """The help of :attr:`flag` (``off_help`` for a ``--no-<name>`` flag)."""
        return self.off_help if self.flag.startswith("--no-") and self.off_help else self.help

    @property
    def allowed(self) -> str:
        """The range of the option in words (for help texts)."""
        if self.kind == "seconds":
            return describe_range(0, MAX_DURATION, self.name == "refresh_margin", "seconds")
        if self.kind == "count":
            return f">= 1 and <= {MAX_COUNT}" + (" or none" if self.none_words else "")
        if self.kind == "choice":
            return " or ".join(self.choices)
        return ""

    def parse(self, text: str) -> object:
        """The value a command line or ini text means; ValueError saying what was
        expected (the caller adds where it came from). Ranges: :class:`Options`."""
        word = text.strip().lower()
        if self.none_words and word in self.none_words:
            return None
        if self.kind == "bool":
            if word in ("1", "true", "yes", "on"):
                return True
            if word in ("0", "false", "no", "off"):
                return False
        elif self.kind == "text":
            return text.strip()
        elif self.kind == "choice":
            if word in self.choices:
                return word
        else:
            # One sign at most: "--0" must be the parse error below, not int()'s.
            digits = word[1:] if word[:1] in ("+", "-") else word
            if digits.isascii() and digits.isdigit():
                # A whole number stays exact (10**400 is not inf: Options names the
                # range); past int()'s 4300 digits, say so without echoing it all.
                if len(digits) > 4000:
                    raise ValueError("a number far too large")
                return int(word)
            if self.kind == "seconds":
                try:
                    return float(word)
                except ValueError:
                    pass
        raise ValueError(self.expected or _EXPECTED[self.kind])


_EXPECTED = {
    "seconds": "expected a number of seconds",
    "count": "expected a whole number",
    "bool": "expected true or false",
    "choice": "expected one of the choices",
    "text": "expected text",
}
