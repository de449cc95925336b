"""The throttling policy on the wire: 429, Retry-After and a JSON body for a client that
asks for a token on every call; never for one that reuses its token."""

from __future__ import annotations

import pytest
import requests

from pytest_mgmtauth import Account, MgmtClock, MgmtServer, Throttled, TokenIssued


def _auth(http: requests.Session, server: MgmtServer, account: Account) -> requests.Response:
    return http.post(
        f"{server.url}/v2/auth", data={"username": account.username, "key": account.api_key}
    )


def _churning_client_calls(
    http: requests.Session, server: MgmtServer, account: Account, clock: MgmtClock, calls: int
) -> list[requests.Response]:
    """A client that asks for a new token before every API call, one call a second."""
    answers = []
    for _ in range(calls):
        answer = _auth(http, server, account)
        answers.append(answer)
        if answer.status_code == 200:
            token = answer.json()["token"]
            call = http.get(f"{server.url}/v2/things", headers={"Authorization": f"Bearer {token}"})
            assert call.status_code == 200
        clock.advance(seconds=1)
    return answers


def test_by_default_a_client_that_reauths_on_every_call_is_throttled_within_a_handful(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v2/things").respond_with_json({"things": []})
    answers = _churning_client_calls(http, mgmt_server, mgmt_account, mgmt_clock, 8)
    # One honest grant, then the default 5 premature ones, then 429.
    assert [a.status_code for a in answers] == [200] * 6 + [429] * 2
    throttled = answers[6]
    # Premature grants at t=1..5; the one at t=1 leaves the 60 s window at t=61; now t=6.
    assert throttled.headers["Retry-After"] == "55"
    assert throttled.headers["Content-Type"] == "application/json"
    body = throttled.json()
    assert body["returnCode"] == 429
    assert body["retryAfter"] == 55
    assert body["message"].startswith("Too many authentication requests: 5 new tokens within 60 s")
    events = [e for e in mgmt_server.events if isinstance(e, Throttled)]
    assert [(e.retry_after, e.premature_grants) for e in events] == [(55, 5), (54, 5)]
    with pytest.raises(AssertionError) as excinfo:
        mgmt_server.assert_token_reused()
    assert "/v2/auth throttled (429, Retry-After 55s)" in str(excinfo.value)


@pytest.mark.mgmtauth(throttle=2)
def test_a_client_that_honours_retry_after_gets_through_after_waiting_it(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    for _ in range(3):
        assert _auth(http, mgmt_server, mgmt_account).status_code == 200
    throttled = _auth(http, mgmt_server, mgmt_account)
    assert throttled.status_code == 429
    mgmt_clock.advance(seconds=int(throttled.headers["Retry-After"]) - 1)
    assert _auth(http, mgmt_server, mgmt_account).status_code == 429  # a second too early
    mgmt_clock.advance(seconds=1)
    assert _auth(http, mgmt_server, mgmt_account).status_code == 200
    with pytest.raises(AssertionError):
        mgmt_server.assert_token_reused()


@pytest.mark.mgmtauth(throttle=1, token_ttl=600)
def test_a_client_that_reuses_its_token_is_never_throttled_even_at_the_tightest_setting(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v2/things").respond_with_json({"things": []})
    token, expires = "", 0.0
    for _ in range(120):  # 120 calls over 6 simulated hours
        if mgmt_clock.now().timestamp() >= expires - 30:  # refresh 30 s before expiry
            answer = _auth(http, mgmt_server, mgmt_account)
            assert answer.status_code == 200, answer.text
            token, expires = answer.json()["token"], mgmt_clock.now().timestamp() + 600
        call = http.get(
            f"{mgmt_server.url}/v2/things", headers={"Authorization": f"Bearer {token}"}
        )
        assert call.status_code == 200
        mgmt_clock.advance(seconds=180)
    assert mgmt_server.auth_count() == 30  # one token per 4 calls (720 s)
    assert not [e for e in mgmt_server.events if isinstance(e, Throttled)]
    mgmt_server.assert_token_reused()


@pytest.mark.mgmtauth(throttle=None)
def test_throttle_none_lets_a_churning_client_through(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    answers = [_auth(http, mgmt_server, mgmt_account) for _ in range(30)]
    assert {a.status_code for a in answers} == {200}
    grants = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert sum(e.premature for e in grants) == 29
    with pytest.raises(AssertionError):
        mgmt_server.assert_token_reused()
