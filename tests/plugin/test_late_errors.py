"""Errors a route handler raises after its test has ended (its client gave up waiting)
are reported at the end of the session, naming the test they belonged to (pytester)."""

from __future__ import annotations

import threading

import pytest

from pytest_mgmtauth import plugin


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


#: The handler waits until the test has ended (``release`` is torn down after
#: mgmt_server), then raises: the client timed out long before. No sleeps, no timing.
SUITE = """
import threading

import pytest
import requests


@pytest.fixture
def release():
    event = threading.Event()
    yield event
    event.set()  # after mgmt_server's teardown: the test has ended


def test_gives_up_waiting(release, mgmt_server, mgmt_account):
    def slow(request):
        release.wait(timeout=30)
        raise RuntimeError("the handler failed after its client had left")

    mgmt_server.route("GET", "/api/slow").respond_with_handler(slow)
    token = requests.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(
            mgmt_server.url + "/api/slow",
            headers={"Authorization": "Bearer " + token},
            timeout=0.2,
        )
"""

#: Another test after it, so that the error is not simply the last test's own.
LATER = """

def test_later(mgmt_server):
    assert mgmt_server.auth_count() == 0
"""

EXPECTED = [
    "*= ERRORS =*",
    "*_ ERROR at teardown of test_later _*",
    "pytest-mgmtauth: 1 error(s) raised in the fake service after the test they belonged "
    "to had ended (its client had stopped waiting for the answer), so that test could "
    "not report them:",
    "in test_late.py::test_gives_up_waiting: the handler of <route GET /api/slow auth=v2> "
    "raised RuntimeError: the handler failed after its client had left",
    "Traceback (most recent call last):",
    "*in slow*",
    "RuntimeError: the handler failed after its client had left",
    "*= short test summary info =*",
    "ERROR test_late.py::test_later - Failed: pytest-mgmtauth: 1 error(s) raised*",
]


def test_an_error_raised_after_the_test_ended_fails_the_session_naming_its_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_late=SUITE + LATER)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(EXPECTED)
    # pytrace=False: the handler's traceback, not the plugin's frames.
    assert "plugin.py" not in result.stdout.str()


def test_under_xdist_the_worker_reports_it_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_late=SUITE)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_gives_up_waiting _*",
            "*in test_late.py::test_gives_up_waiting: the handler of <route GET /api/slow "
            "auth=v2> raised RuntimeError: the handler failed after its client had left",
        ]
    )


class _Release:
    """A plugin of the inner run: the event its stuck handler waits for."""

    def __init__(self) -> None:
        self.event = threading.Event()

    @pytest.fixture
    def done(self) -> threading.Event:
        return self.event


def test_a_handler_still_running_at_the_end_is_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plugin, "LATE_HANDLER_GRACE", 0.1)
    pytester.makepyfile(
        test_stuck="""
        import pytest
        import requests


        def test_leaves_it_running(mgmt_server, mgmt_account, done):
            mgmt_server.route("GET", "/api/stuck").respond_with_handler(
                lambda request: done.wait(timeout=30)
            )
            token = requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            ).json()["token"]
            with pytest.raises(requests.exceptions.ReadTimeout):
                requests.get(
                    mgmt_server.url + "/api/stuck",
                    headers={"Authorization": "Bearer " + token},
                    timeout=0.2,
                )
        """
    )
    release = _Release()
    try:
        result = pytester.runpytest_inprocess("-p", "no:randomly", plugins=[release])
    finally:
        release.event.set()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-mgmtauth: route handler(s) still running 0.1 s after the last test "
            "ended; whatever they raise is lost:",
            "  in test_stuck.py::test_leaves_it_running: the handler of <route GET "
            "/api/stuck auth=v2>",
        ]
    )
