"""v3 auth over a real socket: the answer's shape and host, scope refusals, churn per
profile, throttling, expiry on the clock, faults, and the HTTP/HTTPS mix-ups."""

from __future__ import annotations

import base64
import json
import socket
from datetime import timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import urlencode, urlsplit

import pytest
import requests
from werkzeug import Request
from werkzeug.test import EnvironBuilder

from pytest_mgmtauth import (
    Account,
    ApiCall,
    BadRequest,
    FaultInjected,
    MgmtClock,
    MgmtServer,
    TokenIssued,
)
from pytest_mgmtauth._http.hosts import fake_host
from pytest_mgmtauth._service.records import status_code

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _auth(
    server: MgmtServer,
    http: requests.Session,
    account: Account,
    acct: str = "acme",
    profile: str = "main",
    **kw: object,
) -> requests.Response:
    return http.post(
        f"{server.url}/v3/auth/accounts/{acct}/profiles/{profile}",
        data={"username": account.username, "key": account.api_key},
        **kw,  # type: ignore[arg-type]
    )


def _token(server: MgmtServer, http: requests.Session, account: Account, profile: str) -> str:
    response = _auth(server, http, account, profile=profile)
    assert response.status_code == 200, response.text
    token: str = response.json()["token"]
    return token


def _claims(token: str) -> dict[str, object]:
    value: dict[str, object] = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==="))
    return value


def _get(http: requests.Session, url: str, token: str) -> requests.Response:
    return http.get(url, headers={"Authorization": f"Bearer {token}"})


def test_success_is_token_and_host_with_the_documented_headers(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    # On mgmt_clock: the rememberMe deletion's Expires is the answer's second, and the
    # two answers compared below could fall on either side of a second of real time.
    response = _auth(mgmt_server, http, mgmt_account)
    assert response.status_code == 200
    # The success headers of /v2/auth (the interface document's), with its rememberMe
    # deletion, as the published v3 answer shows.
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Cache-Control"] == "no-cache,no-store,must-revalidate"
    assert response.headers["Pragma"] == "no-cache"
    v2 = http.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    cookies = response.raw.headers.getlist("Set-Cookie")
    assert cookies == v2.raw.headers.getlist("Set-Cookie")
    assert len(cookies) == 1
    assert cookies[0].startswith("rememberMe=deleteMe; Path=/urest_service;")
    assert response.headers["Connection"] == "keep-alive"
    body = response.json()
    assert body.keys() == {"token", "host"}
    # The region address, a second address of the fake: never the auth address.
    assert body["host"] == urlsplit(mgmt_server.region_url).netloc
    assert body["host"] != urlsplit(mgmt_server.url).netloc
    header = json.loads(base64.urlsafe_b64decode(body["token"].split(".")[0] + "==="))
    assert header["alg"] == "RS512"
    claims = _claims(body["token"])
    assert claims["sub"] == mgmt_account.username
    assert claims["iss"] == "https://api.tealiumiq.com"
    assert claims["nbf"] == claims["iat"]
    assert claims["exp"] == claims["iat"] + 1800  # type: ignore[operator]


def _read_answer(sock: socket.socket) -> bytes:
    """One answer: its head, then its Content-Length of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":", 1)[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


@pytest.mark.parametrize("close", [False, True], ids=["kept", "client-closes"])
def test_the_v3_answer_says_keep_alive_while_the_connection_is_kept(
    mgmt_server: MgmtServer, mgmt_account: Account, close: bool
) -> None:
    form = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key}).encode()
    request = (
        b"POST /v3/auth/accounts/acme/profiles/main HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        + (b"Connection: close\r\n" if close else b"")
        + b"Content-Length: %d\r\n\r\n%s" % (len(form), form)
    )
    parts = urlsplit(mgmt_server.url)
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=10) as sock:
        sock.sendall(request)
        head = _read_answer(sock)
        assert head.startswith(b"HTTP/1.1 200 ")
        connection = b"close" if close else b"keep-alive"
        assert b"\r\nConnection: " + connection + b"\r\n" in head + b"\r\n"
        assert b"\r\nSet-Cookie: rememberMe=deleteMe; Path=/urest_service;" in head
        if not close:  # the same connection serves the next request
            sock.sendall(request)
            assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")


def test_a_client_that_follows_host_keeps_talking_to_the_fake(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    route = mgmt_server.route("GET", "/v3/customers/accounts/acme/profiles/main/visitors")
    route.respond_with_json({"visitors": []})
    body = _auth(mgmt_server, http, mgmt_account).json()
    answer = _get(
        http,
        f"http://{body['host']}/v3/customers/accounts/acme/profiles/main/visitors",
        body["token"],
    )
    assert answer.status_code == 200
    assert answer.json() == {"visitors": []}
    assert route.call_count == 1
    call = [e for e in mgmt_server.events if isinstance(e, ApiCall)][-1]
    assert (call.version, call.credential, call.status) == ("v3", "T1", 200)


def test_a_call_for_another_profile_is_refused_naming_both(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.expect_refusals()  # wrong tokens on purpose
    mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/dev").respond_with_json({})
    token = _token(mgmt_server, http, mgmt_account, "main")
    answer = _get(http, f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/dev", token)
    assert answer.status_code == 401
    # The published v3 body exactly; the diagnosis in the fake's own header.
    assert answer.json() == {"message": "Unauthorized"}
    diagnosis = answer.headers["X-Mgmtauth-Diagnosis"]
    assert "acme/main" in diagnosis
    assert "acme/dev" in diagnosis


@pytest.mark.mgmtauth(v3_scope="account")
def test_the_v3_scope_option_relaxes_the_binding_to_the_account(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.expect_refusals()  # wrong tokens on purpose
    mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/dev").respond_with_json({})
    mgmt_server.route("GET", "/v3/x/accounts/umbrella/profiles/main").respond_with_json({})
    token = _token(mgmt_server, http, mgmt_account, "main")
    assert _get(http, f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/dev", token).ok
    other = _get(http, f"{mgmt_server.region_url}/v3/x/accounts/umbrella/profiles/main", token)
    assert other.status_code == 401
    assert "umbrella" in other.headers["X-Mgmtauth-Diagnosis"]


def test_v2_token_on_a_v3_route_and_the_reverse_are_refused(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    http: requests.Session,
) -> None:
    mgmt_server.expect_refusals()  # wrong tokens on purpose
    mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/main").respond_with_json({})
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    v2 = http.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    v3 = _token(mgmt_server, http, mgmt_account, "main")
    on_v3 = _get(http, f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/main", v2)
    assert on_v3.status_code == 401
    assert "is a v2 token" in on_v3.headers["X-Mgmtauth-Diagnosis"]
    on_v2 = _get(http, f"{mgmt_server.url}/api/things", v3)
    assert on_v2.status_code == 401
    assert "is a v3 token" in on_v2.json()["message"]


def test_route_auth_v3_outside_v3_paths(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    route = mgmt_server.route("GET", "/platform/accounts/acme/profiles/main", auth="v3")
    route.respond_with_json({})
    assert route.auth == "v3"
    assert mgmt_server.route("GET", "/v3/status").auth == "v3"
    token = _token(mgmt_server, http, mgmt_account, "main")
    assert _get(http, f"{mgmt_server.region_url}/platform/accounts/acme/profiles/main", token).ok


def test_one_token_per_profile_is_no_churn_a_second_for_one_profile_is(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    for profile in ("main", "dev", "qa"):
        _token(mgmt_server, http, mgmt_account, profile)
    mgmt_server.assert_token_reused()
    _token(mgmt_server, http, mgmt_account, "dev")
    with pytest.raises(AssertionError) as failure:
        mgmt_server.assert_token_reused()
    text = str(failure.value)
    assert "T4" in text
    assert "T2 was still valid" in text
    assert "v3 auth for acme/dev" in text
    assert "keep one v3 token per account and profile" in text
    mgmt_server.assert_auth_count(4, version="v3")
    assert mgmt_server.auth_count(version="v2") == 0


@pytest.mark.mgmtauth(throttle=2)
def test_premature_v3_grants_get_429_with_retry_after(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    for _ in range(3):
        _token(mgmt_server, http, mgmt_account, "main")
    throttled = _auth(mgmt_server, http, mgmt_account)
    assert throttled.status_code == 429
    assert int(throttled.headers["Retry-After"]) >= 1
    assert throttled.json()["returnCode"] == 429
    assert "reuse the token" in throttled.json()["message"]
    # The churn is this test's point: take over the teardown check.
    with pytest.raises(AssertionError, match="token churn"):
        mgmt_server.assert_token_reused()


def test_a_v3_token_expires_on_the_clock(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/main").respond_with_json({})
    token = _token(mgmt_server, http, mgmt_account, "main")
    url = f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/main"
    mgmt_clock.advance(timedelta(seconds=1799))
    assert _get(http, url, token).ok
    mgmt_clock.advance(timedelta(seconds=1))
    expired = _get(http, url, token)
    assert expired.status_code == 401
    assert "expired 0 s ago (valid 1800 s from issue)" in expired.headers["X-Mgmtauth-Diagnosis"]
    with pytest.raises(AssertionError, match="presented an expired credential"):
        mgmt_server.assert_no_expired_token_used()
    assert "refresh proactively" in _failure_text(mgmt_server)


def _failure_text(server: MgmtServer) -> str:
    try:
        server.assert_no_expired_token_used()
    except AssertionError as exc:
        return str(exc)
    return ""


def test_date_header_follows_the_fakes_clock(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_clock.advance(timedelta(days=400))
    response = _auth(mgmt_server, http, mgmt_account)
    date = parsedate_to_datetime(response.headers["Date"]).timestamp()
    assert date == int(_claims(response.json()["token"])["iat"])  # type: ignore[call-overload]


@pytest.mark.parametrize("error", [500, 503, 429, 1401])
def test_scripted_failures_hit_v3_auth(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    http: requests.Session,
    error: int,
) -> None:
    mgmt_server.fail_next(error=error, version="v3")
    # A v2 call does not take a v3 fault.
    assert http.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).ok
    failed = _auth(mgmt_server, http, mgmt_account)
    assert failed.status_code == (401 if error == 1401 else error)
    assert failed.json()["returnCode"] == status_code(error)
    [fault] = [e for e in mgmt_server.events if isinstance(e, FaultInjected)]
    assert fault.path == "/v3/auth/accounts/acme/profiles/main"
    assert fault.username == mgmt_account.username
    mgmt_clock.advance(seconds=1)  # the Retry-After of a 429
    assert _auth(mgmt_server, http, mgmt_account).ok


def test_reset_and_malformed_on_cue_hit_v3_auth(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.drop_connection_next(version="v3")
    with pytest.raises(requests.ConnectionError):
        _auth(mgmt_server, http, mgmt_account)
    mgmt_server.malformed_next(version="v3")
    malformed = _auth(mgmt_server, http, mgmt_account)
    assert malformed.status_code == 200
    assert malformed.text.startswith('{"token": "eyJ')
    with pytest.raises(requests.JSONDecodeError):
        malformed.json()


def test_expire_and_revoke_on_cue_then_reauthenticating_is_no_churn(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/main").respond_with_json({})
    url = f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/main"
    token = _token(mgmt_server, http, mgmt_account, "main")
    assert mgmt_server.revoke(token) == "T1"
    revoked = _get(http, url, token)
    assert revoked.status_code == 401
    assert "revoked" in revoked.headers["X-Mgmtauth-Diagnosis"]
    token = _token(mgmt_server, http, mgmt_account, "main")
    mgmt_server.expire("T2")
    assert _get(http, url, token).status_code == 401
    token = _token(mgmt_server, http, mgmt_account, "main")
    assert _get(http, url, token).ok
    mgmt_server.assert_token_reused()
    assert "token T1 revoked on cue" in mgmt_server.timeline()


def test_disallowed_profile_unknown_user_and_wrong_key_get_401(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    alice = mgmt_server.add_account(profiles=["acme/main"])
    refused = _auth(mgmt_server, http, alice, profile="dev")
    assert refused.status_code == 401
    assert refused.json()["returnCode"] == 1401
    assert "acme/dev" in refused.json()["message"]
    assert _auth(mgmt_server, http, alice).ok
    wrong = http.post(
        f"{mgmt_server.url}/v3/auth/accounts/acme/profiles/main",
        data={"username": alice.username, "key": "wrong"},
    )
    assert wrong.status_code == 401
    assert alice.api_key not in wrong.text
    unknown = http.post(
        f"{mgmt_server.url}/v3/auth/accounts/acme/profiles/main",
        data={"username": "nobody@example.com", "key": "x"},
    )
    assert unknown.status_code == 401
    assert "no account" in unknown.json()["message"]


@pytest.mark.parametrize(
    ("method", "path", "kw", "status", "text"),
    [
        ("POST", "/v3/auth/accounts/acme", {"data": {"a": "b"}}, 404, "not a v3 auth endpoint"),
        ("POST", "/v3/auth/accounts/acme/profiles/main/x", {"data": {}}, 404, "/profiles/"),
        ("GET", "/v3/auth/accounts/acme/profiles/main", {}, 404, "takes POST, not GET"),
        ("POST", "/v3/auth/accounts/acme/profiles/main", {"json": {"u": 1}}, 400, "URL-encoded"),
        ("POST", "/v3/auth/accounts/acme/profiles/main", {"data": {"username": "a"}}, 400, "key"),
    ],
)
def test_bad_v3_auth_requests_get_the_published_codes(
    mgmt_server: MgmtServer,
    http: requests.Session,
    method: str,
    path: str,
    kw: dict[str, object],
    status: int,
    text: str,
) -> None:
    response = http.request(method, f"{mgmt_server.url}{path}", **kw)  # type: ignore[arg-type]
    assert response.status_code == status
    assert response.json()["returnCode"] == status_code(status)
    assert text in response.json()["message"]
    assert [e for e in mgmt_server.events if isinstance(e, BadRequest)]


def test_declaring_a_route_on_v3_auth_is_refused(mgmt_server: MgmtServer) -> None:
    with pytest.raises(ValueError, match="the fake's own endpoint"):
        mgmt_server.route("POST", "/v3/auth/accounts/acme/profiles/main")


@pytest.mark.mgmtauth(https=True)
def test_plain_http_to_the_https_fake_gets_a_plain_400_saying_so(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    plain = mgmt_server.url.replace("https://", "http://")
    response = http.post(f"{plain}/v3/auth/accounts/acme/profiles/main", data={"a": "b"})
    assert response.status_code == 400
    assert "this fake serves HTTPS" in response.json()["message"]
    [bad] = [e for e in mgmt_server.events if isinstance(e, BadRequest)]
    assert "this fake serves HTTPS" in bad.reason
    # And the HTTPS client that follows host works.
    body = _auth(mgmt_server, http, mgmt_account, verify=mgmt_server.ca_bundle).json()
    assert mgmt_server.region_url == f"https://{body['host']}"


def test_a_tls_handshake_at_the_plain_fake_is_diagnosed_in_the_timeline(
    mgmt_server: MgmtServer,
) -> None:
    parts = urlsplit(mgmt_server.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as raw:
        # The start of a ClientHello record, then a newline so the plain server reads
        # the "request line" at once instead of waiting for more bytes.
        raw.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n")
        answer = raw.recv(4096)
    assert b"400" in answer.split(b"\r\n", 1)[0]
    [bad] = [e for e in mgmt_server.events if isinstance(e, BadRequest)]
    assert "TLS handshake arrived at this plain-HTTP fake" in bad.reason


def test_tokens_issued_here_carry_every_event_field(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    _token(mgmt_server, http, mgmt_account, "main")
    [issued] = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert (issued.version, issued.account, issued.profile) == ("v3", "acme", "main")
    assert issued.scope == "acme/main"
    assert "v3 auth for acme/main" in mgmt_server.timeline()


@pytest.mark.parametrize(
    ("server_name", "host_header", "expected"),
    [
        ("127.0.0.1", "localhost:8765", "127.0.0.1:8765"),
        ("::1", "[::1]:8765", "[::1]:8765"),
        ("0.0.0.0", "fake.example:8765", "fake.example:8765"),
        ("::", "10.0.0.5:8765", "10.0.0.5:8765"),
    ],
)
def test_the_host_of_v3_answers_is_where_the_fake_listens(
    server_name: str, host_header: str, expected: str
) -> None:
    environ = EnvironBuilder(headers=[("Host", host_header)]).get_environ()
    environ["SERVER_NAME"], environ["SERVER_PORT"] = server_name, "8765"
    assert fake_host(Request(environ)) == expected
