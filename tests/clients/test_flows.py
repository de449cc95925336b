"""The v2 and v1 flows with every client, over HTTP and HTTPS.

Each test is what an application's client does against the real service: authenticate,
call a protected operation, meet expiry on the simulated clock, authenticate again, and
(v1) log out. The assertions are on what the client received and on the fake's timeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_mgmtauth import (
    ApiCall,
    LoggedIn,
    LoggedOut,
    SessionExpired,
    TokenIssued,
)

if TYPE_CHECKING:
    from clients_support import Client

    from pytest_mgmtauth import Account, MgmtClock, MgmtServer

DEVICES = {"devices": [{"id": 1, "name": "fw-edge-1"}]}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_v2_auth_call_expiry_and_reauth(
    client: Client, mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    mgmt_server.route("GET", "/api/devices").respond_with_json(DEVICES)
    credentials = {"username": mgmt_account.username, "key": mgmt_account.api_key}
    url = mgmt_server.url

    auth = client.post_form(f"{url}/v2/auth", credentials)
    assert auth.status == 200, auth.body
    token = auth.json()["token"]
    assert len(token) > 800
    assert client.get(f"{url}/api/devices", headers=bearer(token)).json() == DEVICES

    # The token is valid for 30 minutes on the simulated clock; at 30:00 it is expired.
    mgmt_clock.advance(minutes=29, seconds=59)
    assert client.get(f"{url}/api/devices", headers=bearer(token)).status == 200
    mgmt_clock.advance(seconds=1)
    expired = client.get(f"{url}/api/devices", headers=bearer(token))
    assert expired.status == 401
    assert expired.json()["returnCode"] == 1401
    assert "expired" in expired.json()["message"]

    again = client.post_form(f"{url}/v2/auth", credentials)
    assert again.status == 200
    new_token = again.json()["token"]
    assert new_token != token
    assert client.get(f"{url}/api/devices", headers=bearer(new_token)).json() == DEVICES

    timeline = [
        (type(e).__name__, getattr(e, "status", None), getattr(e, "credential", None))
        for e in mgmt_server.events
    ]
    assert timeline == [
        ("TokenIssued", None, None),
        ("ApiCall", 200, "T1"),
        ("ApiCall", 200, "T1"),
        ("ApiCall", 401, "T1"),
        ("TokenIssued", None, None),
        ("ApiCall", 200, "T2"),
    ]
    issued = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    # Re-authenticating after the service refused the expired token is not churn.
    assert [e.premature for e in issued] == [False, False]
    assert mgmt_server.auth_count(version="v2") == 2


def test_v1_login_call_expiry_relogin_and_logout(
    client: Client, mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    mgmt_server.route("GET", "/v1/devices").respond_with_json(DEVICES)
    credentials = {"username": mgmt_account.username, "password": mgmt_account.password}
    url = mgmt_server.url

    def call(session_id: str, utk: str) -> int:
        reply = client.get(
            f"{url}/v1/devices", params={"utk": utk}, headers={"Cookie": f"JSESSIONID={session_id}"}
        )
        if reply.status == 200:
            assert reply.json() == DEVICES
        else:
            assert reply.json()["returnCode"] == 1401
        return int(reply.status)

    login = client.post_form(f"{url}/v1/login", credentials)
    assert login.status == 200, login.body
    session_id, utk = login.jsessionid(), login.json()["utk"]
    assert call(session_id, utk) == 200

    # The session ends after 30 minutes idle (session_timeout) on the simulated clock.
    mgmt_clock.advance(minutes=30)
    assert call(session_id, utk) == 401

    login = client.post_form(f"{url}/v1/login", credentials)
    assert login.status == 200
    new_session, new_utk = login.jsessionid(), login.json()["utk"]
    assert new_session != session_id
    assert call(new_session, new_utk) == 200

    logout = client.post_form(
        f"{url}/v1/logout",
        {},
        headers={
            "Cookie": f"JSESSIONID={new_session}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert logout.status == 200, logout.body
    assert call(new_session, new_utk) == 401

    kinds = [type(e) for e in mgmt_server.events]
    assert kinds == [
        LoggedIn,
        ApiCall,
        SessionExpired,
        ApiCall,
        LoggedIn,
        ApiCall,
        LoggedOut,
        ApiCall,
    ]
    assert mgmt_server.auth_count(version="v1") == 2


def test_session_cookie_comes_back_from_the_jar_only_over_https_and_only_under_its_path(
    client: Client, scheme: str, mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    """The jar keeps JSESSIONID (Secure, Path=/urest_service): it sends it back to
    /urest_service/... over HTTPS only, and never to /v1/..., whatever the scheme."""
    mgmt_server.route("GET", "/urest_service/v1/devices", auth="v1").respond_with_json(DEVICES)
    mgmt_server.route("GET", "/v1/devices").respond_with_json(DEVICES)
    url = mgmt_server.url
    login = client.post_form(
        f"{url}/v1/login",
        {"username": mgmt_account.username, "password": mgmt_account.password},
    )
    assert login.status == 200
    assert "JSESSIONID" in client.cookie_names()
    utk = {"utk": login.json()["utk"]}

    under_path = client.get(f"{url}/urest_service/v1/devices", params=utk)
    elsewhere = client.get(f"{url}/v1/devices", params=utk)

    assert under_path.status == (200 if scheme == "https" else 401)
    assert elsewhere.status == 401
    assert "no JSESSIONID cookie was sent" in elsewhere.json()["message"]
    calls = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert [(c.path, c.credential) for c in calls] == [
        ("/urest_service/v1/devices", "S1" if scheme == "https" else None),
        ("/v1/devices", None),
    ]


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_wrong_secret_is_refused_with_1401_in_the_service_shape(
    client: Client, mgmt_server: MgmtServer, mgmt_account: Account, version: str
) -> None:
    path, field, secret = (
        ("/v2/auth", "key", mgmt_account.api_key)
        if version == "v2"
        else ("/v1/login", "password", mgmt_account.password)
    )
    reply = client.post_form(
        f"{mgmt_server.url}{path}", {"username": mgmt_account.username, field: secret + "x"}
    )
    assert reply.status == 401
    assert reply.header("Content-Type") == "application/json"
    body = reply.json()
    assert body["returnCode"] == 1401
    assert body["message"].startswith("Authentication failed")
    assert secret not in reply.body.decode()
