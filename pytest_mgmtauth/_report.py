"""The per-test figures of the ``mgmtauth`` terminal summary section, as text."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

#: user_properties names (JUnit XML <property> names) and their column headers.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("mgmtauth_grants", "grants"),
    ("mgmtauth_api_calls", "calls"),
    ("mgmtauth_rejections", "rejected"),
    ("mgmtauth_churn", "churn"),
    ("mgmtauth_concurrent", "herd"),
)
PROPERTY_NAMES = frozenset(name for name, _ in COLUMNS)


def figures(user_properties: Sequence[tuple[str, object]]) -> dict[str, int] | None:
    """The mgmtauth figures among a report's user_properties, or None if it has none."""
    found = {}
    for name, value in user_properties:
        if name in PROPERTY_NAMES and isinstance(value, int):
            found[name] = value
    return found or None


def format_table(rows: Sequence[tuple[str, dict[str, int]]]) -> list[str]:
    """One line per test plus a header and a total; churning tests are marked."""
    width = max([len("test"), *(len(nodeid) for nodeid, _ in rows)])
    head = f"{'test':<{width}}" + "".join(f"  {title:>8}" for _, title in COLUMNS)
    lines = [head]
    totals = dict.fromkeys(PROPERTY_NAMES, 0)
    for nodeid, values in rows:
        cells = "".join(f"  {values.get(name, 0):>8}" for name, _ in COLUMNS)
        mark = "  <- churn" if values.get("mgmtauth_churn") else ""
        lines.append(f"{nodeid:<{width}}{cells}{mark}".rstrip())
        for name in PROPERTY_NAMES:
            totals[name] += values.get(name, 0)
    total = f"{f'total ({len(rows)} tests)':<{width}}" + "".join(
        f"  {totals[name]:>8}" for name, _ in COLUMNS
    )
    lines.append(total)
    return lines
