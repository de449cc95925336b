"""Verdicts where a user looks: the ``mgmtauth timeline`` report section (terminal, JUnit
XML, xdist) and the teardown check of churn, expired-credential use and open sessions,
tried on the six classic client bugs (pytester, asserting the output a user sees)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


#: A user's clients, each with one switch for a classic bug.
CLIENTS = '''
import re

import pytest
import requests

JSESSIONID = re.compile(r"^JSESSIONID=([^;]*)")


class V2Client:
    """mode: "good", "every_call" (re-auth before each call), "never" (never renews),
    "after_401" (renews only after a 401), "unencoded" (writes the key into the body)."""

    def __init__(self, server, account, mode="good"):
        self.url, self.account, self.mode = server.url, account, mode
        self.http = requests.Session()
        self.http.trust_env = False
        self.token = None

    def authenticate(self):
        if self.mode == "unencoded":
            answer = self.http.post(
                self.url + "/v2/auth",
                data=f"username={self.account.username}&key={self.account.api_key}",
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
        else:
            answer = self.http.post(
                self.url + "/v2/auth",
                data={"username": self.account.username, "key": self.account.api_key},
            )
        answer.raise_for_status()
        self.token = answer.json()["token"]

    def _get(self, path):
        return self.http.get(self.url + path, headers={"Authorization": "Bearer " + self.token})

    def get(self, path):
        if self.token is None or self.mode == "every_call":
            self.authenticate()
        answer = self._get(path)
        if answer.status_code == 401 and self.mode == "after_401":
            self.authenticate()
            answer = self._get(path)
        answer.raise_for_status()
        return answer.json()


class V1Client:
    """cookie_jar: rely on the cookie jar for JSESSIONID; logout: end the session."""

    def __init__(self, server, account, *, cookie_jar=False, logout=True):
        self.url, self.account = server.url, account
        self.cookie_jar, self.logout = cookie_jar, logout
        self.http = requests.Session()
        self.http.trust_env = False

    def __enter__(self):
        answer = self.http.post(
            self.url + "/v1/login",
            data={"username": self.account.username, "password": self.account.password},
        )
        answer.raise_for_status()
        self.utk = answer.json()["utk"]
        lines = answer.raw.headers.getlist("Set-Cookie")
        self.session_id = next(m.group(1) for m in map(JSESSIONID.match, lines) if m)
        return self

    def _cookie(self):
        return {} if self.cookie_jar else {"Cookie": "JSESSIONID=" + self.session_id}

    def get(self, path):
        answer = self.http.get(self.url + path, params={"utk": self.utk}, headers=self._cookie())
        answer.raise_for_status()
        return answer.json()

    def __exit__(self, *exc):
        if self.logout:
            self.http.post(self.url + "/v1/logout", headers=self._cookie())
'''

#: The inner suites' expected output has exact times (00:00:00, valid until 00:30:00): every
#: test runs on the frozen clock from its start, before mgmt_server (on the real clock a
#: second boundary crossed mid-test made them 00:00:01, now and then).
FROZEN = """
import pytest


@pytest.fixture(autouse=True)
def _frozen_from_the_start(mgmt_clock):
    pass
"""

#: The six classic bugs, one test each, as a client library's suite would have them.
SIX_BUGS = """
from clients import V1Client, V2Client


def test_reauth_every_call(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    client = V2Client(mgmt_server, mgmt_account, "every_call")
    for _ in range(3):
        assert client.get("/api/things") == []


def test_never_renew(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    client = V2Client(mgmt_server, mgmt_account, "never")
    assert client.get("/api/things") == []
    mgmt_clock.advance(minutes=31)
    assert client.get("/api/things") == []


def test_renew_after_401(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    client = V2Client(mgmt_server, mgmt_account, "after_401")
    assert client.get("/api/things") == []
    mgmt_clock.advance(minutes=31)
    assert client.get("/api/things") == []


def test_unencoded_key(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    assert V2Client(mgmt_server, mgmt_account, "unencoded").get("/api/things") == []


def test_cookie_jar_session(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    with V1Client(mgmt_server, mgmt_account, cookie_jar=True) as client:
        assert client.get("/v1/things") == []


def test_no_logout(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    with V1Client(mgmt_server, mgmt_account, logout=False) as client:
        assert client.get("/v1/things") == []
"""

#: What pytest's defaults do with warnings (in-process runs inherit this project's filters).
DEFAULT_WARNINGS = "[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n"


def six_bugs(pytester: pytest.Pytester, ini: str = "") -> None:
    pytester.makeini(DEFAULT_WARNINGS + ini)
    pytester.makeconftest(FROZEN)
    pytester.makepyfile(clients=CLIENTS, test_bugs=SIX_BUGS)


def sections(output: str) -> dict[str, str]:
    """Each test's 'mgmtauth timeline' section in the terminal output, by the title of
    its failure or error (``test_x``, ``ERROR at teardown of test_x``)."""
    found = {}
    blocks = re.split(r"^_{3,} (.+?) _{3,}$", output, flags=re.MULTILINE)
    for title, block in zip(blocks[1::2], blocks[2::2], strict=True):
        marker = block.find(" mgmtauth timeline ")
        if marker != -1:
            found[title] = block[marker:].split("\n", 1)[1].split("\n=")[0]
    return found


# -- the six classic bugs, default and strict -----------------------------------------


def test_six_bugs_default_failures_carry_the_story_and_the_rest_warn(
    pytester: pytest.Pytester,
) -> None:
    six_bugs(pytester)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3, failed=3, warnings=4)
    out = result.stdout.str()
    shown = sections(out)
    assert sorted(shown) == ["test_cookie_jar_session", "test_never_renew", "test_unencoded_key"]
    # never renews: the bare HTTPError gets the expiry and the verdict next to it.
    assert "401 Client Error: UNAUTHORIZED" in out
    assert (
        "00:31:00  GET /api/things with T1 -> 401 (1401: token T1 expired 60 s ago"
        in shown["test_never_renew"]
    )
    assert (
        "  expired-credential use: the client presented an expired credential 1 time; first: "
        "GET /api/things with T1 at 00:31:00" in shown["test_never_renew"]
    )
    # un-encoded key: the diagnosis of the rejected /v2/auth.
    assert "/v2/auth rejected (1401): the API key arrived un-encoded" in shown["test_unencoded_key"]
    # cookie jar: no JSESSIONID reached the call.
    assert (
        "  GET /v1/things with no known credential -> 401 (1401: no JSESSIONID cookie was sent. "
        "/v1/login sets it with Path=/urest_service; Secure; HttpOnly, so a cookie jar does not "
        "send it back here" in shown["test_cookie_jar_session"]
    )
    # One bug, one finding: the refused call, not also the session it lost (issue 29).
    assert (
        "  refused calls (wrong credential): 1 protected call(s) of account "
        in shown["test_cookie_jar_session"]
    )
    assert "  open v1 sessions: none" in shown["test_cookie_jar_session"]
    result.stdout.fnmatch_lines(
        [
            "*= warnings summary =*",
            "test_bugs.py::test_reauth_every_call",
            "  *TokenChurnWarning: pytest-mgmtauth: token churn: account *",
            "test_bugs.py::test_never_renew",
            "  *ExpiredCredentialWarning: pytest-mgmtauth: the client presented an expired "
            "credential 1 time; *",
            "  (the timeline is in the test's 'mgmtauth timeline' report section)",
            "test_bugs.py::test_renew_after_401",
            "  *ExpiredCredentialWarning: pytest-mgmtauth: the client presented an expired "
            "credential 1 time; first: GET /api/things with T1 at 00:31:00 -> 401 *",
            "  Timeline of account *",
            "*Fix: refresh proactively*",
            "  (pytest-mgmtauth checks this at the end of every test that uses mgmt_server.*"
            "mgmt_server.assert_no_expired_token_used(), which replaces this check.)",
            "test_bugs.py::test_cookie_jar_session",
            "  *RefusedCallWarning: pytest-mgmtauth: 1 protected call(s) of account * were "
            "refused because the client sent the wrong credential; first: GET /v1/things with "
            "no known credential at 00:00:00 -> 401 (1401: no JSESSIONID cookie was sent.*",
            "  (the timeline is in the test's 'mgmtauth timeline' report section)",
        ]
    )
    summary = out.split("warnings summary")[1]
    # The failed test's warning does not repeat the timeline the section holds.
    never_renew = summary.split("test_bugs.py::test_never_renew")[1].split("test_bugs.py::")[0]
    assert "Timeline of" not in never_renew
    assert "test_no_logout" not in summary


def test_six_bugs_strict_error_at_teardown_and_require_logout_adds_open_sessions(
    pytester: pytest.Pytester,
) -> None:
    six_bugs(pytester, "mgmtauth_strict = true\nmgmtauth_require_logout = true\n")
    result = pytester.runpytest_inprocess()
    # Churn, renew-after-401 and no-logout error at teardown; the three failures stay
    # failures (their findings only warn: never renew's expired use, cookie jar's session).
    result.assert_outcomes(passed=3, failed=3, errors=3, warnings=2)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_reauth_every_call _*",
            "pytest-mgmtauth: token churn: account *",
            "*_ ERROR at teardown of test_renew_after_401 _*",
            "pytest-mgmtauth: the client presented an expired credential 1 time; first: "
            "GET /api/things with T1 at 00:31:00 -> 401 *",
            "*_ ERROR at teardown of test_no_logout _*",
            "pytest-mgmtauth: 1 v1 session(s) were not ended with /v1/logout: S1 *",
        ],
        consecutive=False,
    )
    shown = sections(result.stdout.str())
    # Teardown errors carry the section too.
    assert "  open v1 sessions: pytest-mgmtauth" not in shown["ERROR at teardown of test_no_logout"]
    assert (
        "  open v1 sessions: 1 v1 session(s) were not ended with /v1/logout: S1"
        in (shown["ERROR at teardown of test_no_logout"])
    )
    result.stdout.fnmatch_lines(
        [
            "test_bugs.py::test_cookie_jar_session",
            "  *RefusedCallWarning: pytest-mgmtauth: 1 protected call(s) of account * were "
            "refused because the client sent the wrong credential; *",
        ]
    )


# -- the report section ----------------------------------------------------------------

SECTION_SUITE = """
import pytest
from clients import V2Client


def test_passes(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    assert V2Client(mgmt_server, mgmt_account).get("/api/things") == []


def test_fails_after_a_call(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    assert V2Client(mgmt_server, mgmt_account).get("/api/things") == ["a thing"]


def test_fails_without_the_fake():
    assert False


@pytest.fixture
def broken(mgmt_server):
    raise RuntimeError("a fixture after mgmt_server broke")


def test_errors_in_setup(broken):
    pass


@pytest.mark.mgmtauth(strict=True)
def test_churns_strictly(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    client = V2Client(mgmt_server, mgmt_account, "every_call")
    client.get("/api/things")
    client.get("/api/things")
"""


def section_suite(pytester: pytest.Pytester) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makeconftest(FROZEN)
    pytester.makepyfile(clients=CLIENTS, test_section=SECTION_SUITE)


def test_failures_and_errors_of_tests_that_use_the_fake_carry_the_section(
    pytester: pytest.Pytester,
) -> None:
    section_suite(pytester)
    result = pytester.runpytest_inprocess("-rP")
    result.assert_outcomes(passed=2, failed=2, errors=2)
    shown = sections(result.stdout.str())
    assert sorted(shown) == [
        "ERROR at setup of test_errors_in_setup",
        "ERROR at teardown of test_churns_strictly",
        "test_fails_after_a_call",
    ]
    result.stdout.fnmatch_lines(
        [
            "*_ test_fails_after_a_call _*",
            "E       AssertionError: assert [] == ['a thing']",
            "*- mgmtauth timeline -*",
            "Timeline of all accounts (simulated time since the test started):",
            "  00:00:00  T1 issued by /v2/auth (#*), valid until 00:30:00",
            "  00:00:00  GET /api/things with T1 -> 200",
            "Credentials:",
            "  T1   #* user1.*@example.com  issued 00:00:00, used 1 time, still valid",
            "Verdicts:",
            "  churn: none",
            "  expired-credential use: none",
            "  open v1 sessions: none",
        ]
    )
    assert "(nothing happened)" in shown["ERROR at setup of test_errors_in_setup"]
    # Passing tests stay quiet, even with -rP (pytest lists a test there only when its
    # report has sections).
    assert "_ test_passes _" not in result.stdout.str()


@pytest.mark.parametrize("flag", ["--mgmtauth-report", "-v"])
def test_passing_tests_carry_the_section_when_asked(pytester: pytest.Pytester, flag: str) -> None:
    section_suite(pytester)
    result = pytester.runpytest_inprocess(flag, "-rP", "-k", "passes")
    result.assert_outcomes(passed=1, deselected=4)
    result.stdout.fnmatch_lines(
        [
            "*= PASSES =*",
            "*_ test_passes _*",
            "*- mgmtauth timeline -*",
            "  00:00:00  GET /api/things with T1 -> 200",
        ]
    )


def junit_testcases(path: str) -> dict[str, ET.Element]:
    """The testcase elements of a JUnit XML file by test name (the last of a name wins:
    pytest writes a call failure and a teardown error of one test as two)."""
    return {case.get("name", ""): case for case in ET.parse(path).getroot().iter("testcase")}


def test_junit_xml_holds_the_section_in_system_err_with_default_settings(
    pytester: pytest.Pytester,
) -> None:
    section_suite(pytester)
    pytester.runpytest_inprocess("--junitxml=report.xml")
    cases = junit_testcases(str(pytester.path / "report.xml"))
    failed = cases["test_fails_after_a_call"]
    assert [child.tag for child in failed] == ["properties", "failure", "system-err"]
    text = failed.find("system-err").text or ""  # type: ignore[union-attr]
    assert text.startswith("-" * 30 + " mgmtauth timeline ")
    assert "  00:00:00  GET /api/things with T1 -> 200\n" in text
    assert "Verdicts:\n  churn: none\n" in text
    # A teardown error: the schema's order, <error> before <system-err>.
    strict = cases["test_churns_strictly"]
    assert [child.tag for child in strict] == ["properties", "error", "system-err"]
    assert "PREMATURE: T1 still valid" in (strict.find("system-err").text or "")  # type: ignore[union-attr]
    assert [child.tag for child in cases["test_errors_in_setup"]] == [
        "properties",
        "error",
        "system-err",
    ]
    assert cases["test_passes"].find("system-err") is None
    assert cases["test_fails_without_the_fake"].find("system-err") is None


def test_junit_xml_holds_passing_sections_on_request_next_to_captured_output(
    pytester: pytest.Pytester,
) -> None:
    section_suite(pytester)
    pytester.runpytest_inprocess(
        "--junitxml=report.xml", "--mgmtauth-report", "-o", "junit_logging=all"
    )
    cases = junit_testcases(str(pytester.path / "report.xml"))
    tags = [child.tag for child in cases["test_passes"]]
    assert tags[0] == "properties"
    assert tags[-1] == "system-err"
    assert "mgmtauth timeline" in (cases["test_passes"].findall("system-err")[-1].text or "")


def test_under_xdist_the_section_reaches_the_terminal_and_the_junit_xml(
    pytester: pytest.Pytester,
) -> None:
    section_suite(pytester)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "--junitxml=report.xml")
    result.assert_outcomes(passed=2, failed=2, errors=2)
    shown = sections(result.stdout.str())
    assert "  00:00:00  GET /api/things with T1 -> 200" in shown["test_fails_after_a_call"]
    assert "PREMATURE: T1 still valid" in shown["ERROR at teardown of test_churns_strictly"]
    cases = junit_testcases(str(pytester.path / "report.xml"))
    for name in ("test_fails_after_a_call", "test_churns_strictly", "test_errors_in_setup"):
        assert "mgmtauth timeline" in (cases[name].find("system-err").text or ""), name  # type: ignore[union-attr]
    assert cases["test_passes"].find("system-err") is None


# -- the teardown check ----------------------------------------------------------------

CHECKS = """
import pytest
from clients import V1Client, V2Client


def renew_after_401(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    client = V2Client(mgmt_server, mgmt_account, "after_401")
    client.get("/api/things")
    mgmt_clock.advance(minutes=31)
    client.get("/api/things")


def test_checks_expired_use_itself(mgmt_server, mgmt_account, mgmt_clock):
    renew_after_401(mgmt_server, mgmt_account, mgmt_clock)
    with pytest.raises(AssertionError, match="presented an expired credential 1 time"):
        mgmt_server.assert_no_expired_token_used()


def test_checks_logout_itself(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    with V1Client(mgmt_server, mgmt_account, logout=False) as client:
        client.get("/v1/things")
    with pytest.raises(AssertionError, match="were not ended with /v1/logout"):
        mgmt_server.assert_logged_out()


@pytest.mark.mgmtauth(require_logout=True)
def test_logs_out(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    with V1Client(mgmt_server, mgmt_account) as client:
        client.get("/v1/things")


@pytest.mark.mgmtauth(require_logout=True)
def test_stays_logged_in(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    with V1Client(mgmt_server, mgmt_account, logout=False) as client:
        client.get("/v1/things")


def test_reauth_after_1469(mgmt_server):
    account = mgmt_server.add_account(permissions=[])
    mgmt_server.route("GET", "/api/admin", permission="admin").respond_with_json([])
    client = V2Client(mgmt_server, account, "after_401")
    with pytest.raises(Exception, match="401 Client Error"):
        client.get("/api/admin")
"""


def test_the_assertions_take_over_their_kinds_teardown_check(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = error\nmgmtauth_strict = true\n")
    pytester.makeconftest(FROZEN)
    pytester.makepyfile(clients=CLIENTS, test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-k", "itself or logs_out")
    result.assert_outcomes(passed=3, deselected=2)


def test_require_logout_from_the_marker_warns_with_its_own_class(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makeconftest(FROZEN)
    pytester.makepyfile(clients=CLIENTS, test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-k", "logs_out or stays_logged_in")
    result.assert_outcomes(passed=2, warnings=1, deselected=3)
    result.stdout.fnmatch_lines(
        [
            "test_checks.py::test_stays_logged_in",
            "  *OpenSessionWarning: pytest-mgmtauth: 1 v1 session(s) were not ended with "
            "/v1/logout: S1 of 'user1.*@example.com' (started 00:00:00, used 1 time, still "
            "active)",
            "*Fix: when done, POST /v1/logout*",
            "*mgmt_server.assert_logged_out(), which replaces this check.)",
        ]
    )


def test_warnings_can_be_filtered_by_their_common_base(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nfilterwarnings =\n    error\n    ignore::pytest_mgmtauth.AuthFindingWarning\n"
    )
    pytester.makeconftest(FROZEN)
    pytester.makepyfile(clients=CLIENTS, test_bugs=SIX_BUGS)
    result = pytester.runpytest_inprocess("-k", "every_call or after_401")
    result.assert_outcomes(passed=2, deselected=4)


def test_reauthenticating_after_a_1469_is_told_that_logging_in_again_cannot_help(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makeconftest(FROZEN)
    pytester.makepyfile(clients=CLIENTS, test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-k", "1469")
    result.assert_outcomes(passed=1, warnings=1, deselected=4)
    result.stdout.fnmatch_lines(
        [
            "  *TokenChurnWarning: pytest-mgmtauth: token churn: account * First premature "
            "grant: T2 (#*) at 00:00:00, while T1 was still valid; the call before it: "
            "GET /api/admin with T1 -> 401 (1469) at 00:00:00: 1469 is a missing permission; "
            "logging in again cannot help*",
            "*Fix: treat 401 with returnCode 1469 as final for that operation*",
        ]
    )
    assert "keep the token from /v2/auth" not in result.stdout.str()


def test_the_fake_of_a_test_is_not_kept_for_its_report_section_after_the_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import gc
        import weakref

        fakes = []


        def test_uses_the_fake(mgmt_server):
            fakes.append(weakref.ref(mgmt_server))


        def test_the_fake_is_gone():
            gc.collect()
            assert fakes[0]() is None
        """
    )
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=2)
