"""What a sweep runs: its points (the baseline, then a fault kind at the n-th protected
call or authentication) and the checked settings that choose them.

Pure: no pytest. The glue (``_sweep.py``) reads the marker, the flags and the ini
settings and parametrizes the swept tests with these points.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ._domain._faults import SCHEDULED_KINDS

if TYPE_CHECKING:
    from collections.abc import Sequence

FAULT_KINDS = tuple(SCHEDULED_KINDS)
DEFAULT_POINTS = 5
MAX_POINTS = 100
BASELINE = "baseline"


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
        return f"{self.kind}@{SCHEDULED_KINDS[self.kind]}{self.index}"

    @property
    def id(self) -> str:
        return f"mgmtauth-{self.label}"


def check_faults(faults: object, where: str) -> tuple[str, ...]:
    """The fault kinds of a sweep, validated: ValueError naming the known kinds."""
    if isinstance(faults, str):
        faults = (faults,)
    if not isinstance(faults, (tuple, list)):
        raise ValueError(
            f"{where}: faults must be a tuple of fault kinds ({', '.join(FAULT_KINDS)}), "
            f"got {faults!r}"
        )
    kinds: list[str] = []
    for kind in faults:
        if not isinstance(kind, str) or kind not in SCHEDULED_KINDS:
            raise ValueError(
                f"{where}: unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}"
            )
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
