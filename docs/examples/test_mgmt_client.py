"""Tests of ``mgmt_client.py`` against the fake service: what a team would write for its
own client. Each test is about one production bug the fake makes visible."""

from __future__ import annotations

import json

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from mgmt_client import (
    AuthenticationFailed,
    LockedOut,
    MgmtClient,
    MgmtSessionClient,
    PermissionDenied,
)
from werkzeug import Response

from pytest_mgmtauth import (
    AccountLocked,
    ApiCall,
    AuthRejected,
    LoggedIn,
    LoggedOut,
    SessionExpired,
    TokenIssued,
)

DEVICES = [{"id": 7, "name": "edge-router-7"}]


def api_calls(mgmt_server):
    return [e for e in mgmt_server.events if isinstance(e, ApiCall)]


# --8<-- [start:reuse]
def test_one_token_serves_many_calls(mgmt_server, mgmt_account):
    devices = mgmt_server.route("GET", "/v2/devices")
    devices.respond_with_json(DEVICES)

    with MgmtClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key) as client:
        for _ in range(25):
            assert client.get("/v2/devices") == DEVICES

    assert mgmt_server.auth_count(version="v2") == 1
    assert devices.call_count == 25
    # Every call presented the first token (T1) and was answered by the route.
    assert {(e.credential, e.status) for e in api_calls(mgmt_server)} == {("T1", 200)}
    mgmt_server.assert_token_reused()  # on failure: the account's credential timeline


def test_clients_sharing_a_token_cache_share_one_token(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json(DEVICES)
    cache: dict[str, str] = {}

    for _ in range(3):  # three short-lived clients, e.g. three CLI invocations
        with MgmtClient(
            mgmt_server.url, mgmt_account.username, mgmt_account.api_key, token_cache=cache
        ) as client:
            client.get("/v2/devices")

    mgmt_server.assert_auth_count(1)


# --8<-- [end:reuse]


# --8<-- [start:expiry]
def test_token_is_renewed_inside_the_refresh_margin_only(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json(DEVICES)

    with MgmtClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key) as client:
        client.get("/v2/devices")
        mgmt_clock.advance(minutes=28)  # the token has 2 minutes left
        client.get("/v2/devices")
        assert mgmt_server.auth_count() == 1
        mgmt_clock.advance(minutes=1, seconds=30)  # 30 s left: renew before using it
        client.get("/v2/devices")

    issued = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert [e.token for e in issued] == ["T1", "T2"]
    assert not any(e.premature for e in issued)
    # The client never presented an expired token: no call was refused.
    assert [(e.credential, e.status) for e in api_calls(mgmt_server)] == [
        ("T1", 200),
        ("T1", 200),
        ("T2", 200),
    ]
    mgmt_server.assert_no_expired_token_used()
    mgmt_server.assert_token_reused()


def test_a_refused_token_is_replaced_and_the_call_retried_once(mgmt_server, mgmt_account):
    # A token cache restored from disk holds a token of another environment (signed
    # with another key): the service answers 401/1401 and the client recovers.
    mgmt_server.expect_refusals()  # the foreign token is sent on purpose here
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    foreign = jwt.encode(
        {"sub": mgmt_account.username, "iss": "staging", "exp": 4_000_000_000},
        other_key,
        algorithm="RS512",
    )
    mgmt_server.route("GET", "/v2/devices").respond_with_json(DEVICES)

    with MgmtClient(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.api_key,
        token_cache={mgmt_account.username: foreign},
    ) as client:
        assert client.get("/v2/devices") == DEVICES

    refused, answered = api_calls(mgmt_server)
    assert (refused.status, refused.return_code, refused.credential) == (401, 1401, None)
    assert "signature does not verify" in refused.reason
    assert (answered.status, answered.credential) == (200, "T1")
    assert mgmt_server.auth_count() == 1


# --8<-- [end:expiry]


# --8<-- [start:errors]
def test_a_wrong_api_key_is_refused_with_1401(mgmt_server, mgmt_account):
    with (
        MgmtClient(mgmt_server.url, mgmt_account.username, "not-the-api-key") as client,
        pytest.raises(AuthenticationFailed) as refused,
    ):
        client.get("/v2/devices")

    assert (refused.value.status, refused.value.return_code) == (401, 1401)
    assert mgmt_server.auth_count() == 0
    [rejection] = [e for e in mgmt_server.events if isinstance(e, AuthRejected)]
    assert rejection.username == mgmt_account.username


def test_a_key_written_into_the_body_unencoded_is_refused(mgmt_server, mgmt_account):
    # The bug MgmtClient avoids by passing a dict: generated keys contain + & = % /
    body = f"username={mgmt_account.username}&key={mgmt_account.api_key}"
    answer = requests.post(
        f"{mgmt_server.url}/v2/auth",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=10,
    )

    assert answer.status_code == 401
    assert answer.json()["returnCode"] == 1401
    assert "arrived un-encoded" in answer.json()["message"]


def test_missing_permission_is_1469_and_not_a_reason_to_log_in_again(mgmt_server):
    viewer = mgmt_server.add_account("viewer@example.com", permissions=["devices:read"])
    mgmt_server.route("GET", "/v2/devices", permission="devices:read").respond_with_json(DEVICES)
    deletion = mgmt_server.route("DELETE", "/v2/devices/7", permission="devices:write")
    deletion.respond_with_data(status=204)

    with MgmtClient(mgmt_server.url, viewer.username, viewer.api_key) as client:
        assert client.get("/v2/devices") == DEVICES
        with pytest.raises(PermissionDenied) as denied:
            client.request("DELETE", "/v2/devices/7")

    assert (denied.value.status, denied.value.return_code) == (401, 1469)
    assert deletion.call_count == 0  # the fake refused before the route's handler
    assert mgmt_server.auth_count() == 1


# --8<-- [end:errors]


# --8<-- [start:v1]
def test_v1_session_logs_in_once_calls_with_cookie_and_utk_and_logs_out(mgmt_server, mgmt_account):
    seen = []

    def alerts(request):
        seen.append(dict(request.args))
        return Response(json.dumps([]), content_type="application/json")

    mgmt_server.route("GET", "/v1/alerts").respond_with_handler(alerts)

    with MgmtSessionClient(mgmt_server.url, mgmt_account.username, mgmt_account.password) as c:
        for _ in range(3):
            c.get("/v1/alerts", params={"severity": "high"})

    events = mgmt_server.events
    assert [type(e) for e in events] == [LoggedIn, ApiCall, ApiCall, ApiCall, LoggedOut]
    assert {(e.credential, e.status) for e in events if isinstance(e, ApiCall)} == {("S1", 200)}
    assert mgmt_server.auth_count(version="v1") == 1
    # The route saw its own parameter; utk is the fake's business and reached it too.
    assert all(args["severity"] == "high" and args["utk"] for args in seen)
    mgmt_server.assert_logged_out()


def test_a_cookie_jar_alone_never_sends_jsessionid(mgmt_server, mgmt_account):
    # What a naive v1 client does: trust requests' cookie jar. JSESSIONID comes with
    # Path=/urest_service and Secure, so the jar keeps it away from /v1/... paths.
    mgmt_server.expect_refusals()  # else a refused call: a warning, an error when strict
    mgmt_server.route("GET", "/v1/alerts").respond_with_json([])
    with requests.Session() as naive:
        login = naive.post(
            f"{mgmt_server.url}/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
            timeout=10,
        )
        utk = login.json()["utk"]
        answer = naive.get(f"{mgmt_server.url}/v1/alerts", params={"utk": utk}, timeout=10)

    assert answer.status_code == 401
    assert "no JSESSIONID cookie was sent" in answer.json()["message"]


def test_an_idle_session_ends_and_the_client_logs_in_again(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v1/alerts").respond_with_json([])

    with MgmtSessionClient(mgmt_server.url, mgmt_account.username, mgmt_account.password) as c:
        c.get("/v1/alerts")
        mgmt_clock.advance(minutes=31)  # session_timeout: 30 minutes idle
        c.get("/v1/alerts")

    assert [e.session for e in mgmt_server.events if isinstance(e, SessionExpired)] == ["S1"]
    assert [(e.credential, e.status) for e in api_calls(mgmt_server)] == [
        ("S1", 200),
        ("S1", 401),
        ("S2", 200),
    ]
    assert [e.session for e in mgmt_server.events if isinstance(e, LoggedOut)] == ["S2"]
    # The client learns of the timeout from the 401 (it cannot know session_timeout)
    # and logs in again: no expired-credential use, and S1 is no open session.
    mgmt_server.assert_no_expired_token_used()
    mgmt_server.assert_logged_out()


@pytest.mark.mgmtauth(lockout_threshold=3)
def test_wrong_passwords_lock_the_account_for_ten_minutes(mgmt_server, mgmt_account, mgmt_clock):
    with MgmtSessionClient(mgmt_server.url, mgmt_account.username, "wrong") as typo:
        for _ in range(3):  # the third failure is still 1401 and starts the lockout
            with pytest.raises(AuthenticationFailed):
                typo.login()

    with MgmtSessionClient(mgmt_server.url, mgmt_account.username, mgmt_account.password) as c:
        with pytest.raises(LockedOut) as locked:  # even the right password, for now
            c.login()
        assert locked.value.return_code == 1402
        mgmt_clock.advance(minutes=10)
        c.login()
        assert c.logged_in

    [lock] = [e for e in mgmt_server.events if isinstance(e, AccountLocked)]
    assert lock.failures == 3
    assert (lock.until - lock.at).total_seconds() == 600


# --8<-- [end:v1]
