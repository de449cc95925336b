"""A suite of varied client tests as a user would mark them live: v1, v2, v3, OAuth,
lifecycle headers, refusals. Copied into a run's folder as ``test_scenarios.py`` (so the
project's own run never collects it) and run twice: live against a stand-in, recording,
then against the fake, checking the recording. ``refused`` tests stop a live run, so each
runs live on its own (``-k``)."""

from __future__ import annotations

from urllib.parse import quote_plus

import pytest
import requests

from pytest_mgmtauth import Account, MgmtServer, OAuthClient, Profile

pytestmark = pytest.mark.mgmtauth_live

V2_ROUTE = "/v2/things"
V1_ROUTE = "/urest/things"
OAUTH_VERSION = "2026-07"


def v2_token(mgmt_server: MgmtServer, http: requests.Session, account: Account) -> str:
    answer = http.post(
        mgmt_server.url + "/v2/auth", data={"username": account.username, "key": account.api_key}
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["token"]
    return token


def v3_auth(
    mgmt_server: MgmtServer, http: requests.Session, account: Account, profile: Profile
) -> dict[str, str]:
    answer = http.post(
        mgmt_server.url + f"/v3/auth/accounts/{profile.account}/profiles/{profile.profile}",
        data={"username": account.username, "key": account.api_key},
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, str] = answer.json()
    return body


def basic(client: OAuthClient, secret: str | None = None) -> tuple[str, str]:
    """HTTP Basic credentials as RFC 6749 2.3.1 has them: each part form-encoded."""
    return quote_plus(client.client_id), quote_plus(secret or client.client_secret)


def oauth_token(mgmt_server: MgmtServer, http: requests.Session, client: OAuthClient) -> str:
    answer = http.post(
        mgmt_server.url + "/oauth/token",
        data={"grant_type": "client_credentials", "scope": client.scopes[0]},
        auth=basic(client),
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["access_token"]
    return token


def oauth_path(profile: Profile, version: str = OAUTH_VERSION, name: str | None = None) -> str:
    return f"/v{version}/tiq/accounts/{profile.account}/profiles/{name or profile.profile}/profiles"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- v2 -------------------------------------------------------------------------------


def test_v2_token_then_a_call(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.route("GET", V2_ROUTE).respond_with_json({"ok": True})
    token = v2_token(mgmt_server, http, mgmt_account)
    assert http.get(mgmt_server.url + V2_ROUTE, headers=bearer(token)).status_code == 200


def test_v2_one_token_for_three_calls(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.route("GET", V2_ROUTE).respond_with_json({"ok": True})
    token = v2_token(mgmt_server, http, mgmt_account)
    for _ in range(3):
        assert http.get(mgmt_server.url + V2_ROUTE, headers=bearer(token)).status_code == 200


def test_v2_token_alone(mgmt_server, mgmt_account, http) -> None:
    assert v2_token(mgmt_server, http, mgmt_account).count(".") == 2


def test_v2_token_as_json_body(mgmt_server, mgmt_account, http) -> None:
    answer = http.post(
        mgmt_server.url + "/v2/auth",
        json={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert answer.status_code >= 400


def test_v2_call_without_a_token(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.route("GET", V2_ROUTE).respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    assert http.get(mgmt_server.url + V2_ROUTE).status_code == 401


def test_v2_call_with_a_made_up_token(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.route("GET", V2_ROUTE).respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    answer = http.get(mgmt_server.url + V2_ROUTE, headers=bearer("not.a.token"))
    assert answer.status_code == 401


def test_v2_call_with_the_key_as_basic_credentials(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.route("GET", V2_ROUTE).respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    answer = http.get(
        mgmt_server.url + V2_ROUTE, auth=(mgmt_account.username, mgmt_account.api_key)
    )
    assert answer.status_code == 401


def test_v2_auth_with_get(mgmt_server, mgmt_account, http) -> None:
    assert http.get(mgmt_server.url + "/v2/auth").status_code in (404, 405)


def test_v2_auth_without_the_key(mgmt_server, mgmt_account, http) -> None:
    answer = http.post(mgmt_server.url + "/v2/auth", data={"username": mgmt_account.username})
    assert answer.status_code >= 400


def test_v2_a_route_nobody_declared(mgmt_server, mgmt_account, http) -> None:
    token = v2_token(mgmt_server, http, mgmt_account)
    answer = http.get(mgmt_server.url + "/v2/nothing-here", headers=bearer(token))
    assert answer.status_code == 404


def test_v2_without_permission_is_1469(mgmt_server, no_permission, http) -> None:
    mgmt_server.route("POST", "/v2/publish", permission="publish").respond_with_json({})
    mgmt_server.expect_refusals()
    token = v2_token(mgmt_server, http, no_permission)
    answer = http.post(mgmt_server.url + "/v2/publish", headers=bearer(token))
    assert answer.json()["returnCode"] == 1469


# -- v1 -------------------------------------------------------------------------------


def v1_login(mgmt_server: MgmtServer, http: requests.Session, account: Account) -> str:
    answer = http.post(
        mgmt_server.url + "/v1/login",
        data={"username": account.username, "password": account.password},
    )
    assert answer.status_code == 200, answer.text
    utk: str = answer.json()["utk"]
    return utk


def test_v1_login_a_call_and_logout(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.route("GET", V1_ROUTE, auth="v1").respond_with_json({"ok": True})
    utk = v1_login(mgmt_server, http, mgmt_account)
    cookie = {"Cookie": f"JSESSIONID={http.cookies.get('JSESSIONID', path='/urest_service')}"}
    answer = http.get(mgmt_server.url + V1_ROUTE, params={"utk": utk}, headers=cookie)
    assert answer.status_code in (200, 401)
    assert http.post(mgmt_server.url + "/v1/logout", headers=cookie).status_code == 200


def test_v1_login_alone(mgmt_server, mgmt_account, http) -> None:
    assert v1_login(mgmt_server, http, mgmt_account)


def test_v1_call_without_a_session(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.route("GET", V1_ROUTE, auth="v1").respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    assert http.get(mgmt_server.url + V1_ROUTE).status_code in (401, 403)


def test_v1_logout_without_a_session(mgmt_server, mgmt_account, http) -> None:
    assert http.post(mgmt_server.url + "/v1/logout").status_code >= 200


def test_v1_login_with_the_key_as_password(mgmt_server, mgmt_account, http) -> None:
    # Not the password, but not a refusal of the run's credentials either: no form field.
    answer = http.post(mgmt_server.url + "/v1/login", data={"username": mgmt_account.username})
    assert answer.status_code >= 400


def test_v1_without_permission_is_1469(mgmt_server, no_permission, http) -> None:
    mgmt_server.route("POST", "/urest/publish", auth="v1", permission="publish").respond_with_json(
        {}
    )
    mgmt_server.expect_refusals()
    utk = v1_login(mgmt_server, http, no_permission)
    cookie = {"Cookie": f"JSESSIONID={http.cookies.get('JSESSIONID', path='/urest_service')}"}
    answer = http.post(mgmt_server.url + "/urest/publish", params={"utk": utk}, headers=cookie)
    assert answer.status_code in (401, 403)


# -- v3 -------------------------------------------------------------------------------


def v3_route(profile: Profile, name: str | None = None) -> str:
    return f"/v3/things/accounts/{profile.account}/profiles/{name or profile.profile}"


def test_v3_token_then_a_call_at_its_host(mgmt_server, mgmt_account, mgmt_profile, http) -> None:
    mgmt_server.route("GET", v3_route(mgmt_profile)).respond_with_json({"ok": True})
    body = v3_auth(mgmt_server, http, mgmt_account, mgmt_profile)
    answer = http.get(
        f"{mgmt_server.url.split('://')[0]}://{body['host']}{v3_route(mgmt_profile)}",
        headers=bearer(body["token"]),
        verify=mgmt_server.ca_bundle or True,
    )
    assert answer.status_code == 200


def test_v3_auth_alone(mgmt_server, mgmt_account, mgmt_profile, http) -> None:
    assert set(v3_auth(mgmt_server, http, mgmt_account, mgmt_profile)) >= {"token", "host"}


def test_v3_call_without_a_token(mgmt_server, mgmt_account, mgmt_profile, http) -> None:
    mgmt_server.route("GET", v3_route(mgmt_profile)).respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    url = mgmt_server.region_url + v3_route(mgmt_profile)
    assert http.get(url, verify=mgmt_server.ca_bundle or True).status_code == 401


def test_v3_token_of_one_profile_for_another(mgmt_server, mgmt_account, mgmt_profile, http) -> None:
    other = v3_route(mgmt_profile, "other-profile")
    mgmt_server.route("GET", other).respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    body = v3_auth(mgmt_server, http, mgmt_account, mgmt_profile)
    answer = http.get(mgmt_server.region_url + other, headers=bearer(body["token"]))
    assert answer.status_code in (401, 403)


def test_v3_auth_path_without_a_profile(mgmt_server, mgmt_account, mgmt_profile, http) -> None:
    answer = http.post(
        mgmt_server.url + f"/v3/auth/accounts/{mgmt_profile.account}",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert answer.status_code == 404


def test_v3_call_at_the_auth_host(mgmt_server, mgmt_account, mgmt_profile, http) -> None:
    mgmt_server.route("GET", v3_route(mgmt_profile)).respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    body = v3_auth(mgmt_server, http, mgmt_account, mgmt_profile)
    answer = http.get(mgmt_server.url + v3_route(mgmt_profile), headers=bearer(body["token"]))
    assert answer.status_code >= 400


def test_v2_token_and_v3_token_in_one_test(mgmt_server, mgmt_account, mgmt_profile, http) -> None:
    v2_token(mgmt_server, http, mgmt_account)
    v3_auth(mgmt_server, http, mgmt_account, mgmt_profile)


# -- OAuth ----------------------------------------------------------------------------


def test_oauth_token_with_basic_credentials(mgmt_server, mgmt_oauth_client, http) -> None:
    assert oauth_token(mgmt_server, http, mgmt_oauth_client)


def test_oauth_token_with_credentials_in_the_body(mgmt_server, mgmt_oauth_client, http) -> None:
    answer = http.post(
        mgmt_server.url + "/oauth/token",
        data={
            "grant_type": "client_credentials",
            "client_id": mgmt_oauth_client.client_id,
            "client_secret": mgmt_oauth_client.client_secret,
            "scope": mgmt_oauth_client.scopes[0],
        },
    )
    assert answer.status_code == 200


def test_oauth_token_then_a_call(mgmt_server, mgmt_oauth_client, mgmt_profile, http) -> None:
    path = oauth_path(mgmt_profile)
    mgmt_server.route("GET", path, auth="oauth").respond_with_json({"ok": True})
    token = oauth_token(mgmt_server, http, mgmt_oauth_client)
    assert http.get(mgmt_server.url + path, headers=bearer(token)).status_code == 200


def test_oauth_call_for_another_profile_is_403(
    mgmt_server, mgmt_oauth_client, mgmt_profile, http
) -> None:
    path = oauth_path(mgmt_profile, name="other-profile")
    mgmt_server.route("GET", path, auth="oauth").respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    token = oauth_token(mgmt_server, http, mgmt_oauth_client)
    assert http.get(mgmt_server.url + path, headers=bearer(token)).status_code == 403


def test_oauth_call_without_a_token(mgmt_server, mgmt_oauth_client, mgmt_profile, http) -> None:
    path = oauth_path(mgmt_profile)
    mgmt_server.route("GET", path, auth="oauth").respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    assert http.get(mgmt_server.url + path).status_code == 401


def test_oauth_token_without_a_grant_type(mgmt_server, mgmt_oauth_client, http) -> None:
    answer = http.post(
        mgmt_server.url + "/oauth/token",
        auth=basic(mgmt_oauth_client),
    )
    assert answer.status_code == 400


def test_oauth_token_for_a_scope_not_granted(mgmt_server, mgmt_oauth_client, http) -> None:
    answer = http.post(
        mgmt_server.url + "/oauth/token",
        data={"grant_type": "client_credentials", "scope": "elsewhere:main:tiq:2026-07:x:read"},
        auth=basic(mgmt_oauth_client),
    )
    assert answer.status_code == 400


def test_oauth_call_to_a_version_past_active(
    mgmt_server, mgmt_oauth_client, mgmt_profile, http
) -> None:
    path = oauth_path(mgmt_profile, version="2024-06")
    mgmt_server.route("GET", path, auth="oauth").respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    token = oauth_token(mgmt_server, http, mgmt_oauth_client)
    answer = http.get(mgmt_server.url + path, headers=bearer(token))
    assert "Sunset" in answer.headers or answer.status_code == 410


# -- through the proxy (intercept) -------------------------------------------------------


@pytest.mark.mgmtauth(intercept=True)
def test_intercepted_v2_client(mgmt_server, mgmt_account) -> None:
    mgmt_server.route("GET", V2_ROUTE).respond_with_json({"ok": True})
    http = requests.Session()  # trust_env: the fake's proxy and CA, as set for the test
    answer = http.post(
        "https://api.tealiumiq.com/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert answer.status_code == 200
    call = http.get("https://api.tealiumiq.com" + V2_ROUTE, headers=bearer(answer.json()["token"]))
    assert call.status_code == 200


@pytest.mark.mgmtauth(intercept=True)
def test_intercepted_v3_client(mgmt_server, mgmt_account, mgmt_profile) -> None:
    mgmt_server.route("GET", v3_route(mgmt_profile)).respond_with_json({"ok": True})
    http = requests.Session()
    answer = http.post(
        f"https://platform.tealiumapis.com/v3/auth/accounts/{mgmt_profile.account}"
        f"/profiles/{mgmt_profile.profile}",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert answer.status_code == 200
    body = answer.json()
    call = http.get(
        f"https://{body['host']}{v3_route(mgmt_profile)}", headers=bearer(body["token"])
    )
    assert call.status_code == 200


# -- refusals of the run's credentials (each stops a live run: run alone) ----------------


@pytest.mark.refused
def test_refused_wrong_key_is_1401(mgmt_server, mgmt_account, http) -> None:
    mgmt_server.expect_refusals()
    answer = http.post(
        mgmt_server.url + "/v2/auth", data={"username": mgmt_account.username, "key": "wrong"}
    )
    assert answer.json()["returnCode"] == 1401


@pytest.mark.refused
def test_refused_locked_account_is_1402(mgmt_server, locked, http) -> None:
    mgmt_server.expect_refusals()
    answer = http.post(
        mgmt_server.url + "/v1/login",
        data={"username": locked.username, "password": locked.password},
    )
    assert answer.json()["returnCode"] == 1402


@pytest.mark.refused
def test_refused_wrong_client_secret(mgmt_server, mgmt_oauth_client, http) -> None:
    mgmt_server.expect_refusals()
    answer = http.post(
        mgmt_server.url + "/oauth/token",
        data={"grant_type": "client_credentials", "scope": mgmt_oauth_client.scopes[0]},
        auth=basic(mgmt_oauth_client, "wrong"),
    )
    assert answer.json()["error"] == "invalid_client"


@pytest.mark.throttled
def test_throttled_seventh_token_is_429(mgmt_server, mgmt_account, http) -> None:
    answers = [
        http.post(
            mgmt_server.url + "/v2/auth",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        ).status_code
        for _ in range(7)
    ]
    assert 429 in answers
