"""POST /v2/auth and v2 calls with the bearer token, over a real socket."""

from __future__ import annotations

import base64
import http.client
import json
import weakref
from collections.abc import Callable
from datetime import timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import urlencode, urlsplit

import pytest
import requests
from wire_support import assert_success_headers

from pytest_mgmtauth import Account, ApiCall, AuthRejected, MgmtClock, MgmtServer, TokenIssued

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
GetToken = Callable[[Account], str]


def _raw_post(server: MgmtServer, path: str, body: str | bytes) -> http.client.HTTPResponse:
    """A POST through http.client, to see the headers exactly as they came."""
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
    connection.request("POST", path, body, FORM)
    response = connection.getresponse()
    weakref.finalize(response, connection.close)  # kept alive: close it with the answer
    return response


def _claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    value: dict[str, object] = json.loads(base64.urlsafe_b64decode(payload + "==="))
    return value


def test_success_answer_has_the_interface_documents_headers(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    body = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key})
    response = _raw_post(mgmt_server, "/v2/auth", body)
    content = response.read()
    assert response.status == 200
    headers = response.headers
    assert_success_headers(headers, content)
    assert json.loads(content).keys() == {"token"}
    # The rememberMe deletion is the only cookie, and it deletes: Max-Age=0, past expiry.
    [cookie] = headers.get_all("Set-Cookie") or []
    attributes = [part.strip() for part in cookie.split(";")]
    assert attributes[0] == "rememberMe=deleteMe"
    assert "Path=/urest_service" in attributes
    assert "Max-Age=0" in attributes
    [expires] = [a for a in attributes if a.startswith("Expires=")]
    expiry = parsedate_to_datetime(expires.removeprefix("Expires=").replace("-", " "))
    # The published answers' expiry: their Date minus 24 hours.
    assert expiry == parsedate_to_datetime(headers["Date"]) - timedelta(hours=24)


def test_token_is_a_long_rs512_jwt_for_the_account(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken
) -> None:
    token = get_token(mgmt_account)
    assert len(token) > 800
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "==="))
    assert header == {"typ": "JWT", "alg": "RS512"}
    # Byte for byte as the real service's tokens begin (the public record): typ first.
    assert token.startswith("eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9.")
    claims = _claims(token)
    assert claims["sub"] == mgmt_account.username
    assert claims["iss"]
    assert claims["nbf"] == claims["iat"]
    assert claims["exp"] == claims["iat"] + 1800  # type: ignore[operator]


@pytest.mark.mgmtauth(token_ttl=120)
def test_token_ttl_option_sets_exp(mgmt_account: Account, get_token: GetToken) -> None:
    claims = _claims(get_token(mgmt_account))
    assert claims["exp"] == claims["iat"] + 120  # type: ignore[operator]


def test_bearer_token_authenticates_later_calls(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/tags").respond_with_json({"tags": ["a"]})
    token = get_token(mgmt_account)
    response = http.get(f"{mgmt_server.url}/api/tags", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.json() == {"tags": ["a"]}
    call = mgmt_server.events[-1]
    assert isinstance(call, ApiCall)
    assert (call.path, call.version, call.credential, call.status) == ("/api/tags", "v2", "T1", 200)


def test_wrong_key_is_401_1401(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    response = http.post(
        f"{mgmt_server.url}/v2/auth", data={"username": mgmt_account.username, "key": "nope"}
    )
    assert response.status_code == 401
    body = response.json()
    assert body["returnCode"] == 1401
    assert body["message"].startswith("Authentication failed")
    assert "nope" not in body["message"]
    assert mgmt_account.api_key not in body["message"]
    assert mgmt_server.auth_count() == 0


def test_unknown_user_is_401_1401(mgmt_server: MgmtServer, http: requests.Session) -> None:
    response = http.post(
        f"{mgmt_server.url}/v2/auth", data={"username": "ghost@example.com", "key": "k"}
    )
    assert response.status_code == 401
    assert response.json()["returnCode"] == 1401
    assert "no account 'ghost@example.com' exists" in response.json()["message"]


def test_client_that_forgets_to_url_encode_the_key_fails_with_the_diagnosis(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    # The classic bug: the key pasted into the body as it is.
    body = f"username={mgmt_account.username}&key={mgmt_account.api_key}"
    response = http.post(f"{mgmt_server.url}/v2/auth", data=body, headers=FORM)
    assert response.status_code == 401
    assert response.json()["returnCode"] == 1401
    message = response.json()["message"]
    assert "the API key arrived un-encoded" in message
    assert "URL-encode the API key in the form body" in message
    [rejected] = [e for e in mgmt_server.events if isinstance(e, AuthRejected)]
    assert rejected.username == mgmt_account.username
    assert "un-encoded" in rejected.reason


def test_client_that_encodes_the_key_twice_fails_with_the_diagnosis(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    once = urlencode({"key": mgmt_account.api_key}).removeprefix("key=")
    response = http.post(
        f"{mgmt_server.url}/v2/auth", data={"username": mgmt_account.username, "key": once}
    )
    assert response.status_code == 401
    assert "the API key arrived URL-encoded twice" in response.json()["message"]


def test_the_same_key_encoded_once_works(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    body = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key})
    response = http.post(f"{mgmt_server.url}/v2/auth", data=body, headers=FORM)
    assert response.status_code == 200
    assert mgmt_server.auth_count(version="v2", username=mgmt_account.username) == 1


def test_token_expires_on_the_simulated_clock(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    get_token: GetToken,
    http: requests.Session,
) -> None:
    route = mgmt_server.route("GET", "/api/tags")
    route.respond_with_json({"ok": True})
    token = get_token(mgmt_account)
    bearer = {"Authorization": f"Bearer {token}"}
    mgmt_clock.advance(minutes=29, seconds=59)
    assert http.get(f"{mgmt_server.url}/api/tags", headers=bearer).status_code == 200
    mgmt_clock.advance(seconds=1)  # exactly 30 minutes: expired, as PyJWT sees it
    response = http.get(f"{mgmt_server.url}/api/tags", headers=bearer)
    assert response.status_code == 401
    assert response.json()["returnCode"] == 1401
    assert "token T1 expired 0 s ago" in response.json()["message"]
    assert route.call_count == 1
    refused = mgmt_server.events[-1]
    assert isinstance(refused, ApiCall)
    assert refused.credential_expired
    assert refused.at == mgmt_clock.now()


def test_events_carry_the_simulated_time(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, get_token: GetToken
) -> None:
    start = mgmt_clock.now()
    get_token(mgmt_account)
    mgmt_clock.advance(hours=1)
    get_token(mgmt_account)
    issued = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert [e.at for e in issued] == [start, mgmt_clock.now()]
    assert issued[0].expires_at == start + timedelta(minutes=30)
    assert [e.username for e in issued] == [mgmt_account.username] * 2


def _forged_token(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = _claims(token)
    claims["exp"] = 4_000_000_000
    raw = json.dumps(claims).encode()
    forged_payload = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert forged_payload != payload
    return f"{header}.{forged_payload}.{signature}"


@pytest.mark.parametrize(
    ("make_header", "expected"),
    [
        (lambda token: None, "no Authorization header"),
        (lambda token: f"Bearer {_forged_token(token)}", "signature does not verify"),
        (lambda token: f"Bearer {token[:-20]}", "token"),
        (lambda token: "Bearer a.b.c", "not a well-formed JWT"),
        (lambda token: f"Basic {token}", "the Authorization scheme is 'Basic'"),
        (lambda token: token, "holds the token without"),
        # Another scheme's own commas are not counted as repeated headers.
        (
            lambda token: "TLM-HMAC username=u, ts=1, sig=abc",
            "the Authorization scheme is 'TLM-HMAC'",
        ),
    ],
    ids=["missing", "forged", "truncated", "garbage", "wrong-scheme", "no-scheme", "hmac"],
)
def test_bad_credentials_get_401_json_never_the_routes_answer(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    get_token: GetToken,
    http: requests.Session,
    make_header: Callable[[str], str | None],
    expected: str,
) -> None:
    route = mgmt_server.route("GET", "/api/secret")
    route.respond_with_json({"secret": "the route's answer"})
    header = make_header(get_token(mgmt_account))
    headers = {"Authorization": header} if header is not None else {}
    response = http.get(f"{mgmt_server.url}/api/secret", headers=headers)
    assert response.status_code == 401
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["returnCode"] == 1401
    assert expected in body["message"]
    assert "the route's answer" not in response.text
    assert route.call_count == 0


def test_token_of_an_earlier_test_is_unknown_here(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    # A token signed by this session's key but issued in another test's state.
    account = mgmt_server.add_account("carry@example.com")
    signer = mgmt_server._service.signer
    token, _ = signer.issue(account.username, int(mgmt_server._service.timeline.now()), 1800)
    mgmt_server.route("GET", "/api/x").respond_with_json({})
    response = http.get(f"{mgmt_server.url}/api/x", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert "not issued in this test" in response.json()["message"]
