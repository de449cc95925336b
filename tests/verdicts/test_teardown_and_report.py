"""The teardown churn check and the report, as a user's suite sees them (pytester)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


#: A user's tests: one client churns, one reuses its token, one never authenticates.
SUITE = """
import pytest
import requests


def authenticate(mgmt_server, account):
    answer = requests.post(
        mgmt_server.url + "/v2/auth",
        data={"username": account.username, "key": account.api_key},
    )
    assert answer.status_code == 200
    return answer.json()["token"]


def call(mgmt_server, token):
    return requests.get(
        mgmt_server.url + "/api/things", headers={"Authorization": "Bearer " + token}
    ).status_code


def test_churns(mgmt_clock, mgmt_server, mgmt_account):
    # Frozen, and first so that the service starts on it: the expected timeline shows
    # exact times (on the real clock a grant that crossed a second boundary read
    # 00:00:01 and failed the check, about 3 runs in 20).
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    for _ in range(3):
        assert call(mgmt_server, authenticate(mgmt_server, mgmt_account)) == 200


def test_reuses(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    token = authenticate(mgmt_server, mgmt_account)
    for _ in range(3):
        assert call(mgmt_server, token) == 200


def test_no_auth(mgmt_server):
    assert mgmt_server.auth_count() == 0
"""

#: What pytest's defaults do with a warning: show it in the summary, exit 0. In-process
#: runs inherit this project's own warning filters, so the user's config is explicit.
DEFAULT_WARNINGS = """
[pytest]
filterwarnings = default::pytest_mgmtauth.TokenChurnWarning
"""


def test_churn_without_strict_is_a_warning_with_the_timeline(pytester: pytest.Pytester) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3, warnings=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*= warnings summary =*",
            "*.py::test_churns",
            "  *.py:*: TokenChurnWarning: pytest-mgmtauth: token churn: account "
            "'user1.*@example.com' was granted 2 new credential(s) while it still held a valid "
            "one (3 grants in all). First premature grant: T2 (#*) at 00:00:00, while T1 was "
            "still valid; the call before it: GET /api/things with T1 -> 200 at 00:00:00.",
            "  Timeline of account 'user1.*@example.com' (simulated time since the test started):",
            "    00:00:00  T1 issued by /v2/auth (#*), valid until 00:30:00",
            "    00:00:00  GET /api/things with T1 -> 200",
            "    00:00:00  T2 issued by /v2/auth (#*), valid until 00:30:00",
            "              <-- PREMATURE: T1 still valid for another *",
            "*Fix: keep the token from /v2/auth and send it with every call*",
            "  (pytest-mgmtauth checks this at the end of every test that uses mgmt_server.*",
        ]
    )
    assert "test_reuses" not in result.stdout.str().split("warnings summary")[1]


def test_warning_is_what_a_default_configured_suite_shows(pytester: pytest.Pytester) -> None:
    # A fresh interpreter: no warning filters but pytest's own, as in a user's project.
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=3, warnings=1)
    result.stdout.fnmatch_lines(["*TokenChurnWarning: pytest-mgmtauth: token churn: account*"])


def test_strict_marker_fails_the_churning_test_at_teardown_with_the_timeline(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile("pytestmark = __import__('pytest').mark.mgmtauth(strict=True)\n" + SUITE)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*= ERRORS =*",
            "*_ ERROR at teardown of test_churns _*",
            "pytest-mgmtauth: token churn: account 'user1.*@example.com' was granted 2 new "
            "credential(s)*",
            "Fix: keep the token from /v2/auth*",
            "(the timeline is in the test's 'mgmtauth timeline' report section)",
            "*- mgmtauth timeline -*",
            "Timeline of *",
            "*<-- PREMATURE: T1 still valid*",
            "*= short test summary info =*",
            "ERROR *::test_churns*",
        ]
    )
    # The timeline is printed once: in the report section, not in the error too.
    assert result.stdout.str().count("<-- PREMATURE: T1 still valid") == 1
    assert "TokenChurnWarning" not in result.stdout.str()
    # pytrace=False: the user sees the timeline, not the plugin's frames.
    assert "plugin.py" not in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "ini"),
    [(("--mgmtauth-strict",), ""), ((), "mgmtauth_strict = true\n")],
    ids=["command-line", "ini"],
)
def test_strict_from_the_command_line_or_ini(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str
) -> None:
    pytester.makeini(DEFAULT_WARNINGS + ini)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        ["*_ ERROR at teardown of test_churns _*", "pytest-mgmtauth: token churn: account*"]
    )


def test_a_closer_marker_turns_strict_off_again(pytester: pytest.Pytester) -> None:
    pytester.makeini(DEFAULT_WARNINGS + "mgmtauth_strict = true\n")
    pytester.makepyfile(
        SUITE.replace("def test_churns(", "@pytest.mark.mgmtauth(strict=False)\ndef test_churns(")
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3, warnings=1)


def test_warnings_as_errors_turn_churn_into_a_teardown_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_churns _*",
            "E * pytest_mgmtauth.TokenChurnWarning: pytest-mgmtauth: token churn: account*",
        ]
    )


def test_calling_assert_token_reused_takes_over_the_teardown_check(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = error\nmgmtauth_strict = true\n")
    pytester.makepyfile(
        SUITE
        + """

def test_checks_churn_itself(mgmt_server, mgmt_account):
    authenticate(mgmt_server, mgmt_account)
    authenticate(mgmt_server, mgmt_account)
    with pytest.raises(AssertionError, match="First premature grant: T2"):
        mgmt_server.assert_token_reused()


def test_fails_on_churn_itself(mgmt_server, mgmt_account):
    authenticate(mgmt_server, mgmt_account)
    authenticate(mgmt_server, mgmt_account)
    mgmt_server.assert_token_reused()
"""
    )
    result = pytester.runpytest_inprocess("-k", "itself")
    result.assert_outcomes(passed=1, failed=1, deselected=3)
    result.stdout.fnmatch_lines(
        [
            "*_ test_fails_on_churn_itself _*",
            ">       mgmt_server.assert_token_reused()",
            "E       AssertionError: pytest-mgmtauth: token churn: account*",
        ]
    )
    # Helper frames are hidden: the traceback ends at the user's line.
    assert "_assertions.py" not in result.stdout.str()
    assert "_fake/server.py" not in result.stdout.str()


def test_a_test_that_failed_already_gets_the_churn_as_a_warning_not_a_second_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS + "mgmtauth_strict = true\n")
    pytester.makepyfile(
        SUITE
        + """

def test_churns_and_fails(mgmt_server, mgmt_account):
    authenticate(mgmt_server, mgmt_account)
    authenticate(mgmt_server, mgmt_account)
    assert False, "the client under test broke"


@pytest.mark.xfail(reason="a known bug", strict=True)
def test_churns_and_xfails(mgmt_server, mgmt_account):
    authenticate(mgmt_server, mgmt_account)
    authenticate(mgmt_server, mgmt_account)
    assert False, "the known bug"
"""
    )
    result = pytester.runpytest_inprocess("-k", "and_fails or and_xfails")
    result.assert_outcomes(failed=1, xfailed=1, warnings=2, deselected=3)


def test_report_is_shown_on_verbose_and_on_request_and_not_by_default(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile(SUITE)
    quiet = pytester.runpytest_inprocess()
    assert "mgmtauth: credentials per test" not in quiet.stdout.str()
    for args in (("-v",), ("--mgmtauth-report",)):
        result = pytester.runpytest_inprocess(*args)
        result.stdout.re_match_lines(
            [
                r"=+ mgmtauth: credentials per test =+",
                r"test +grants +calls +rejected +churn +herd$",
                r".*::test_churns +3 +3 +0 +2 +0  <- churn$",
                r".*::test_no_auth +0 +0 +0 +0 +0$",
                r".*::test_reuses +1 +3 +0 +0 +0$",
                r"total \(3 tests\) +4 +6 +0 +2 +0$",
            ]
        )


def test_junit_xml_carries_the_figures_as_properties(pytester: pytest.Pytester) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile(SUITE)
    pytester.runpytest_inprocess("--junitxml=report.xml").assert_outcomes(passed=3, warnings=1)
    root = ET.parse(pytester.path / "report.xml").getroot()
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    assert properties["test_churns"] == {
        "mgmtauth_grants": "3",
        "mgmtauth_api_calls": "3",
        "mgmtauth_rejections": "0",
        "mgmtauth_churn": "2",
        "mgmtauth_concurrent": "0",
    }
    assert properties["test_reuses"]["mgmtauth_grants"] == "1"
    assert properties["test_reuses"]["mgmtauth_churn"] == "0"


def test_report_is_in_node_id_order_under_xdist(pytester: pytest.Pytester) -> None:
    # test_a waits until test_b has run, so it completes last; the table is still sorted.
    pytester.makepyfile(
        test_order="""
        import time
        from pathlib import Path


        def test_a(mgmt_server, tmp_path_factory):
            flag = tmp_path_factory.getbasetemp().parent / "b-done"
            deadline = time.monotonic() + 30
            while not flag.exists() and time.monotonic() < deadline:
                time.sleep(0.01)


        def test_b(mgmt_server, tmp_path_factory):
            (tmp_path_factory.getbasetemp().parent / "b-done").touch()
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "--mgmtauth-report")
    result.assert_outcomes(passed=2)
    result.stdout.re_match_lines(
        [
            r"=+ mgmtauth: credentials per test =+",
            r"test +grants .*",
            r"test_order.py::test_a +0 +0 +0 +0 +0$",
            r"test_order.py::test_b +0 +0 +0 +0 +0$",
            r"total \(2 tests\) .*",
        ],
        consecutive=True,
    )


#: A suite that pins the date before anything happens, as the OAuth example's fixture
#: does, then jumps years within a test.
PINNED = """
from datetime import datetime, timezone

import pytest
import requests


@pytest.fixture(autouse=True)
def pinned(mgmt_server, mgmt_clock):
    # After the fake is made (its start is the real time): the test's clock starts here.
    mgmt_clock.move_to(datetime(2001, 1, 1, tzinfo=timezone.utc))


def authenticate(mgmt_server, account):
    form = {"username": account.username, "key": account.api_key}
    assert requests.post(mgmt_server.url + "/v2/auth", data=form).status_code == 200


def test_pinned(mgmt_server, mgmt_account, mgmt_clock):
    authenticate(mgmt_server, mgmt_account)
    mgmt_clock.advance(hours=1)
    authenticate(mgmt_server, mgmt_account)
    mgmt_clock.move_to(datetime(2003, 6, 1, tzinfo=timezone.utc))
    authenticate(mgmt_server, mgmt_account)
    assert False, "show the report section"
"""


def test_a_timeline_after_a_move_to_reads_from_the_moved_clock_and_far_moments_as_dates(
    pytester: pytest.Pytester,
) -> None:
    # Issue 43, 6: a move_to before the first event read 13675:25:25 on every line.
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile(PINNED)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- mgmtauth timeline -*",
            "Timeline of all accounts (simulated time since the test started):",
            "  00:00:00  T1 issued by /v2/auth (#*), valid until 00:30:00",
            "  00:30:00  T1 expired (used 0 times)",
            "  01:00:00  T2 issued by /v2/auth (#*), valid until 01:30:00",
            "  01:30:00  T2 expired (used 0 times)",
            "  2003-06-01T00:00:00Z  T3 issued by /v2/auth (#*), valid until 2003-06-01T00:30:00Z",
        ],
        consecutive=True,
    )
