"""What a run reports: the title of a test's report section and reading it back; the
per-test figures of the ``mgmtauth`` terminal summary section and the plugin that collects
them and prints that section (:class:`TerminalReport`); each test's timeline written into
its JUnit XML testcase (:class:`JunitTimelines`); the teardown check of a test's findings
(a failure when strict, else a warning of the finding's kind); and the errors raised in
the fake after the test they belonged to had ended.

Imported only by a run that shows the table (-v, ``--mgmtauth-report``), writes JUnit XML
or uses ``mgmt_server``: the findings are imported by the check that needs them."""

from __future__ import annotations

import re
import traceback
import warnings
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

    from .._fake.server import MgmtServer
    from .._verdicts.findings import Finding

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


def format_table(rows: Sequence[tuple[str, dict[str, int]]]) -> list[str]:
    """One line per test plus a header and a total; churning tests are marked."""
    width = max([len("test"), *(len(nodeid) for nodeid, _ in rows)])
    lines = [f"{'test':<{width}}" + "".join(f"  {title:>8}" for _, title in COLUMNS)]
    for nodeid, values in rows:
        cells = "".join(f"  {values.get(name, 0):>8}" for name, _ in COLUMNS)
        mark = "  <- churn" if values.get("mgmtauth_churn") else ""
        lines.append(f"{nodeid:<{width}}{cells}{mark}".rstrip())
    totals = "".join(f"  {sum(v.get(name, 0) for _, v in rows):>8}" for name, _ in COLUMNS)
    lines.append(f"{f'total ({len(rows)} tests)':<{width}}{totals}")
    return lines


class TerminalReport:
    """Collects each test's figures from its teardown report; prints the section (the
    plugin registers it for -v or ``--mgmtauth-report`` only)."""

    def __init__(self) -> None:
        self._rows: list[tuple[str, dict[str, int]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        values = {
            name: value
            for name, value in report.user_properties
            if name in PROPERTY_NAMES and isinstance(value, int)
        }
        if values:
            self._rows.append((report.nodeid, values))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self._rows:
            return
        terminalreporter.write_sep("=", "mgmtauth: credentials per test")
        # By node id: reports arrive in completion order, which xdist shuffles.
        for line in format_table(sorted(self._rows, key=lambda row: row[0])):
            terminalreporter.write_line(line)


#: Characters XML 1.0 cannot hold (a request path can bring them into a timeline): the
#: complement of its Char production (tab, LF, CR, U+0020-U+D7FF, U+E000-U+FFFD,
#: U+10000-U+10FFFF), spelled as the few ranges it leaves out: the negated class of the
#: allowed ranges matches the same code points but is far slower to compile, at every
#: start of pytest.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class JunitTimelines:
    """Writes each test's ``mgmtauth timeline`` section into its JUnit XML testcase as
    ``<system-err>``, whatever ``junit_logging`` says (pytest writes only captured
    output there). Runs on the xdist controller, from the reports the workers send."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        #: Per test: the text to write at its teardown.
        self._texts: dict[tuple[str, object], str] = {}

    def _xml(self) -> Any:
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover - a pytest without it
            return None
        return self._config.stash.get(xml_key, None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        text = next((text for title, text in report.sections if title == SECTION_TITLE), None)
        key = report.nodeid, getattr(report, "node", None)
        if text is not None:
            self._texts[key] = text
        held = None
        if report.when == "teardown" and key in self._texts:
            xml = self._xml()
            # junitxml closes the testcase while it handles this report: take it now, and
            # add to it after, so the element follows the <failure> or <error> (as the
            # JUnit schema orders them).
            held = xml.node_reporter(report) if xml is not None else None
        yield
        if report.when != "teardown":
            return
        text = self._texts.pop(key, None)
        if held is None or text is None:
            return
        element = ET.Element("system-err")
        element.text = _NOT_XML.sub(
            lambda m: f"#x{ord(m.group()):02X}",
            "\n".join([f" {SECTION_TITLE} ".center(80, "-"), text, ""]),
        )
        if "to_xml" in vars(held):  # closed: its testcase element is final, add to it
            held.to_xml().append(element)
        else:
            held.append(element)


#: The assertion that takes over each kind's teardown check.
_ASSERTIONS = {
    "churn": "assert_token_reused",
    "expired_use": "assert_no_expired_token_used",
    "refused_call": "assert_no_refused_calls",
    "open_session": "assert_logged_out",
}


def _strict_hint(kind: str) -> str:
    if kind == "deprecated_version":
        how = (
            "sunset_check='fail'), the ini setting mgmtauth_sunset_check = fail or "
            "--mgmtauth-sunset-check=fail; 'off' stops the check"
        )
    else:
        how = "strict=True), the ini setting mgmtauth_strict = true or --mgmtauth-strict"
        if kind in _ASSERTIONS:
            how += (
                f"; check it in the test with mgmt_server.{_ASSERTIONS[kind]}(), which "
                "replaces this check"
            )
    on_purpose = (
        " A test that sends wrong credentials on purpose says so with "
        "mgmt_server.expect_refusals()."
        if kind == "refused_call"
        else ""
    )
    return (
        "(pytest-mgmtauth checks this at the end of every test that uses mgmt_server. "
        f"Fail such tests with @pytest.mark.mgmtauth({how}.{on_purpose})"
    )


def check_findings(
    item: pytest.Item, fake: MgmtServer, *, call_failed: bool, in_section: bool
) -> None:
    """The teardown check: each finding (churn, expired-credential use, and open v1
    sessions with require_logout) fails a strict test, else becomes a warning of its
    kind's class (calls to API versions past Active: as ``sunset_check`` says). A test
    that failed already (``call_failed``) only warns, and when its report section holds
    the timeline (``in_section``) the warning does not repeat it."""
    __tracebackhide__ = True
    from .._verdicts.findings import KINDS, WARNINGS, failing_kinds

    found = fake.teardown_findings()
    if not found:
        return
    failing = [] if call_failed else [f for f in found if f.kind in failing_kinds(fake.options)]
    for kind in KINDS:
        mine = [f for f in found if f.kind == kind and f not in failing]
        if mine:
            warn_at(item, WARNINGS[kind](_warning_text(kind, mine, in_section=in_section)))
    if failing:
        # The error's report carries the timeline in its section: not printed twice.
        pytest.fail(
            "\n\n".join("\n\n".join(filter(None, (f.headline, f.fix))) for f in failing)
            + f"\n\n(the timeline is in the test's '{SECTION_TITLE}' report section)",
            pytrace=False,
        )


def warn_at(item: pytest.Item, warning: Warning) -> None:
    """Warn ``warning`` attributed to the test function, not to this file, in pytest's
    warnings summary."""
    path, lineno, _ = item.reportinfo()
    warnings.warn_explicit(warning, type(warning), filename=str(path), lineno=(lineno or 0) + 1)


def _warning_text(kind: str, found: list[Finding], *, in_section: bool) -> str:
    if in_section:
        return (
            "\n".join(f.headline for f in found)
            + f"\n(the timeline is in the test's '{SECTION_TITLE}' report section)"
        )
    return "\n\n".join(f.message for f in found) + "\n" + _strict_hint(kind)


def late_errors_message(
    errors: Sequence[tuple[str, str, BaseException]],
    still_running: Sequence[tuple[str, str]],
    *,
    grace: float,
) -> str | None:
    """The session's last word on errors raised after their test had ended, and on
    route handlers still running ``grace`` seconds after the last test; None if none."""
    lines = []
    if errors:
        lines.append(
            f"pytest-mgmtauth: {len(errors)} error(s) raised in the fake service after the "
            "test they belonged to had ended (its client had stopped waiting for the "
            "answer), so that test could not report them:"
        )
        for owner, where, error in errors:
            lines += ["", f"in {owner}: {where} raised {type(error).__name__}: {error}"]
            lines.extend(line.rstrip("\n") for line in traceback.format_exception(error))
    if still_running:
        lines += [
            "",
            f"pytest-mgmtauth: route handler(s) still running {grace:g} s after "
            "the last test ended; whatever they raise is lost:",
        ]
        lines.extend(f"  in {owner}: {where}" for owner, where in still_running)
    return "\n".join(lines) or None
