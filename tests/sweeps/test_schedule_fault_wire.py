"""mgmt_server.schedule_fault over real HTTP, met by requests: what a client sees at each
kind of trigger point."""

from __future__ import annotations

import pytest
import requests

from pytest_mgmtauth import Account, MgmtClock, MgmtServer, ScheduledFaultFired
from pytest_mgmtauth._service.records import status_code


@pytest.fixture
def things(mgmt_server: MgmtServer) -> str:
    mgmt_server.route("GET", "/v2/things").respond_with_json({"things": []})
    return f"{mgmt_server.url}/v2/things"


def _token(http: requests.Session, mgmt_server: MgmtServer, account: Account) -> requests.Response:
    return http.post(
        f"{mgmt_server.url}/v2/auth", data={"username": account.username, "key": account.api_key}
    )


def _get(http: requests.Session, url: str, token: str) -> requests.Response:
    return http.get(url, headers={"Authorization": f"Bearer {token}"})


def test_expire_before_a_call_moves_mgmt_clock_so_a_careful_client_can_renew(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    http: requests.Session,
    things: str,
) -> None:
    mgmt_server.schedule_fault("expire", at="call2")
    token = _token(http, mgmt_server, mgmt_account).json()["token"]
    before = mgmt_clock.now()
    assert _get(http, things, token).status_code == 200
    # Call 1 was answered: the token's 30 minutes have passed.
    assert (mgmt_clock.now() - before).total_seconds() == 1800
    answer = _get(http, things, token)
    assert answer.status_code == 401
    assert answer.json()["returnCode"] == 1401
    assert mgmt_server.scheduled_faults == []
    assert mgmt_server.protected_calls == 2


def test_revoke_before_a_call_refuses_the_token_until_the_client_re_authenticates(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, things: str
) -> None:
    mgmt_server.schedule_fault("revoke", at="call1")
    token = _token(http, mgmt_server, mgmt_account).json()["token"]
    assert _get(http, things, token).status_code == 401
    fresh = _token(http, mgmt_server, mgmt_account).json()["token"]
    assert _get(http, things, fresh).status_code == 200
    mgmt_server.assert_token_reused()  # re-authenticating after the 401 is no churn


def test_reset_drops_the_connection_of_that_call_only(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, things: str
) -> None:
    mgmt_server.schedule_fault("reset", at="call2")
    token = _token(http, mgmt_server, mgmt_account).json()["token"]
    assert _get(http, things, token).status_code == 200
    with pytest.raises(requests.ConnectionError):
        _get(http, things, token)
    assert _get(http, things, token).status_code == 200


@pytest.mark.parametrize(("kind", "status"), [("throttle", 429), ("unavailable", 503)])
def test_throttle_and_unavailable_answer_that_authentication(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    http: requests.Session,
    kind: str,
    status: int,
) -> None:
    mgmt_server.schedule_fault(kind, at="auth2")
    assert _token(http, mgmt_server, mgmt_account).status_code == 200
    answer = _token(http, mgmt_server, mgmt_account)
    assert answer.status_code == status
    assert answer.json()["returnCode"] == status_code(status)
    if kind == "throttle":
        assert answer.headers["Retry-After"] == "1"
        mgmt_clock.advance(seconds=1)  # a throttled client waits Retry-After
    assert _token(http, mgmt_server, mgmt_account).status_code == 200
    assert mgmt_server.auth_calls == 3
    fired = [e for e in mgmt_server.events if isinstance(e, ScheduledFaultFired)]
    assert [(e.fault, e.point) for e in fired] == [(kind, "auth2")]
    assert f"scheduled fault {kind}@auth2" in mgmt_server.timeline()


def test_a_bad_point_is_a_value_error_in_the_test(mgmt_server: MgmtServer) -> None:
    with pytest.raises(ValueError, match=r"throttle is triggered at an authentication"):
        mgmt_server.schedule_fault("throttle", at="call1")
