"""How a client copes when the service says no: scripted faults, throttling, rate limits.

``fetch_token`` is what a careful client does at ``/v2/auth``: it retries 5xx answers,
dropped connections, timeouts and malformed JSON a few times, and waits ``Retry-After``
on a 429. The tests script each misbehaviour on ``mgmt_server`` and check the recovery.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3 import BaseHTTPResponse
from urllib3.util.retry import Retry

from pytest_mgmtauth import FaultInjected, MgmtClock, MgmtServer, RateLimited, Throttled

# --8<-- [start:client]
RETRYABLE_STATUS = {429, 500, 502, 503, 504}


def fetch_token(
    http: requests.Session,
    url: str,
    username: str,
    api_key: str,
    *,
    attempts: int = 4,
    timeout: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """A bearer token from ``/v2/auth``, retrying what a retry can fix."""
    for attempt in range(1, attempts + 1):
        try:
            answer = http.post(
                f"{url}/v2/auth",
                data={"username": username, "key": api_key},  # a dict: URL-encoded
                timeout=timeout,
            )
            if answer.status_code in RETRYABLE_STATUS and attempt < attempts:
                sleep(float(answer.headers.get("Retry-After", "1")))
                continue
            answer.raise_for_status()
            token: str = answer.json()["token"]
            return token
        except (requests.ConnectionError, requests.Timeout, requests.JSONDecodeError):
            if attempt == attempts:
                raise
            sleep(1.0)
    raise AssertionError("unreachable")


# --8<-- [end:client]


@pytest.fixture
def http() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # ignore proxy / CA bundle variables of the environment
    return session


# --8<-- [start:faults]
def test_the_client_rides_out_errors_resets_and_malformed_answers(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    account = mgmt_server.add_account()
    mgmt_server.fail_next(error=503)  # one 503
    mgmt_server.drop_connection_next()  # then a dropped connection
    mgmt_server.malformed_next()  # then a 200 with broken JSON
    waits: list[float] = []

    token = fetch_token(
        http, mgmt_server.url, account.username, account.api_key, sleep=waits.append
    )

    assert token.count(".") == 2
    assert waits == [1.0, 1.0, 1.0]  # one pause per fault
    faults = [e.fault for e in mgmt_server.events if isinstance(e, FaultInjected)]
    assert faults == ["fail", "reset", "malformed"]
    mgmt_server.assert_auth_count(1)  # the faults granted nothing


def test_the_client_waits_out_a_hang_with_its_timeout(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    account = mgmt_server.add_account()
    mgmt_server.hang_next(seconds=30)  # real seconds; released when the test ends

    token = fetch_token(
        http, mgmt_server.url, account.username, account.api_key, timeout=0.2, sleep=lambda s: None
    )

    assert token
    mgmt_server.assert_auth_count(1)


# --8<-- [end:faults]


# --8<-- [start:throttle]
@pytest.mark.mgmtauth(throttle=2)
def test_a_client_that_asks_for_a_token_per_call_is_throttled(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    account = mgmt_server.add_account()
    waits: list[float] = []

    def sleep_on_the_simulated_clock(seconds: float) -> None:
        waits.append(seconds)
        mgmt_clock.advance(seconds=seconds)

    for _ in range(4):  # the bug: a new token for every call
        fetch_token(
            http,
            mgmt_server.url,
            account.username,
            account.api_key,
            sleep=sleep_on_the_simulated_clock,
        )

    assert waits == [60.0]  # the 4th call got 429 and waited Retry-After
    throttled = [e for e in mgmt_server.events if isinstance(e, Throttled)]
    assert throttled[0].retry_after == 60
    with pytest.raises(AssertionError, match="premature"):
        mgmt_server.assert_token_reused()


# --8<-- [end:throttle]


# --8<-- [start:on-cue]
def test_a_revoked_token_and_a_rotated_key(mgmt_server: MgmtServer, http: requests.Session) -> None:
    account = mgmt_server.add_account()
    mgmt_server.route("GET", "/v2/things").respond_with_json({"things": []})
    token = fetch_token(http, mgmt_server.url, account.username, account.api_key)

    mgmt_server.revoke(token)  # or by its label: mgmt_server.revoke("T1")
    refused = http.get(f"{mgmt_server.url}/v2/things", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401

    rotated = mgmt_server.rotate_key(account)  # the old key now gets 1401
    with pytest.raises(requests.HTTPError):
        fetch_token(http, mgmt_server.url, account.username, account.api_key)
    assert fetch_token(http, mgmt_server.url, rotated.username, rotated.api_key)
    mgmt_server.assert_token_reused()  # re-authenticating after a refusal is no churn


# --8<-- [end:on-cue]


# --8<-- [start:urllib3-on-clock]
def retry_on_clock(clock: MgmtClock, **options: Any) -> Retry:
    """urllib3's ``Retry`` that waits on the simulated clock: a ``Retry-After`` (or the
    backoff) moves ``mgmt_clock`` on, instead of sleeping in real time while the test's
    time stands still (which the fake would see as a retry 0 s after the 429)."""

    class RetryOnClock(Retry):
        def sleep(self, response: BaseHTTPResponse | None = None) -> None:
            after = None
            if response is not None and self.respect_retry_after_header:
                after = self.get_retry_after(response)
            clock.advance(seconds=after or self.get_backoff_time())

    return RetryOnClock(**options)


def test_urllib3_honours_retry_after_on_mgmt_clock(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    account = mgmt_server.add_account()
    mgmt_server.fail_next(error=429, retry_after=30)  # 30 s: no real wait in this test
    retry = retry_on_clock(mgmt_clock, total=2, status_forcelist=[429], allowed_methods=None)
    http.mount("http://", HTTPAdapter(max_retries=retry))
    http.mount("https://", HTTPAdapter(max_retries=retry))
    form = {"username": account.username, "key": account.api_key}
    answer = http.post(mgmt_server.url_for("/v2/auth"), data=form, timeout=5)
    assert answer.ok
    assert [r.status for r in answer.raw.retries.history] == [429]
    assert not [e for e in mgmt_server.events if isinstance(e, Throttled)]  # waited enough


# --8<-- [end:urllib3-on-clock]


# --8<-- [start:rate-limits]
@pytest.mark.mgmtauth(rate_limits=True)  # the published figures: Visitor Profile 50/s
def test_a_client_that_honours_retry_after_gets_every_lookup_through(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    account = mgmt_server.add_account()
    path = "/v3/customer/visitor/accounts/acme/profiles/main"
    mgmt_server.route("GET", path).respond_with_json({"visitor": {}})
    form = {"username": account.username, "key": account.api_key}
    auth = http.post(mgmt_server.url_for("/v3/auth/accounts/acme/profiles/main"), data=form)
    retry = retry_on_clock(mgmt_clock, total=3, status_forcelist=[429])
    http.mount("http://", HTTPAdapter(max_retries=retry))
    bearer = {"Authorization": f"Bearer {auth.json()['token']}"}
    url = f"http://{auth.json()['host']}{path}"
    lookups = [http.get(url, headers=bearer, timeout=5) for _ in range(120)]
    assert all(answer.ok for answer in lookups)
    limited = [e for e in mgmt_server.events if isinstance(e, RateLimited)]
    assert len(limited) == 2  # the 51st and the 101st lookup: 429, Retry-After 1
    assert all(e.waited is None for e in limited)  # each waited out, none retried at once


# --8<-- [end:rate-limits]
