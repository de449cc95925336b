"""Sweeps as a user's suite sees them (pytester): the expansion and its ids, skips of
points not reached, the matrix and verdict, the failure's report section, JUnit
properties, xdist, --lf, the command-line sweep of an unmarked suite, and validation."""

from __future__ import annotations

import re
import textwrap
import xml.etree.ElementTree as ET

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


#: A client that never re-authenticates after a 401 (``retry=False``) or does so once.
CLIENT = """
import requests


class Client:
    def __init__(self, server, account, *, retry):
        self.url, self.account, self.retry = server.url, account, retry
        self.token = None

    def _auth(self):
        answer = requests.post(
            self.url + "/v2/auth",
            data={"username": self.account.username, "key": self.account.api_key},
        )
        answer.raise_for_status()
        self.token = answer.json()["token"]

    def get(self, path):
        for attempt in (1, 2):
            if self.token is None:
                self._auth()
            answer = requests.get(
                self.url + path, headers={"Authorization": "Bearer " + self.token}
            )
            if answer.status_code == 401 and self.retry and attempt == 1:
                self.token = None
                continue
            answer.raise_for_status()
            return answer.json()
"""

SUITE = """
import pytest
from client import Client


@pytest.mark.mgmtauth_sweep(faults=("revoke", "throttle"), points=3)
def test_sync(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1, 2])
    client = Client(mgmt_server, mgmt_account, retry=False)
    assert client.get("/v2/devices") == [1, 2]
    assert client.get("/v2/devices") == [1, 2]


def test_unswept(mgmt_server):
    pass
"""


def _suite(pytester: pytest.Pytester, suite: str = SUITE) -> None:
    pytester.makepyfile(client=CLIENT, test_suite=suite)


def test_the_marker_expands_a_test_into_a_baseline_and_one_item_per_fault_and_point(
    pytester: pytest.Pytester,
) -> None:
    _suite(pytester)
    result = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:randomly")
    result.stdout.fnmatch_lines(
        [
            "test_suite.py::test_sync[mgmtauth-baseline]",
            "test_suite.py::test_sync[mgmtauth-revoke@call1]",
            "test_suite.py::test_sync[mgmtauth-revoke@call2]",
            "test_suite.py::test_sync[mgmtauth-revoke@call3]",
            "test_suite.py::test_sync[mgmtauth-throttle@auth1]",
            "test_suite.py::test_sync[mgmtauth-throttle@auth2]",
            "test_suite.py::test_sync[mgmtauth-throttle@auth3]",
            "test_suite.py::test_unswept",
            "8 tests collected*",
        ]
    )


def test_a_sweep_runs_skips_unreached_points_and_prints_the_matrix_and_verdict(
    pytester: pytest.Pytester,
) -> None:
    _suite(pytester)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-rs")
    # revoke before call 1 and 2 fails (no retry); call 3 and auth 2, 3 are never reached;
    # throttle at auth 1 fails (raise_for_status on the 429).
    result.assert_outcomes(passed=2, failed=3, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*SKIPPED*mgmtauth sweep: revoke@call3 not reached: the test made only 2 "
            "protected calls",
            "*SKIPPED*mgmtauth sweep: throttle@auth2 not reached: the test made only 1 "
            "authentication",
        ],
        consecutive=False,
    )
    result.stdout.re_match_lines(
        [
            r"=+ mgmtauth sweep =+",
            r"test_suite.py::test_sync$",
            r" +1 +2 +3$",
            r"  baseline +ok$",
            r"  revoke call +FAIL +FAIL +-$",
            r"  throttle auth +FAIL +- +-$",
            r"  verdict: revoke fails from call 1 \(2/2 points\): the client never "
            r"re-authenticates after a 401 with 1401; throttle fails from auth 1 \(1/1 "
            r"points\): the client never retried authentication after a 429$",
        ]
    )
    assert "test_unswept" not in result.stdout.str().split("mgmtauth sweep")[-1]


def test_tests_run_between_swept_items_get_no_fault(pytester: pytest.Pytester) -> None:
    # The sweep's fixture is session-scoped (cached for the unswept tests) and function-
    # scoped where the sweep parametrizes it: a point must not outlive its item. A
    # client that never re-authenticates fails if a revoke reaches it.
    suite = """
    import pytest
    from client import Client


    def _two_calls(mgmt_server, mgmt_account, *, retry):
        mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
        client = Client(mgmt_server, mgmt_account, retry=retry)
        assert client.get("/v2/devices") == [1]
        assert client.get("/v2/devices") == [1]


    def test_a_before(mgmt_server, mgmt_account):
        _two_calls(mgmt_server, mgmt_account, retry=False)


    @pytest.mark.mgmtauth_sweep(faults=("revoke",), points=2)
    def test_b_swept(mgmt_server, mgmt_account):
        _two_calls(mgmt_server, mgmt_account, retry=True)


    def test_c_after(mgmt_server, mgmt_account):
        _two_calls(mgmt_server, mgmt_account, retry=False)


    @pytest.mark.mgmtauth_sweep(faults=("revoke",), points=1)
    def test_d_swept_again(mgmt_server, mgmt_account):
        _two_calls(mgmt_server, mgmt_account, retry=False)
    """
    _suite(pytester, textwrap.dedent(suite))
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-v")
    result.stdout.fnmatch_lines(
        [
            "*::test_a_before PASSED*",
            "*::test_b_swept[[]mgmtauth-baseline[]] PASSED*",
            "*::test_b_swept[[]mgmtauth-revoke@call1[]] PASSED*",
            "*::test_b_swept[[]mgmtauth-revoke@call2[]] PASSED*",
            "*::test_c_after PASSED*",
            "*::test_d_swept_again[[]mgmtauth-baseline[]] PASSED*",
            "*::test_d_swept_again[[]mgmtauth-revoke@call1[]] FAILED*",
        ]
    )
    result.assert_outcomes(passed=6, failed=1)


def test_a_failing_sweep_item_shows_the_fault_and_what_the_client_did_after_it(
    pytester: pytest.Pytester,
) -> None:
    _suite(pytester)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-k", "revoke and call2")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r"-+ mgmtauth sweep -+",
            r"fault: revoke@call2",
            r"fired: token T1 revoked on cue",
            r"after it: the client never re-authenticates after a 401 with 1401",
            r"what the client did after the fault:",
            r"  \d\d:\d\d:\d\d  GET /v2/devices with T1 -> 401 \(1401: token T1 was revoked",
        ]
    )


def test_a_client_that_recovers_passes_and_an_expire_it_met_late_is_noted(
    pytester: pytest.Pytester,
) -> None:
    suite = """
    import pytest
    from client import Client

    @pytest.mark.mgmtauth_sweep(faults=("expire", "revoke"), points=2)
    def test_sync(mgmt_server, mgmt_account, mgmt_clock):
        mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
        client = Client(mgmt_server, mgmt_account, retry=True)
        assert client.get("/v2/devices") == [1]
        assert client.get("/v2/devices") == [1]
    """
    _suite(pytester, suite)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=5)
    result.stdout.re_match_lines(
        [
            # Call 1's token expired while /v2/auth was answering: nothing to note.
            r"  expire call +ok +ok\*$",
            r"  revoke call +ok +ok$",
            r"  verdict: survives expire at 2/2 points, but at call 2 lost a call: it "
            r"sent GET /v2/devices with the expired credential and re-authenticated only "
            r"after the 401 \(renew before the credential expires\); survives revoke at "
            r"2/2 points$",
        ]
    )


def test_junit_xml_carries_each_items_fault_point_and_outcome(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    pytester.runpytest_inprocess("-p", "no:randomly", "--junitxml=report.xml")
    root = ET.parse(pytester.path / "report.xml").getroot()
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    revoke = properties["test_sync[mgmtauth-revoke@call1]"]
    assert revoke["mgmtauth_sweep_test"] == "test_suite.py::test_sync"
    assert revoke["mgmtauth_sweep_fault"] == "revoke"
    assert revoke["mgmtauth_sweep_point"] == "revoke@call1"
    assert revoke["mgmtauth_sweep_outcome"] == "failed"
    assert revoke["mgmtauth_sweep_after"] == (
        "the client never re-authenticates after a 401 with 1401"
    )
    assert properties["test_sync[mgmtauth-throttle@auth3]"]["mgmtauth_sweep_outcome"] == (
        "not reached"
    )
    assert properties["test_sync[mgmtauth-baseline]"]["mgmtauth_sweep_outcome"] == "passed"
    assert "mgmtauth_sweep_point" not in properties["test_unswept"]


def test_under_xdist_the_controller_prints_the_matrix_from_the_workers_reports(
    pytester: pytest.Pytester,
) -> None:
    _suite(pytester)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=3, skipped=3)
    result.stdout.re_match_lines(
        [
            r"=+ mgmtauth sweep =+",
            r"test_suite.py::test_sync$",
            r"  revoke call +FAIL +FAIL +-$",
            r"  throttle auth +FAIL +- +-$",
            r"  verdict: revoke fails from call 1 .*",
        ]
    )


def test_last_failed_reruns_only_the_failed_points(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=2, failed=3, skipped=3)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--lf", "-v")
    result.assert_outcomes(failed=3)
    ran = [line for line in result.stdout.lines if " FAILED" in line and "::" in line]
    assert sorted(line.split(" ")[0] for line in ran) == [
        "test_suite.py::test_sync[mgmtauth-revoke@call1]",
        "test_suite.py::test_sync[mgmtauth-revoke@call2]",
        "test_suite.py::test_sync[mgmtauth-throttle@auth1]",
    ]


UNMARKED = """
from client import Client


def test_one_call(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([])
    assert Client(mgmt_server, mgmt_account, retry=True).get("/v2/devices") == []


def test_no_server():
    pass
"""


def test_the_command_line_sweeps_every_test_that_uses_mgmt_server(
    pytester: pytest.Pytester,
) -> None:
    _suite(pytester, UNMARKED)
    result = pytester.runpytest_inprocess(
        "-p", "no:randomly", "-v", "--mgmtauth-sweep=expire,revoke", "--mgmtauth-sweep-points=2"
    )
    # call 2 is never reached: the test makes one protected call.
    result.assert_outcomes(passed=4, skipped=2)
    ran = [
        ("test_one_call[mgmtauth-baseline]", "PASSED"),
        ("test_one_call[mgmtauth-expire@call1]", "PASSED"),
        ("test_one_call[mgmtauth-expire@call2]", "SKIPPED"),
        ("test_one_call[mgmtauth-revoke@call1]", "PASSED"),
        ("test_one_call[mgmtauth-revoke@call2]", "SKIPPED"),
        ("test_no_server", "PASSED"),
    ]
    result.stdout.re_match_lines(
        [re.escape(f"test_suite.py::{name} {outcome}") for name, outcome in ran]
    )


def test_the_ini_setting_sweeps_too_and_a_marker_with_no_faults_opts_out(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmgmtauth_sweep = revoke\nmgmtauth_sweep_points = 1\n")
    opted_out = """
    import pytest

    @pytest.mark.mgmtauth_sweep(faults=())
    def test_opted_out(mgmt_server):
        pass
    """
    _suite(pytester, UNMARKED + "\n" + textwrap.dedent(opted_out))
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_suite.py::test_one_call[mgmtauth-baseline]",
            "test_suite.py::test_one_call[mgmtauth-revoke@call1]",
            "test_suite.py::test_no_server",
            "test_suite.py::test_opted_out",
            "4 tests collected*",
        ]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            'faults=("expire", "melt")',
            "unknown fault kind 'melt'; known: expire, revoke, throttle, unavailable, reset",
        ),
        ("points=0", "points must be a positive int (at most 100)"),
        ('points="5"', "points must be a positive int"),
        ("pointz=5", "unknown argument(s) pointz; it takes faults=(...) and points=N"),
        ('"expire"', "takes keyword arguments only"),
    ],
)
def test_a_bad_marker_is_a_collection_error_that_says_what_to_fix(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.mgmtauth_sweep({marker})
        def test_x(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    text = result.stdout.str()
    assert "@pytest.mark.mgmtauth_sweep on test_a_bad_marker_is_a_collection_error" in text
    assert message in text
    assert "Traceback" not in text


def test_a_marker_on_a_test_without_mgmt_server_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mgmtauth_sweep(faults=("expire",))
        def test_x():
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the test does not use the mgmt_server fixture*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--mgmtauth-sweep=expire,nap",), "unknown fault kind 'nap'"),
        (("--mgmtauth-sweep-points=0",), "points must be a positive int"),
        (("--mgmtauth-sweep-points=many",), "expected a positive whole number"),
    ],
)
def test_a_bad_sweep_option_is_a_usage_error(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_a_sweep_item_does_not_keep_its_fake_alive_after_its_teardown(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import gc
        import weakref

        from pytest_mgmtauth import MgmtServer

        ALIVE = []
        # Fakes of earlier in-process runs of the outer session are not this run's.
        BEFORE = weakref.WeakSet()

        def _fakes():
            gc.collect()
            return [o for o in gc.get_objects() if type(o) is MgmtServer]

        def pytest_sessionstart(session):
            BEFORE.update(_fakes())

        def pytest_runtest_logfinish(nodeid, location):
            ALIVE.append(sum(1 for o in _fakes() if o not in BEFORE))

        def pytest_sessionfinish(session):
            print("alive after each test:", ALIVE)
        """
    )
    # A client that recovers: a failure's traceback would keep its test's fake alive
    # (pytest's doing, not the sweep's).
    suite = SUITE.replace("retry=False", "retry=True").replace(
        'faults=("revoke", "throttle")', 'faults=("revoke",)'
    )
    _suite(pytester, suite)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-s")
    result.assert_outcomes(passed=4, skipped=1)
    result.stdout.fnmatch_lines(["*alive after each test: [[]0, 0, 0, 0, 0[]]"])
