"""An exploration's events over real HTTP, met by requests and httpx: a clock move
before a protected call (``schedule_clock_move``) and a 503 on one (``busy``)."""

from __future__ import annotations

import httpx
import pytest
import requests

from pytest_mgmtauth import Account, MgmtClock, MgmtServer, ScheduledFaultFired


@pytest.fixture
def http() -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    return session


@pytest.fixture
def things(mgmt_server: MgmtServer) -> str:
    mgmt_server.route("GET", "/v2/things").respond_with_json({"things": []})
    return f"{mgmt_server.url}/v2/things"


def _token(http: requests.Session, mgmt_server: MgmtServer, account: Account) -> str:
    answer = http.post(
        f"{mgmt_server.url}/v2/auth", data={"username": account.username, "key": account.api_key}
    )
    token: str = answer.json()["token"]
    return token


def _fired(mgmt_server: MgmtServer) -> list[tuple[str, str, str]]:
    return [
        (e.fault, e.point, e.detail)
        for e in mgmt_server.events
        if isinstance(e, ScheduledFaultFired)
    ]


def test_a_clock_move_comes_once_call1_is_answered(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    http: requests.Session,
    things: str,
) -> None:
    mgmt_server.schedule_clock_move(1790, at="call2")
    token = _token(http, mgmt_server, mgmt_account)
    before = mgmt_clock.now()
    assert http.get(things, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert (mgmt_clock.now() - before).total_seconds() == 1790
    # 10 s of the token left: still good.
    assert http.get(things, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert _fired(mgmt_server) == [("clock", "call2", "the clock moved on 1790 s")]


def test_moves_add_up_and_an_expiry_at_the_same_point_follows_the_move(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    http: requests.Session,
    things: str,
) -> None:
    mgmt_server.schedule_clock_move(600, at=1)
    mgmt_server.schedule_clock_move(600, at=2)
    mgmt_server.schedule_fault("expire", at="call2")
    before = mgmt_clock.now()
    token = _token(http, mgmt_server, mgmt_account)  # before call 1: at this grant
    assert http.get(things, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    answer = http.get(things, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    # 600 at the grant, 600 after call 1, then the rest of the token's 1800 s.
    assert (mgmt_clock.now() - before).total_seconds() == 1800
    assert [f[:2] for f in _fired(mgmt_server)] == [
        ("clock", "call1"),
        ("clock", "call2"),
        ("expire", "call2"),
    ]


def test_without_mgmt_clock_the_move_is_recorded_and_not_made(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, things: str
) -> None:
    mgmt_server.schedule_clock_move(1790, at="call1")
    token = _token(http, mgmt_server, mgmt_account)
    assert http.get(things, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert _fired(mgmt_server) == [
        (
            "clock",
            "call1",
            "the clock could not move 1790 s: the test does not run on mgmt_clock",
        )
    ]


@pytest.mark.parametrize(
    ("at", "seconds", "error", "message"),
    [
        ("auth2", 5, ValueError, "at must be a protected call like 'call2'"),
        (0, 5, ValueError, "at must be a protected call like 'call2'"),
        ("call2", -1, ValueError, "seconds"),
        ("call2", "5", TypeError, "seconds"),
    ],
)
def test_a_bad_clock_move_is_refused(
    mgmt_server: MgmtServer, at: object, seconds: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        mgmt_server.schedule_clock_move(seconds, at=at)  # type: ignore[arg-type]


def test_busy_answers_that_call_503_and_the_next_one_normally(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, things: str
) -> None:
    mgmt_server.schedule_fault("busy", at="call2")
    token = _token(http, mgmt_server, mgmt_account)
    headers = {"Authorization": f"Bearer {token}"}
    assert http.get(things, headers=headers).status_code == 200
    busy = http.get(things, headers=headers)
    assert busy.status_code == 503
    assert busy.json()["returnCode"] == 503
    assert "busy@call2" in busy.json()["message"]
    assert http.get(things, headers=headers).status_code == 200
    assert _fired(mgmt_server) == [("busy", "call2", "answered 503")]
    mgmt_server.assert_token_reused()  # a 503 ends nothing: the same token goes on


def test_busy_over_httpx(mgmt_server: MgmtServer, mgmt_account: Account, things: str) -> None:
    mgmt_server.schedule_fault("busy", at=1)
    with httpx.Client(trust_env=False) as http:
        token = http.post(
            f"{mgmt_server.url}/v2/auth",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        ).json()["token"]
        assert http.get(things, headers={"Authorization": f"Bearer {token}"}).status_code == 503


def test_a_sweep_does_not_take_busy(mgmt_server: MgmtServer) -> None:
    from pytest_mgmtauth._verdicts.sweep_plan import check_faults

    with pytest.raises(ValueError, match="unknown fault kind 'busy'; known: expire, revoke"):
        check_faults(["busy"], "@pytest.mark.mgmtauth_sweep")
