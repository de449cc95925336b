"""The SCIM API's long-lived token over a real socket (requests, httpx, urllib): the
token and revoke endpoints as the page publishes them, 90 days on the simulated clock,
the per-IP limits, SCIM calls with X-Tealium-Account and both error envelopes exactly,
masking, the earlier page's v1 answer, and interception of developer.tealiumapis.com."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import httpx
import pytest
import requests

from pytest_mgmtauth import Account, ApiCall, MgmtClock, MgmtServer

HOST = "developer.tealiumapis.com"
DAYS_90 = 7_776_000
REFUSED = {"returnCode": 1401, "message": "Authentication failed."}
NO_ACCOUNT = {
    "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"],
    "status": "403",
    "scimType": None,
    "detail": "Missing X-Tealium-Account header.",
}


def token_form(account: Account, **changes: str) -> dict[str, str]:
    form = {
        "account": "acme",
        "profile": "main",
        "username": account.username,
        "key": account.api_key,
    }
    return {**form, **changes}


def get_token(server: MgmtServer, account: Account, **changes: str) -> requests.Response:
    url = server.url_for("/v2/auth-long-lived/token")
    return requests.post(url, data=token_form(account, **changes), timeout=10)


def revoke(server: MgmtServer, account: Account, token: str, **changes: str) -> requests.Response:
    url = server.url_for("/v2/auth-long-lived/revoke")
    form = {"token": token, **token_form(account, **changes), "token_type_hint": "access_token"}
    return requests.post(url, data=form, timeout=10)


def users(server: MgmtServer, token: str | None, account: str | None = "acme") -> requests.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if account is not None:
        headers["X-Tealium-Account"] = account
    return requests.get(server.url_for("/scim/v2/Users"), headers=headers, timeout=10)


@pytest.fixture
def scim_users(mgmt_server: MgmtServer) -> None:
    route = mgmt_server.route("GET", "/scim/v2/Users")
    route.respond_with_json({"Resources": [], "totalResults": 0})
    assert route.auth == "scim"  # by its path


@pytest.mark.usefixtures("scim_users")
def test_the_token_answer_and_a_scim_call(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    answer = get_token(mgmt_server, mgmt_account)

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert list(body) == ["access_token", "token_type", "expires_in", "scope"]
    assert (body["token_type"], body["expires_in"], body["scope"]) == (
        "Bearer",
        DAYS_90,
        "profile email",
    )
    assert users(mgmt_server, body["access_token"]).json() == {"Resources": [], "totalResults": 0}
    [call] = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert (call.version, call.username, call.status) == ("scim", mgmt_account.username, 200)
    assert mgmt_server.auth_count(version="scim") == 1


@pytest.mark.usefixtures("scim_users")
def test_ninety_days_on_the_simulated_clock(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    token = get_token(mgmt_server, mgmt_account).json()["access_token"]
    mgmt_clock.advance(seconds=DAYS_90 - 1)
    assert users(mgmt_server, token).status_code == 200
    mgmt_clock.advance(seconds=1)

    expired = users(mgmt_server, token)

    assert (expired.status_code, expired.json()) == (401, REFUSED)
    assert "expired 0 s ago" in expired.headers["X-Mgmtauth-Diagnosis"]
    assert "expired 0 s ago" in mgmt_server.timeline()
    with pytest.raises(AssertionError, match="presented an expired credential 1 time"):
        mgmt_server.assert_no_expired_credential_used()


def test_churn_counts_against_the_tokens_own_margin_a_sixth_of_ninety_days(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    get_token(mgmt_server, mgmt_account)
    # 75 days in, a day into the last sixth: far outside refresh_margin (300 s).
    mgmt_clock.advance(seconds=DAYS_90 - DAYS_90 // 6 + 86_400)
    get_token(mgmt_server, mgmt_account)
    mgmt_server.assert_credential_reused()  # a renewal near its end, no churn
    get_token(mgmt_server, mgmt_account)  # while the one just got lasts 90 days

    with pytest.raises(AssertionError, match="churn"):
        mgmt_server.assert_credential_reused()


@pytest.mark.usefixtures("scim_users")
def test_refusals_are_the_pages_bodies_exactly(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.expect_refusals()
    token = get_token(mgmt_server, mgmt_account).json()["access_token"]

    made_up = users(mgmt_server, "not-a-token")
    no_token = users(mgmt_server, None)
    no_header = users(mgmt_server, token, account=None)
    other = users(mgmt_server, token, account="globex")

    assert (made_up.status_code, made_up.json()) == (401, REFUSED)
    assert (no_token.status_code, no_token.json()) == (401, REFUSED)
    assert (no_header.status_code, no_header.json()) == (403, NO_ACCOUNT)
    assert other.status_code == 403
    assert other.json()["detail"] == "X-Tealium-Account 'globex' is not the account of the token."
    # One diagnosis header, the service's own (set on every refusal), none of the flow's.
    assert no_header.raw.headers.getlist("X-Mgmtauth-Diagnosis") == [
        "no X-Tealium-Account header: send 'X-Tealium-Account: acme' with every SCIM call"
    ]
    for answer in (made_up, no_token, no_header, other):
        assert "v2" not in json.dumps(answer.json())
    assert "GET /scim/v2/Users with T1 -> 403" in mgmt_server.timeline()


@pytest.mark.usefixtures("scim_users")
def test_revoke_answers_200_empty_and_takes_effect_at_once(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.expect_refusals()
    token = get_token(mgmt_server, mgmt_account).json()["access_token"]

    revoked = revoke(mgmt_server, mgmt_account, token)

    assert (revoked.status_code, revoked.content) == (200, b"")
    assert "Content-Type" not in revoked.headers
    assert users(mgmt_server, token).json() == REFUSED
    assert "was revoked 0 s ago" in users(mgmt_server, token).headers["X-Mgmtauth-Diagnosis"]
    again = revoke(mgmt_server, mgmt_account, token)
    unknown = revoke(mgmt_server, mgmt_account, "not-a-token-at-all")
    assert (again.status_code, again.content) == (200, b"")
    assert (unknown.status_code, unknown.content) == (200, b"")
    assert "token T1 revoked by POST /v2/auth-long-lived/revoke" in mgmt_server.timeline()
    get_token(mgmt_server, mgmt_account)  # a new one after revoking: no churn
    mgmt_server.assert_credential_reused()


def test_revoke_with_other_credentials_is_401(mgmt_server: MgmtServer) -> None:
    mgmt_server.expect_refusals()
    owner = mgmt_server.add_account()
    other = mgmt_server.add_account()
    token = get_token(mgmt_server, owner).json()["access_token"]

    by_other = revoke(mgmt_server, other, token)
    wrong_key = revoke(mgmt_server, owner, token, key="not-the-key")
    other_profile = revoke(mgmt_server, owner, token, profile="dev")

    for refused in (by_other, wrong_key, other_profile):
        assert refused.status_code == 401
        assert refused.json()["returnCode"] == 1401
    assert "made by other credentials" in by_other.json()["message"]
    assert "made by other credentials (acme/main)" in other_profile.json()["message"]
    mgmt_server.route("GET", "/scim/v2/Groups").respond_with_json({"Resources": []})
    groups = requests.get(
        mgmt_server.url_for("/scim/v2/Groups"),
        headers={"Authorization": f"Bearer {token}", "X-Tealium-Account": "acme"},
        timeout=10,
    )
    assert groups.status_code == 200  # still valid


def test_a_token_for_a_profile_the_account_may_not_use_is_401_naming_those_it_may(
    mgmt_server: MgmtServer,
) -> None:
    mgmt_server.expect_refusals()
    limited = mgmt_server.add_account(profiles=["acme/main"])

    refused = get_token(mgmt_server, limited, profile="dev")

    assert refused.status_code == 401
    assert refused.json()["returnCode"] == 1401
    message = refused.json()["message"]
    assert "may not get long-lived SCIM tokens for acme/dev; it may for: acme/main" in message
    assert get_token(mgmt_server, limited).status_code == 200


def test_ten_tokens_a_minute_then_429(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.expect_refusals()
    accounts = [mgmt_server.add_account() for _ in range(11)]  # no churn: one token each
    statuses = [get_token(mgmt_server, account).status_code for account in accounts[:10]]
    assert statuses == [200] * 10

    limited = get_token(mgmt_server, accounts[10])

    assert limited.status_code == 429
    assert limited.json() == {"message": "Too many requests"}
    assert limited.headers["Retry-After"] == "60"
    assert "allows 10 a minute per IP address" in mgmt_server.timeline()
    mgmt_clock.advance(seconds=60)
    assert get_token(mgmt_server, accounts[10]).status_code == 200


def test_twenty_revokes_a_minute_then_429(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.expect_refusals()
    statuses = [revoke(mgmt_server, mgmt_account, "x").status_code for _ in range(20)]
    assert statuses == [200] * 20
    mgmt_clock.advance(seconds=30)
    limited = revoke(mgmt_server, mgmt_account, "x")
    assert (limited.status_code, limited.headers["Retry-After"]) == (429, "30")
    assert get_token(mgmt_server, mgmt_account).status_code == 200  # its own limit


@pytest.mark.usefixtures("scim_users")
def test_the_key_and_the_token_are_masked_everywhere(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.expect_refusals()
    token = get_token(mgmt_server, mgmt_account).json()["access_token"]
    users(mgmt_server, token)
    revoke(mgmt_server, mgmt_account, token)
    users(mgmt_server, token)
    get_token(mgmt_server, mgmt_account, key=mgmt_account.api_key + "x")

    key_as_token = users(mgmt_server, mgmt_account.api_key)  # the key where the token goes

    texts = [mgmt_server.timeline(), repr(mgmt_server.events), str(key_as_token.headers)]
    texts += [repr(r) + str(r.body) + str(dict(r.headers)) for r in mgmt_server.requests]
    for text in texts:
        assert mgmt_account.api_key not in text
        assert token not in text
    assert key_as_token.json() == REFUSED
    assert "key=#" in str(mgmt_server.requests[0].body)


def test_httpx_and_urllib_get_the_same_answers(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    url = mgmt_server.url_for("/v2/auth-long-lived/token")
    with httpx.Client() as http:
        token = http.post(url, data=token_form(mgmt_account)).json()["access_token"]
    data = urllib.parse.urlencode({"token": token, **token_form(mgmt_account)})
    request = urllib.request.Request(
        mgmt_server.url_for("/v2/auth-long-lived/revoke"), data=data.encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert (answer.status, answer.read()) == (200, b"")


@pytest.mark.mgmtauth(scim_token_version="v1")
def test_the_earlier_pages_v1_answer_as_an_option(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    url = mgmt_server.url_for("/v1/auth-long-lived/token")
    answer = requests.post(url, data=token_form(mgmt_account), timeout=10)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["expires_in"], body["refresh_expires_in"], body["not-before-policy"]) == (
        35999,
        0,
        0,
    )
    assert get_token(mgmt_server, mgmt_account).status_code == 404
    mgmt_server.expect_refusals()


@pytest.mark.mgmtauth(intercept=True)
@pytest.mark.usefixtures("scim_users")
def test_a_client_with_the_published_host_reaches_the_fake(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    with requests.Session() as http:  # the proxy and CA of the test's environment
        answer = http.post(
            f"https://{HOST}/v2/auth-long-lived/token", data=token_form(mgmt_account), timeout=10
        )
        assert answer.status_code == 200, answer.text
        call = http.get(
            f"https://{HOST}/scim/v2/Users",
            headers={
                "Authorization": f"Bearer {answer.json()['access_token']}",
                "X-Tealium-Account": "acme",
            },
            timeout=10,
        )
    assert call.status_code == 200, call.text
    assert HOST in mgmt_server.hosts
