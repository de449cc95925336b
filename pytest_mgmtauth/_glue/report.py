"""What a run reports: the title of a test's report section and reading it back, the
per-test figures of the ``mgmtauth`` terminal summary section, as text, and the plugin
that collects them and prints that section (:class:`TerminalReport`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pytest

#: The title of the report section that holds a test's timeline and verdicts.
SECTION_TITLE = "mgmtauth timeline"

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


def section_text(report: pytest.TestReport) -> str | None:
    """The ``mgmtauth timeline`` section of a report, or None."""
    for title, content in report.sections:
        if title == SECTION_TITLE:
            return content
    return None


class TerminalReport:
    """Collects each test's figures from its teardown report; prints the section."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._rows: list[tuple[str, dict[str, int]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        values = figures(report.user_properties)
        if values is not None:
            self._rows.append((report.nodeid, values))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        config = self._config
        if not self._rows or not (
            config.getoption("mgmtauth_report") or config.getoption("verbose") > 0
        ):
            return
        terminalreporter.write_sep("=", "mgmtauth: credentials per test")
        # By node id: reports arrive in completion order, which xdist shuffles.
        for line in format_table(sorted(self._rows, key=lambda row: row[0])):
            terminalreporter.write_line(line)
