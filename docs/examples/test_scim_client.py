"""A SCIM provisioning client's long-lived token, as the SCIM API's page publishes it:
``POST https://developer.tealiumapis.com/v2/auth-long-lived/token`` once, the token on
every SCIM call with ``X-Tealium-Account``, and ``/v2/auth-long-lived/revoke`` when the
integration is retired."""

from __future__ import annotations

import requests

from pytest_mgmtauth import Account, MgmtClock, MgmtServer


# --8<-- [start:token]
def long_lived_token(base_url: str, account: Account) -> str:
    form = {
        "account": "acme",
        "profile": "main",
        "username": account.username,
        "key": account.api_key,
    }
    answer = requests.post(f"{base_url}/v2/auth-long-lived/token", data=form, timeout=10)
    answer.raise_for_status()
    token: str = answer.json()["access_token"]  # 90 days: keep it
    return token


def test_a_scim_client_keeps_its_token_for_90_days(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    mgmt_server.route("GET", "/scim/v2/Users").respond_with_json({"Resources": []})
    token = long_lived_token(mgmt_server.url, mgmt_account)
    headers = {"Authorization": f"Bearer {token}", "X-Tealium-Account": "acme"}

    mgmt_clock.advance(seconds=89 * 24 * 3600)
    users = requests.get(f"{mgmt_server.url}/scim/v2/Users", headers=headers, timeout=10)

    assert users.status_code == 200
    mgmt_server.assert_auth_count(1, version="scim")


# --8<-- [end:token]


# --8<-- [start:errors]
def test_the_pages_error_bodies(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    mgmt_server.route("GET", "/scim/v2/Groups").respond_with_json({"Resources": []})
    mgmt_server.expect_refusals()
    token = long_lived_token(mgmt_server.url, mgmt_account)
    url = f"{mgmt_server.url}/scim/v2/Groups"

    no_header = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    wrong = requests.get(url, headers={"Authorization": "Bearer x", "X-Tealium-Account": "acme"})

    assert no_header.status_code == 403
    assert no_header.json()["detail"] == "Missing X-Tealium-Account header."
    assert wrong.json() == {"returnCode": 1401, "message": "Authentication failed."}
    assert "no X-Tealium-Account header" in no_header.headers["X-Mgmtauth-Diagnosis"]


# --8<-- [end:errors]


# --8<-- [start:revoke]
def test_revoking_the_token(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    token = long_lived_token(mgmt_server.url, mgmt_account)
    form = {"account": "acme", "profile": "main", "username": mgmt_account.username}
    form |= {"key": mgmt_account.api_key, "token": token}

    revoked = requests.post(f"{mgmt_server.url}/v2/auth-long-lived/revoke", data=form, timeout=10)
    again = requests.post(f"{mgmt_server.url}/v2/auth-long-lived/revoke", data=form, timeout=10)

    assert (revoked.status_code, revoked.text) == (200, "")
    assert (again.status_code, again.text) == (200, "")  # already invalid: 200 all the same
    assert "token T1 revoked by POST /v2/auth-long-lived/revoke" in mgmt_server.timeline()


# --8<-- [end:revoke]
