"""What the plugin reports at the end of a test and of the session: the teardown check of
a test's findings (a failure when strict, else a warning of the finding's kind), and the
errors raised in the fake after the test they belonged to had ended."""

from __future__ import annotations

import traceback
import warnings
from typing import TYPE_CHECKING

import pytest

from .._verdicts.findings import KINDS, WARNINGS, Finding
from .report import SECTION_TITLE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._fake.server import MgmtServer


#: The assertion that takes over each kind's teardown check.
_ASSERTIONS = {
    "churn": "assert_token_reused",
    "expired_use": "assert_no_expired_token_used",
    "refused_call": "assert_no_refused_calls",
    "open_session": "assert_logged_out",
}


def _strict_hint(kind: str) -> str:
    assertion = _ASSERTIONS.get(kind)
    instead = (
        f"; check it in the test with mgmt_server.{assertion}(), which replaces this check"
        if assertion
        else ""
    )
    on_purpose = (
        " A test that sends wrong credentials on purpose says so with "
        "mgmt_server.expect_refusals()."
        if kind == "refused_call"
        else ""
    )
    return (
        "(pytest-mgmtauth checks this at the end of every test that uses mgmt_server. "
        "Fail such tests with @pytest.mark.mgmtauth(strict=True), the ini setting "
        f"mgmtauth_strict = true or --mgmtauth-strict{instead}.{on_purpose})"
    )


def check_findings(
    item: pytest.Item, fake: MgmtServer, *, call_failed: bool, in_section: bool
) -> None:
    """The teardown check: each finding (churn, expired-credential use, and open v1
    sessions with require_logout) fails a strict test, else becomes a warning of its
    kind's class. A test that failed already (``call_failed``) only warns, and when its
    report section holds the timeline (``in_section``) the warning does not repeat it."""
    __tracebackhide__ = True
    found = fake.teardown_findings()
    if not found:
        return
    if fake.options.strict and not call_failed:
        pytest.fail("\n\n".join(f.message for f in found), pytrace=False)
    # Attributed to the test function, not to this file, in pytest's warnings summary.
    path, lineno, _ = item.reportinfo()
    for kind in KINDS:
        mine = [f for f in found if f.kind == kind]
        if mine:
            category = WARNINGS[kind]
            warnings.warn_explicit(
                category(_warning_text(kind, mine, in_section=in_section)),
                category,
                filename=str(path),
                lineno=(lineno or 0) + 1,
            )


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
    if not errors and not still_running:
        return None
    lines = []
    if errors:
        lines.append(
            f"pytest-mgmtauth: {len(errors)} error(s) raised in the fake service after the "
            "test they belonged to had ended (its client had stopped waiting for the "
            "answer), so that test could not report them:"
        )
        for owner, where, error in errors:
            lines.append("")
            lines.append(f"in {owner}: {where} raised {type(error).__name__}: {error}")
            lines.extend(line.rstrip("\n") for line in traceback.format_exception(error))
    if still_running:
        lines.append("")
        lines.append(
            f"pytest-mgmtauth: route handler(s) still running {grace:g} s after "
            "the last test ended; whatever they raise is lost:"
        )
        lines.extend(f"  in {owner}: {where}" for owner, where in still_running)
    return "\n".join(lines)
