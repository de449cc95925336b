"""What a sweep runs: its points (the baseline, then a fault kind at the n-th protected
call or authentication), the checked settings that choose them, and the names a sweep
goes by in pytest (marker, fixture, ``user_properties``).

Pure: no pytest. The glue (``_glue/settings.py`` for the flags and ini settings, ``_glue/sweep.py``
for the rest) reads the marker and the settings and parametrizes the swept tests with
these points. Every run of pytest imports this module (for the flags' help and the
marker's description), so it imports no more than the fault kinds' names: the table of
scheduled faults (``_service/faults.py``) is read when a point is labelled.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, get_args

from .._service.limits import ScheduledKind, SweepKind

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The kinds of fault a sweep schedules, and those an exploration draws (also ``busy``),
#: in the order of ``_faults.SCHEDULED_KINDS`` (a test checks that they agree).
FAULT_KINDS: tuple[str, ...] = get_args(SweepKind)
EXPLORE_KINDS: tuple[str, ...] = get_args(ScheduledKind)
DEFAULT_POINTS = 5
MAX_POINTS = 100
BASELINE = "baseline"

MARKER = "mgmtauth_sweep"
#: The fixture the sweep parametrizes (``mgmt_server`` depends on it).
FIXTURE = "_mgmtauth_sweep"
#: An exploration's marker and its user_properties entry (``explore_plan.py`` is the
#: rest of it): named here, so that a run of pytest does not import that module.
EXPLORE_MARKER = "mgmtauth_explore"
EXPLORE_PROP = "mgmtauth_explore"

#: user_properties (JUnit XML <property>) of a sweep item.
PROP_TEST = "mgmtauth_sweep_test"
PROP_FAULT = "mgmtauth_sweep_fault"
PROP_POINT = "mgmtauth_sweep_point"
PROP_OUTCOME = "mgmtauth_sweep_outcome"
PROP_AFTER = "mgmtauth_sweep_after"
PROP_NOTE = "mgmtauth_sweep_note"


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One sweep item's fault: ``kind`` at point ``index`` (``None``: the baseline)."""

    kind: str | None
    index: int = 0

    @property
    def label(self) -> str:
        """``baseline``, ``expire@call3``, ``throttle@auth2``."""
        if self.kind is None:
            return BASELINE
        from .._service.faults import SCHEDULED_KINDS

        return f"{self.kind}@{SCHEDULED_KINDS[self.kind]}{self.index}"

    @property
    def id(self) -> str:
        return f"mgmtauth-{self.label}"


def check_faults(
    faults: object, where: str, known: tuple[str, ...] = FAULT_KINDS
) -> tuple[str, ...]:
    """The fault kinds of a sweep (or of an exploration: ``known``), validated:
    ValueError naming the known kinds."""
    if isinstance(faults, str):
        faults = (faults,)
    if not isinstance(faults, (tuple, list)):
        raise ValueError(
            f"{where}: faults must be a tuple of fault kinds ({', '.join(known)}), got {faults!r}"
        )
    kinds: list[str] = []
    for kind in faults:
        if not isinstance(kind, str) or kind not in known:
            raise ValueError(f"{where}: unknown fault kind {kind!r}; known: {', '.join(known)}")
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


def check_points(points: object, where: str) -> int:
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_POINTS:
        raise ValueError(
            f"{where}: points must be a positive int (at most {MAX_POINTS}): the calls "
            f"swept per fault kind, got {points!r}"
        )
    return points


def parse_faults_option(raw: str, where: str) -> tuple[str, ...]:
    text = raw.strip().lower()
    if text == "all":
        return FAULT_KINDS
    if text in ("", "none", "off"):
        return ()
    return check_faults([part.strip() for part in text.split(",") if part.strip()], where)


def parse_points_option(raw: str, where: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"{where} = {raw!r}: expected a positive whole number") from None
    return check_points(value, where)


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """The sweep of every test from the command line / ini (``faults`` empty: none)."""

    faults: tuple[str, ...] = ()
    points: int = DEFAULT_POINTS


def sweep_points(faults: Sequence[str], points: int) -> list[SweepPoint]:
    """The baseline, then every point of every fault kind."""
    return [SweepPoint(None)] + [
        SweepPoint(kind, index) for kind in faults for index in range(1, points + 1)
    ]
