"""``mgmt_server.wait``: blocking until the fake has seen grants, calls or anything its
events say, for clients that work on another thread; a timeout that says what it saw."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests

from pytest_mgmtauth import Account, ApiCall, Event, MgmtClock, MgmtServer, TokenIssued


def _token(http: requests.Session, server: MgmtServer, account: Account) -> str:
    answer = http.post(
        f"{server.url}/v2/auth", data={"username": account.username, "key": account.api_key}
    )
    assert answer.status_code == 200
    token: str = answer.json()["token"]
    return token


@pytest.fixture
def go() -> Iterator[threading.Event]:
    """Set when the test is waiting: the background client starts only then, so the
    wait sees its events arrive (no sleep decides the order)."""
    event = threading.Event()
    yield event
    event.set()


def test_wait_returns_once_a_background_client_has_authenticated_and_called(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, go: threading.Event
) -> None:
    mgmt_server.route("GET", "/v2/devices").respond_with_json([])

    def client() -> None:
        go.wait(10)
        with requests.Session() as own:
            own.trust_env = False
            token = _token(own, mgmt_server, mgmt_account)
            own.get(f"{mgmt_server.url}/v2/devices", headers={"Authorization": f"Bearer {token}"})

    worker = threading.Thread(target=client)
    worker.start()
    go.set()
    events = mgmt_server.wait(grants=1, calls=1, timeout=30)
    worker.join(30)
    assert [type(e) for e in events if isinstance(e, (TokenIssued, ApiCall))] == [
        TokenIssued,
        ApiCall,
    ]


def test_counts_run_from_the_tests_start_so_a_finished_client_returns_at_once(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    _token(http, mgmt_server, mgmt_account)
    _token(http, mgmt_server, mgmt_account)
    events = mgmt_server.wait(grants=2, version="v2", username=mgmt_account.username)
    assert len([e for e in events if isinstance(e, TokenIssued)]) == 2


def test_until_waits_for_anything_the_events_say(
    mgmt_server: MgmtServer, mgmt_account: Account, go: threading.Event
) -> None:
    def client() -> None:
        go.wait(10)
        with requests.Session() as own:
            own.trust_env = False
            own.post(f"{mgmt_server.url}/v2/auth", data={"username": "nobody", "key": "x"})

    worker = threading.Thread(target=client)
    worker.start()
    go.set()

    def refused(events: list[Event]) -> bool:
        return any(type(e).__name__ == "AuthRejected" for e in events)

    assert refused(mgmt_server.wait(until=refused, timeout=30))
    worker.join(30)


def test_a_timeout_fails_saying_what_was_awaited_what_was_seen_and_the_timeline(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    _token(http, mgmt_server, mgmt_account)
    with pytest.raises(AssertionError) as failed:
        mgmt_server.wait(grants=2, calls=1, version="v2", timeout=0.05)
    text = str(failed.value)
    assert text.startswith(
        "mgmt_server.wait(grants=2, calls=1, version='v2') timed out after 0.05 s of real "
        "time: the fake saw 1 grant(s) and 0 call(s) of those counted (1 and 0 in all).\n"
        "Timeline of all accounts"
    )
    assert "T1 issued by /v2/auth" in text


def test_the_timeout_is_real_time_under_a_frozen_mgmt_clock(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock
) -> None:
    before = mgmt_clock.now()
    with pytest.raises(AssertionError, match=r"timed out after 0\.05 s of real time"):
        mgmt_server.wait(grants=1, timeout=0.05)
    assert mgmt_clock.now() == before  # the wait never moves the simulated clock


def test_a_false_until_is_named_in_the_timeout(mgmt_server: MgmtServer) -> None:
    def never(events: list[Event]) -> bool:
        return False

    with pytest.raises(
        AssertionError, match=r"wait\(until=never\) .* 0 call\(s\); until\(\) is False"
    ):
        mgmt_server.wait(until=never, timeout=0.01)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, ValueError, r"needs something to wait for: grants=N, calls=N or until="),
        ({"grants": 0}, ValueError, r"'grants' must be an int >= 1 .* got 0"),
        ({"calls": True}, ValueError, r"'calls' must be an int >= 1 .* got True"),
        ({"calls": 1, "version": "v9"}, ValueError, r"wait\(\) version must be 'v2' .* got 'v9'"),
        ({"grants": 1, "username": "nobody"}, ValueError, r"no account 'nobody' in this test"),
        ({"grants": 1, "timeout": -1}, ValueError, r"'timeout' must be > 0 and <= 3600"),
        ({"grants": 1, "timeout": "5"}, TypeError, r"'timeout' takes seconds"),
        ({"until": 3}, TypeError, r"until= takes a function of the events, got 3"),
    ],
)
def test_bad_arguments_say_what_was_wrong(
    mgmt_server: MgmtServer, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        mgmt_server.wait(**kwargs)  # type: ignore[arg-type]
