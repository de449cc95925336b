"""What every event is: the base class :class:`Event`, whose ``describe(when)`` and
``line(when)`` are the one event-to-text path, and how those texts show a moment
(:data:`TimeFormat`, :func:`iso_time`, :func:`format_offset`, :func:`timeline_origin`).

The event classes themselves are in ``_clientevents.py`` and ``_cueevents.py``; the rest
of the package imports them all from ``_events.py``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, ClassVar, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

#: How a text shows a moment: the timeline's offsets, ISO 8601 in the control API.
TimeFormat: TypeAlias = "Callable[[datetime], str]"


def iso_time(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``: the default :data:`TimeFormat`."""
    return value.isoformat().replace("+00:00", "Z")


def format_offset(seconds: float) -> str:
    """Simulated time since the test started, as ``HH:MM:SS``."""
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    return f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


def timeline_origin(events: Sequence[Event], started_at: float) -> float:
    """Time zero of a timeline: the test's start, or an earlier event if the clock was
    moved back (``mgmt_clock.move_to``), so offsets stay readable. Whole seconds, like a
    wall clock: without a frozen clock the test starts mid-second, and a token's exp
    (whole seconds) would show as 00:29:59; never "-00:00:00"."""
    first = min((e.at.timestamp() for e in events), default=started_at)
    return math.floor(min(started_at, first))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    at: datetime
    username: str | None

    #: Whether a timeline line says "[no known account]" when ``username`` is None.
    _names_account: ClassVar[bool] = True

    def describe(self, when: TimeFormat = iso_time) -> str:
        """What happened, as complete text; ``when`` formats the moments it names."""
        return type(self).__name__

    def line(self, when: TimeFormat) -> str:
        """One line of a timeline (assertions, reports, sweeps), without the time."""
        text = self._timeline_text(when)
        if self.username is None and self._names_account:
            text += "  [no known account]"
        return text

    def _timeline_text(self, when: TimeFormat) -> str:
        return self.describe(when)
