"""Scripted faults on /v2/auth and /v1/login, each met by a real client's retry or
recovery path: errors (5xx, 429, 1401, 1402), hangs, connection resets, malformed JSON."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from pytest_mgmtauth import (
    Account,
    AccountLocked,
    AuthRejected,
    Event,
    FaultInjected,
    LoginRejected,
    MgmtClock,
    MgmtServer,
    Throttled,
    TokenIssued,
)


def _auth(
    http: requests.Session, server: MgmtServer, account: Account, **kw: Any
) -> requests.Response:
    return http.post(
        f"{server.url}/v2/auth",
        data={"username": account.username, "key": account.api_key},
        **kw,
    )


def _faults(server: MgmtServer) -> list[FaultInjected]:
    return [e for e in server.events if isinstance(e, FaultInjected)]


def _fault_fired(events: list[Event]) -> bool:
    return any(isinstance(e, FaultInjected) for e in events)


def _with_retries(http: requests.Session, retry: Retry) -> requests.Session:
    http.mount("http://", HTTPAdapter(max_retries=retry))
    return http


# -- errors ------------------------------------------------------------------------------


def test_5xx_errors_then_a_token_for_a_client_with_urllib3_retries(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.fail_next(2, error=503)
    retry = Retry(total=3, status_forcelist=[502, 503, 504], allowed_methods=None, backoff_factor=0)
    answer = _auth(_with_retries(http, retry), mgmt_server, mgmt_account)
    assert answer.status_code == 200
    assert answer.raw.retries is not None
    assert [h.status for h in answer.raw.retries.history] == [503, 503]
    assert [(e.fault, e.ordinal, e.count, e.username) for e in _faults(mgmt_server)] == [
        ("fail", 1, 2, mgmt_account.username),
        ("fail", 2, 2, mgmt_account.username),
    ]
    assert mgmt_server.auth_count() == 1
    assert mgmt_server.pending_faults == []


def test_a_5xx_body_is_the_fakes_json_error(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.fail_next(error=502)
    answer = _auth(http, mgmt_server, mgmt_account)
    assert answer.status_code == 502
    assert answer.json()["returnCode"] == 502
    assert "scripted fault" in answer.json()["message"]
    assert "Retry-After" not in answer.headers


def test_a_scripted_429_carries_retry_after_which_the_client_honours(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    mgmt_server.fail_next(error=429, retry_after=7)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        mgmt_clock.advance(seconds=seconds)

    def auth_with_backoff(client: httpx.Client, sleep: Callable[[float], None]) -> httpx.Response:
        for _ in range(3):
            answer = client.post(
                "/v2/auth", data={"username": mgmt_account.username, "key": mgmt_account.api_key}
            )
            if answer.status_code != 429:
                return answer
            sleep(float(answer.headers["Retry-After"]))
        raise AssertionError("still throttled")

    with httpx.Client(base_url=mgmt_server.url, trust_env=False) as client:
        answer = auth_with_backoff(client, sleep)
    assert answer.status_code == 200
    assert slept == [7.0]
    (fault,) = _faults(mgmt_server)
    assert fault.detail == "error 429, Retry-After 7s"
    assert "throttled again" not in mgmt_server.timeline()


def test_a_retry_inside_a_scripted_retry_after_is_throttled_again_and_shown(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    """As a real throttle answers: a client that retries at once gets 429 again, with the
    Retry-After that is left, until the wait is over."""
    mgmt_server.fail_next(error=429, retry_after=30)
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}
    with httpx.Client(base_url=mgmt_server.url, trust_env=False) as client:
        assert client.post("/v2/auth", data=form).status_code == 429
        mgmt_clock.advance(seconds=10)
        again = client.post("/v2/auth", data=form)
        assert again.status_code == 429
        assert again.headers["Retry-After"] == "20"
        assert "retried 10 s after a 429 with Retry-After 30 s" in again.json()["message"]
        mgmt_clock.advance(seconds=20)
        assert client.post("/v2/auth", data=form).status_code == 200
    throttled = [e for e in mgmt_server.events if isinstance(e, Throttled)]
    assert [(e.waited, e.asked, e.retry_after) for e in throttled] == [(10, 30, 20)]
    assert (
        "/v2/auth throttled again (429, Retry-After 20s): retried 10 s after a 429 with "
        "Retry-After 30s; honour Retry-After"
    ) in mgmt_server.timeline()


def test_a_client_that_slept_retry_after_in_real_time_under_a_frozen_clock_is_told_so(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    """Issue 43, 5: urllib3's Retry really sleeps Retry-After (1 s) while mgmt_clock
    stands still; "retried 0 s after a 429" alone was untrue."""
    mgmt_server.fail_next(error=429, retry_after=1)
    retry = Retry(total=1, status_forcelist=[429], allowed_methods=None, raise_on_status=False)
    with requests.Session() as http:
        http.trust_env = False
        http.mount("http://", HTTPAdapter(max_retries=retry))
        form = {"username": mgmt_account.username, "key": mgmt_account.api_key}
        again = http.post(mgmt_server.url_for("/v2/auth"), data=form, timeout=10)
    assert again.status_code == 429
    message = again.json()["message"]
    assert "retried 0 s after a 429 with Retry-After 1 s on the test's clock, after 1." in message
    told = (
        "the client waited in real time while the test froze time (mgmt_clock), so the "
        "fake saw no time pass; let it wait on mgmt_clock: give it a sleep that calls "
        "mgmt_clock.advance(seconds=...)"
    )
    assert told in message
    (throttled,) = [e for e in mgmt_server.events if isinstance(e, Throttled)]
    assert (throttled.waited, throttled.asked) == (0, 1)
    assert throttled.waited_real is not None
    assert throttled.waited_real >= 1
    timeline = mgmt_server.timeline()
    assert "throttled again (429, Retry-After 1s): retried 0 s after a 429 with" in timeline
    assert told in timeline


def test_a_scripted_1401_is_a_service_error_the_client_retries_once(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.fail_next(error=1401, version="v2")
    first = _auth(http, mgmt_server, mgmt_account)
    assert first.status_code == 401
    assert first.json()["returnCode"] == 1401
    assert first.json()["message"].startswith("Authentication failed")
    assert _auth(http, mgmt_server, mgmt_account).status_code == 200
    # Scripted: no rejection of the key was recorded, only the fault.
    assert not [e for e in mgmt_server.events if isinstance(e, AuthRejected)]
    assert len(_faults(mgmt_server)) == 1


def test_a_scripted_1402_on_login_leaves_the_account_unlocked(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.fail_next(error=1402, version="v1")
    form = {"username": mgmt_account.username, "password": mgmt_account.password}
    locked = http.post(f"{mgmt_server.url}/v1/login", data=form)
    assert locked.status_code == 401
    assert locked.json()["returnCode"] == 1402
    assert "Too many unsuccessful login attempts" in locked.json()["message"]
    mgmt_clock.advance(minutes=10)  # the client waits as the message says, then retries
    assert http.post(f"{mgmt_server.url}/v1/login", data=form).status_code == 200
    assert not [e for e in mgmt_server.events if isinstance(e, (AccountLocked, LoginRejected))]


def test_version_picks_the_endpoint_and_faults_fire_in_order(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.fail_next(error=500, version="v1")
    mgmt_server.fail_next(error=504)
    form = {"username": mgmt_account.username, "password": mgmt_account.password}
    assert _auth(http, mgmt_server, mgmt_account).status_code == 504  # the v1 one waits
    assert http.post(f"{mgmt_server.url}/v1/login", data=form).status_code == 500
    assert _auth(http, mgmt_server, mgmt_account).status_code == 200
    assert [e.path for e in _faults(mgmt_server)] == ["/v2/auth", "/v1/login"]


# -- hangs -------------------------------------------------------------------------------


def test_a_hang_on_the_real_clock_trips_the_client_timeout_and_the_retry_succeeds(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.hang_next(seconds=60)  # released when the test ends
    with pytest.raises(requests.ReadTimeout):
        _auth(http, mgmt_server, mgmt_account, timeout=0.2)
    answer = _auth(http, mgmt_server, mgmt_account, timeout=5)
    assert answer.status_code == 200
    (fault,) = _faults(mgmt_server)
    assert (fault.fault, fault.detail) == ("hang", "hang 60 s on the real clock")


def test_a_hang_on_the_simulated_clock_answers_once_the_clock_has_moved_on(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.hang_next(seconds=45, clock="simulated")
    start = mgmt_clock.now()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_auth, http, mgmt_server, mgmt_account, timeout=10)
        mgmt_server.wait(until=_fault_fired, timeout=10)  # the auth call arrived, is held
        mgmt_clock.advance(seconds=30)
        time.sleep(0.05)
        assert not pending.done()  # 30 of 45 s: still held
        mgmt_clock.advance(seconds=15)
        answer = pending.result(timeout=10)
    assert answer.status_code == 200
    (issued,) = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert (issued.at - start).total_seconds() == 45  # the token was issued after the hang


# -- connection resets -------------------------------------------------------------------


def test_a_reset_connection_is_a_connection_error_and_a_retry_succeeds(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.drop_connection_next(version="v2")
    with pytest.raises(requests.ConnectionError, match="reset by peer"):
        _auth(http, mgmt_server, mgmt_account)
    assert _auth(http, mgmt_server, mgmt_account).status_code == 200
    (fault,) = _faults(mgmt_server)
    assert fault.detail == "connection reset, no answer"


def test_reset_next_is_a_deprecated_alias_of_drop_connection_next(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    with pytest.warns(DeprecationWarning, match=r"use mgmt_server.drop_connection_next\(\)"):
        mgmt_server.reset_next(version="v2")
    with pytest.raises(requests.ConnectionError, match="reset by peer"):
        _auth(http, mgmt_server, mgmt_account)
    (fault,) = _faults(mgmt_server)
    assert fault.fault == "reset"


def test_credential_assertions_and_their_token_aliases_are_one(mgmt_server: MgmtServer) -> None:
    assert MgmtServer.assert_token_reused is MgmtServer.assert_credential_reused
    assert MgmtServer.assert_no_expired_token_used is MgmtServer.assert_no_expired_credential_used
    mgmt_server.assert_credential_reused()
    mgmt_server.assert_no_expired_credential_used()


def test_urllib3_retries_recover_from_resets_of_a_post(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.drop_connection_next(2)
    # POST is not retried on read errors unless allowed_methods says so.
    retry = Retry(total=3, allowed_methods=None, backoff_factor=0)
    answer = _auth(_with_retries(http, retry), mgmt_server, mgmt_account)
    assert answer.status_code == 200
    assert answer.raw.retries is not None
    assert len(answer.raw.retries.history) == 2
    assert mgmt_server.auth_count() == 1


def test_httpx_sees_a_reset_login_as_a_transport_error(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.drop_connection_next(version="v1")
    form = {"username": mgmt_account.username, "password": mgmt_account.password}
    with httpx.Client(base_url=mgmt_server.url, trust_env=False) as client:
        with pytest.raises(httpx.TransportError):
            client.post("/v1/login", data=form)
        assert client.post("/v1/login", data=form).status_code == 200


@pytest.mark.mgmtauth(https=True)
def test_a_reset_over_https(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    mgmt_server.drop_connection_next()
    with requests.Session() as http:
        http.trust_env = False
        with pytest.raises(requests.ConnectionError):
            _auth(http, mgmt_server, mgmt_account, verify=mgmt_server.ca_bundle)
        answer = _auth(http, mgmt_server, mgmt_account, verify=mgmt_server.ca_bundle)
    assert answer.status_code == 200


# -- malformed JSON ----------------------------------------------------------------------


def test_malformed_json_fails_to_decode_and_the_client_asks_again(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.malformed_next()
    broken = _auth(http, mgmt_server, mgmt_account)
    assert broken.status_code == 200
    assert broken.headers["Content-Type"] == "application/json"
    with pytest.raises(requests.JSONDecodeError):
        broken.json()
    token = _auth(http, mgmt_server, mgmt_account).json()["token"]
    assert token.count(".") == 2
    assert mgmt_server.auth_count() == 1  # the malformed answer granted nothing
    mgmt_server.assert_token_reused()


def test_malformed_login_answer(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.malformed_next(version="v1")
    form = {"username": mgmt_account.username, "password": mgmt_account.password}
    broken = http.post(f"{mgmt_server.url}/v1/login", data=form)
    with pytest.raises(requests.JSONDecodeError):
        broken.json()
    assert "JSESSIONID" not in broken.headers.get("Set-Cookie", "")
    assert "utk" in http.post(f"{mgmt_server.url}/v1/login", data=form).json()


# -- bookkeeping -------------------------------------------------------------------------


def test_pending_and_cleared_faults(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    mgmt_server.fail_next(3, error=500)
    mgmt_server.malformed_next(version="v1")
    assert [(f.kind, f.count, f.version) for f in mgmt_server.pending_faults] == [
        ("fail", 3, None),
        ("malformed", 1, "v1"),
    ]
    mgmt_server.clear_faults()
    assert mgmt_server.pending_faults == []


def test_bad_fault_arguments_fail_in_the_test(mgmt_server: MgmtServer) -> None:
    with pytest.raises(ValueError, match=r"HTTP error status \(400-599\) or a service error"):
        mgmt_server.fail_next(error=302)
    with pytest.raises(ValueError, match="clock must be 'real' or 'simulated'"):
        mgmt_server.hang_next(seconds=1, clock="monotonic")
