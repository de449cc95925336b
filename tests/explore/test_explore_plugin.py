"""Explorations as a user's suite sees them (pytester): the runs and their fixtures, the
shortest failing story and its replay, the report section and JUnit property, warnings
counted once, strict, xdist, asyncio and v1 clients, and validation."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


#: A v2 client that re-authenticates on a 401 with one bare POST (no retry of a 429 or
#: 503 then, ``careful=False``), or through its retrying authentication.
CLIENT = """
import requests


class Client:
    def __init__(self, server, account, *, careful, sleep=None):
        self.url, self.account, self.careful = server.url, account, careful
        self.sleep = sleep or (lambda seconds: None)
        self.token = None
        self.http = requests.Session()
        self.http.trust_env = False

    def _login(self):
        answer = self.http.post(
            self.url + "/v2/auth",
            data={"username": self.account.username, "key": self.account.api_key},
        )
        answer.raise_for_status()
        return answer.json()["token"]

    def _authenticate(self):
        for attempt in range(3):
            try:
                return self._login()
            except requests.HTTPError as exc:
                if exc.response.status_code not in (429, 503) or attempt == 2:
                    raise
                self.sleep(float(exc.response.headers.get("Retry-After", "1")))

    def get(self, path):
        if self.token is None:
            self.token = self._authenticate()
        for attempt in range(3):
            try:
                answer = self.http.get(
                    self.url + path, headers={"Authorization": "Bearer " + self.token}
                )
            except requests.ConnectionError:
                if attempt == 2:
                    raise
                continue
            if answer.status_code == 401 and attempt < 2:
                self.token = self._authenticate() if self.careful else self._login()
                continue
            answer.raise_for_status()
            return answer.json()
"""

SUITE = """
import pytest
from client import Client

#: What the client survives without a clock to wait Retry-After on.
CALM = ["expire", "revoke", "unavailable", "reset"]


@pytest.mark.mgmtauth_explore({args})
def test_sync(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1, 2])
    client = Client(mgmt_server, mgmt_account, careful={careful})
    for _ in range(3):
        assert client.get("/v2/devices") == [1, 2]
"""


def _suite(pytester: pytest.Pytester, args: str, *, careful: bool) -> None:
    pytester.makepyfile(client=CLIENT, test_sync=SUITE.format(args=args, careful=careful))


def _property(path) -> dict[str, object]:
    root = ET.parse(path).getroot()
    found = [p.get("value") for p in root.iter("property") if p.get("name") == "mgmtauth_explore"]
    assert len(found) == 1
    assert found[0] is not None
    data: dict[str, object] = json.loads(found[0])
    return data


def test_a_combined_failure_is_found_shrunk_and_told(pytester: pytest.Pytester) -> None:
    _suite(pytester, "runs=150, seed=3, faults=['revoke', 'unavailable']", careful=False)
    xml = pytester.path / "junit.xml"
    result = pytester.runpytest_inprocess("-p", "no:randomly", f"--junitxml={xml}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- mgmtauth explore -*",
            "* runs, * distinct schedules, * failing",
            "shortest failing schedule: revoke@call1, unavailable@auth2",
            "  1. revoke@call1: token T1 revoked on cue",
            "  2. unavailable@auth2: POST /v2/auth answered error 503",
            "  then: the client never retried authentication after a 503",
            "  the test failed: requests.exceptions.HTTPError: 503 Server Error*",
            'replay it: @pytest.mark.mgmtauth_explore(replay="revoke@call1, unavailable@auth2")',
        ]
    )
    # That run's timeline and verdicts, in the failure's report.
    result.stdout.fnmatch_lines(
        ["*- mgmtauth timeline -*", "*token T1 revoked on cue", "Verdicts:"]
    )
    # The terminal section, once per explored test.
    text = result.stdout.str()
    assert text.count("= mgmtauth explore =") == 1
    data = _property(xml)
    assert data["schedule"] == [
        {"point": "call1", "event": "revoke"},
        {"point": "auth2", "event": "unavailable"},
    ]
    assert data["replay"] == "revoke@call1, unavailable@auth2"
    assert isinstance(data["runs"], int)
    assert data["runs"] > 2
    assert isinstance(data["failures"], int)
    assert data["failures"] >= 1


def test_the_replay_runs_that_schedule_once(pytester: pytest.Pytester) -> None:
    _suite(pytester, 'replay="revoke@call1, unavailable@auth2"', careful=False)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["1 runs, 1 distinct schedules, 1 failing"])
    _suite(pytester, 'replay="revoke@call1, unavailable@auth2"', careful=True)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)


def test_the_failing_schedule_is_tried_first_on_the_next_run(pytester: pytest.Pytester) -> None:
    _suite(pytester, "runs=150, seed=3, faults=['revoke', 'unavailable']", careful=False)
    first = pytester.runpytest_inprocess("-p", "no:randomly")
    first.assert_outcomes(failed=1)
    # A seed that alone finds nothing in 3 runs: the example database's schedule does.
    _suite(pytester, "runs=3, seed=3, faults=['revoke', 'unavailable']", careful=False)
    pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider").assert_outcomes(
        passed=1
    )
    again = pytester.runpytest_inprocess("-p", "no:randomly")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["shortest failing schedule: revoke@call1, unavailable@auth2"])


FLAKY = """
import pytest
import requests

from pytest_mgmtauth import ScheduledFaultFired

SEEN = set()


@pytest.mark.mgmtauth_explore(runs=30, seed=1, faults=["revoke"])
def test_sync(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
    answer = requests.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    token = answer.json()["token"]
    requests.get(mgmt_server.url + "/v2/devices", headers={"Authorization": "Bearer " + token})
    fired = tuple(e.point for e in mgmt_server.events if isinstance(e, ScheduledFaultFired))
    # Fails the first time only: each schedule of the exploration runs once.
    first = fired not in SEEN
    SEEN.add(fired)
    assert not (fired and first)
"""


def test_a_failure_that_does_not_come_back_is_called_flaky(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flaky=FLAKY)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    assert result.parseoutcomes()["errors"] == 1  # an error of the item (page Explore)
    result.stdout.fnmatch_lines(
        [
            "*pytest-mgmtauth explore: the schedule revoke@call1 failed during the "
            "exploration, but not when run again: the test is flaky under it",
        ]
    )


def test_a_client_that_survives_passes_with_its_figures(pytester: pytest.Pytester) -> None:
    _suite(pytester, "runs=40, seed=1, faults=CALM", careful=True)
    xml = pytester.path / "junit.xml"
    result = pytester.runpytest_inprocess("-p", "no:randomly", f"--junitxml={xml}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= mgmtauth explore =*",
            "test_sync.py::test_sync",
            "  40 runs, * distinct schedules, 0 failing",
        ]
    )
    data = _property(xml)
    assert data["runs"] == 40
    assert data["failures"] == 0
    assert data["replay"] is None


#: An explored body that survives resets: one token, three calls, a dropped one let go.
RESET_BODY = """    mgmt_server.route("GET", "/v2/x").respond_with_json({})
    http = requests.Session()
    http.trust_env = False
    token = http.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    for _ in range(3):
        try:
            http.get(mgmt_server.url + "/v2/x", headers={"Authorization": "Bearer " + token})
        except requests.ConnectionError:
            pass
"""

FIXTURES = (
    """
import pytest
import requests

SETUPS = []


@pytest.fixture(scope="module")
def per_module():
    SETUPS.append("module")
    return object()


@pytest.fixture
def per_test(per_module):
    SETUPS.append("function")
    yield
    SETUPS.append("teardown")


@pytest.mark.mgmtauth_explore(runs=6, seed=1, faults=["reset"])
def test_explored(mgmt_server, mgmt_account, per_test):
"""
    + RESET_BODY
    + """

def test_counts():
    assert SETUPS.count("module") == 1
    assert SETUPS.count("function") == 6
    assert SETUPS.count("teardown") == 6
"""
)


def test_each_run_sets_up_function_fixtures_again_and_module_ones_once(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_explored_fixtures=FIXTURES)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2)


NO_CLOCK = """
import pytest
import requests

FIRED = []


@pytest.mark.mgmtauth_explore(runs=30, seed=2, faults=["revoke"])
def test_explored(mgmt_server, mgmt_account{clock}):
    mgmt_server.route("GET", "/v2/x").respond_with_json({{}})
    http = requests.Session()
    http.trust_env = False
    for _ in range(3):
        token = http.post(
            mgmt_server.url + "/v2/auth",
            data={{"username": mgmt_account.username, "key": mgmt_account.api_key}},
        ).json()["token"]
        http.get(mgmt_server.url + "/v2/x", headers={{"Authorization": "Bearer " + token}})
    FIRED.extend(e.fault for e in mgmt_server.events if type(e).__name__ == "ScheduledFaultFired")


def test_fired():
    assert "revoke" in FIRED
    assert ("clock" in FIRED) is {expect_clock}
"""


@pytest.mark.parametrize("on_clock", [False, True])
def test_clock_moves_only_on_mgmt_clock(pytester: pytest.Pytester, on_clock: bool) -> None:
    clock = ", mgmt_clock" if on_clock else ""
    pytester.makepyfile(test_explored_clock=NO_CLOCK.format(clock=clock, expect_clock=on_clock))
    result = pytester.runpytest_inprocess(
        "-p", "no:randomly", "-W", "ignore::pytest_mgmtauth.TokenChurnWarning"
    )
    result.assert_outcomes(passed=2)


HELD = (
    """
import time

import freezegun.api
import pytest
import requests

REAL_TIME = time.time
#: The outermost freezegun starts, which look through every loaded module (this one too).
SCANS = []
#: Time outside a run's clock, less real time.
OFFSETS = []


@pytest.fixture(scope="module", autouse=True)
def count_scans():
    original = freezegun.api._get_cached_module_attributes

    def counting(module):
        if module.__name__ == __name__:
            SCANS.append(1)
        return original(module)

    freezegun.api._get_cached_module_attributes = counting
    yield
    freezegun.api._get_cached_module_attributes = original


@pytest.fixture
def outside_the_clock():
    OFFSETS.append(time.time() - time.clock_gettime(time.CLOCK_REALTIME))


@pytest.mark.mgmtauth_explore(runs=20, seed=1, faults=["reset"])
def test_explored(mgmt_server, mgmt_account, outside_the_clock, mgmt_clock):
"""
    + RESET_BODY
    + """

def test_after():
    # The baseline run, the hold over the drawn runs, the logged run: not one per run.
    assert len(SCANS) == 3
    assert len(OFFSETS) == 20
    assert all(abs(offset) < 5 for offset in OFFSETS), OFFSETS
    assert time.time is REAL_TIME
"""
)


def test_the_runs_clocks_start_without_freezeguns_module_search(
    pytester: pytest.Pytester,
) -> None:
    """Between the drawn runs freezegun's patches stay in place at real time, so each
    run's mgmt_clock is a nested start; time outside the clock reads real time, and is
    real again after the exploration."""
    pytester.makepyfile(test_explored_held=HELD)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2)


CHURN = """
import pytest
import requests


@pytest.mark.mgmtauth_explore(runs=12, seed=1, faults=["reset"])
def test_churns(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/x").respond_with_json({})
    http = requests.Session()
    http.trust_env = False
    for _ in range(2):
        token = http.post(
            mgmt_server.url + "/v2/auth",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        ).json()["token"]
        try:
            http.get(mgmt_server.url + "/v2/x", headers={"Authorization": "Bearer " + token})
        except requests.ConnectionError:
            pass
"""


def test_warnings_are_counted_over_all_runs_and_shown_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_churn=CHURN)
    # This suite's own settings ignore churn warnings: the inner run shows them.
    shown = ("-W", "default::pytest_mgmtauth.TokenChurnWarning")
    result = pytester.runpytest_inprocess("-p", "no:randomly", *shown)
    result.assert_outcomes(passed=1, warnings=1)
    text = result.stdout.str()
    assert text.count("TokenChurnWarning") == 1
    # Every run churns; the count is over them all (its last run included).
    runs = re.search(r"  (\d+) runs, \d+ distinct schedules, 0 failing", text)
    assert runs is not None
    assert f"(pytest-mgmtauth explore: in {runs[1]} of {runs[1]} runs)" in text


def test_strict_fails_the_exploration_on_a_finding(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_churn=CHURN.replace(
            "import requests", "import requests\npytestmark = pytest.mark.mgmtauth(strict=True)"
        )
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "shortest failing schedule: (no event)",
            "  no event: the test fails without any fault or clock move",
        ]
    )


def test_under_xdist_each_explored_test_is_reported_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(client=CLIENT)
    pytester.makepyfile(
        test_a=SUITE.format(args="runs=10, seed=1, faults=CALM", careful=True),
        test_b=SUITE.format(args="runs=10, seed=2, faults=CALM", careful=True),
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert text.count("= mgmtauth explore =") == 1
    assert re.search(r"test_a.py::test_sync\n  10 runs, \d+ distinct schedules, 0 failing", text)
    assert re.search(r"test_b.py::test_sync\n  10 runs, \d+ distinct schedules, 0 failing", text)


ASYNC = """
import httpx
import pytest


@pytest.mark.asyncio
@pytest.mark.mgmtauth_explore(runs=15, seed=1, faults=["revoke", "unavailable"])
async def test_async(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/x").respond_with_json({"ok": True})
    async with httpx.AsyncClient(base_url=mgmt_server.url, trust_env=False) as http:
        async def login():
            return await http.post(
                "/v2/auth", data={"username": mgmt_account.username, "key": mgmt_account.api_key}
            )
        answer = await login()
        while answer.status_code == 503:
            answer = await login()
        token = answer.json()["token"]
        answer = await http.get("/v2/x", headers={"Authorization": "Bearer " + token})
        assert answer.status_code == 200
"""


def test_an_asyncio_client_is_explored(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_explored_async=ASYNC)
    # Its loop scope set, as a user's suite sets it (pytest-asyncio warns otherwise).
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "shortest failing schedule: revoke@call1",
            "  1. revoke@call1: token T1 revoked on cue",
        ]
    )


V1 = """
import pytest
import requests


@pytest.mark.mgmtauth_explore(runs=20, seed=1, faults=["expire"])
def test_v1(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v1/alerts").respond_with_json([])
    http = requests.Session()
    http.trust_env = False
    login = http.post(
        mgmt_server.url + "/v1/login",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
    )
    utk, session = login.json()["utk"], login.cookies["JSESSIONID"]
    for _ in range(2):  # the first session throughout, never a new login
        answer = http.get(
            mgmt_server.url + "/v1/alerts",
            params={"utk": utk},
            headers={"Cookie": "JSESSIONID=" + session},
        )
        assert answer.status_code == 200
"""


def test_a_v1_session_client_is_explored(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_v1=V1)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "shortest failing schedule: expire@call1",
            "  1. expire@call1: the clock moved on 1800 s to the end of session S1*",
        ]
    )


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        ("@pytest.mark.mgmtauth_explore(run=5)", "unknown argument(s) run; it takes runs"),
        ("@pytest.mark.mgmtauth_explore(replay='melt@call1')", "unknown fault kind 'melt'"),
        (
            "@pytest.mark.mgmtauth_explore()\n@pytest.mark.mgmtauth_sweep(faults=['revoke'])",
            "the test is marked mgmtauth_sweep too",
        ),
    ],
)
def test_a_bad_marker_is_a_collection_error(
    pytester: pytest.Pytester, marks: str, message: str
) -> None:
    pytester.makepyfile(test_bad=f"import pytest\n\n{marks}\ndef test_x(mgmt_server):\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*@pytest.mark.mgmtauth_explore on test_bad.py::test_x: *{message}*"]
    )


def test_a_test_without_the_fake_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="import pytest\n\n@pytest.mark.mgmtauth_explore()\ndef test_x():\n    pass\n"
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*does not use the mgmt_server fixture, so there is nothing to explore*"]
    )


def test_an_exploration_needs_no_hypothesis(pytester: pytest.Pytester) -> None:
    # Drawn with random.Random and shrunk by the plugin: Hypothesis is not imported.
    pytester.makeconftest("import sys\nsys.modules['hypothesis'] = None\n")
    _suite(pytester, "runs=150, seed=3, faults=['revoke', 'unavailable']", careful=False)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:hypothesispytest")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["shortest failing schedule: revoke@call1, unavailable@auth2"])


def test_a_command_line_sweep_leaves_an_explored_test_alone(pytester: pytest.Pytester) -> None:
    _suite(pytester, "runs=5, seed=1, faults=CALM", careful=True)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-sweep=revoke")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  5 runs, * distinct schedules, 0 failing"])


OAUTH = """
from urllib.parse import quote_plus

import pytest
import requests

READ = "acme:main:tiq:2026-07:profiles:read"


@pytest.mark.mgmtauth_explore(runs=25, seed=1, faults=["revoke", "unavailable"])
def test_oauth(mgmt_server, mgmt_oauth_client):
    mgmt_server.route("GET", "/api/profiles", scope=READ).respond_with_json([1])
    auth = (quote_plus(mgmt_oauth_client.client_id), quote_plus(mgmt_oauth_client.client_secret))

    def token(retry):
        answer = requests.post(
            mgmt_server.url + "/oauth/token", data={"grant_type": "client_credentials"}, auth=auth
        )
        if answer.status_code == 503 and retry:
            return token(retry=False)
        answer.raise_for_status()
        return answer.json()["access_token"]

    bearer = token(retry=True)
    for _ in range(2):
        answer = requests.get(
            mgmt_server.url + "/api/profiles", headers={"Authorization": "Bearer " + bearer}
        )
        if answer.status_code == 401:
            bearer = token(retry=False)  # once, without a retry of a 503
            continue
        assert answer.json() == [1]
"""


def test_an_oauth_client_is_explored(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_oauth=OAUTH)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "shortest failing schedule: revoke@call1, unavailable@auth2",
            "  1. revoke@call1: *revoked on cue",
            "  2. unavailable@auth2: POST /oauth/token answered *503*",
        ]
    )


V3_INTERCEPTED = """
import pytest
import requests


@pytest.mark.mgmtauth(intercept=True)
@pytest.mark.mgmtauth_explore(runs=20, seed=1, faults=["revoke"])
def test_v3(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v3/things/accounts/acme/profiles/main").respond_with_json({})
    body = requests.post(  # the service's own host, hard-coded: the fake intercepts it
        "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()
    for _ in range(2):  # never re-authenticates
        answer = requests.get(
            f"https://{body['host']}/v3/things/accounts/acme/profiles/main",
            headers={"Authorization": f"Bearer {body['token']}"},
        )
        assert answer.status_code == 200
"""


def test_an_intercepted_v3_client_is_explored(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_v3=V3_INTERCEPTED)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["shortest failing schedule: revoke@call1", "  1. revoke@call1: *revoked on cue"]
    )


def test_an_xfail_test_explores_and_fails_as_expected(pytester: pytest.Pytester) -> None:
    _suite(pytester, "runs=40, seed=3, faults=['revoke', 'unavailable']", careful=False)
    test = pytester.path / "test_sync.py"
    marked = test.read_text().replace(
        "@pytest.mark.mgmtauth_explore",
        "@pytest.mark.xfail(strict=True)\n@pytest.mark.mgmtauth_explore",
    )
    test.write_text(marked)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["  shortest failing schedule: revoke@call1, unavailable@auth2"])
