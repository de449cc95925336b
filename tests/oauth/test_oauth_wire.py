"""The OAuth flow over a real socket, with requests and httpx: the token endpoint's
answer and headers, both client authentication methods, every RFC 6749 error as the
client sees it, RFC 6750 refusals of API calls, faults, and the timeline."""

from __future__ import annotations

import base64
import re
from http.client import HTTPConnection
from urllib.parse import quote_plus, urlsplit

import httpx
import pytest
import requests

from pytest_mgmtauth import ApiCall, MgmtClock, MgmtServer, OAuthClient, TokenIssued

READ = "acme:main:tiq:2026-07:profiles:read"
WRITE = "acme:main:tiq:2026-07:profiles:write"


def encoded_auth(client: OAuthClient) -> tuple[str, str]:
    """What RFC 6749 2.3.1 asks: id and secret form-encoded before Basic encodes them."""
    return quote_plus(client.client_id), quote_plus(client.client_secret)


def token_request(
    server: MgmtServer, http: requests.Session, client: OAuthClient, **data: str
) -> requests.Response:
    return http.post(
        server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials", **data},
        auth=encoded_auth(client),
    )


def access_token(server: MgmtServer, http: requests.Session, client: OAuthClient) -> str:
    response = token_request(server, http, client)
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def test_requests_gets_a_token_and_calls_a_scoped_route(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/profiles", scope=READ).respond_with_json({"ok": True})
    response = token_request(mgmt_server, http, mgmt_oauth_client)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Pragma"] == "no-cache"
    body = response.json()
    assert set(body) == {"access_token", "token_type", "expires_in", "scope"}
    assert (body["token_type"], body["expires_in"]) == ("Bearer", 7200)
    answer = http.get(
        mgmt_server.url_for("/api/profiles"),
        headers={"Authorization": f"Bearer {body['access_token']}"},
    )
    assert answer.status_code == 200, answer.text
    assert mgmt_server.auth_count(version="oauth") == 1
    assert mgmt_server.auth_count(username=mgmt_oauth_client.client_id) == 1
    assert mgmt_oauth_client.client_id in mgmt_server.timeline(mgmt_oauth_client.client_id)


def test_httpx_with_the_credentials_in_the_form(mgmt_server: MgmtServer) -> None:
    # A secret the test chooses with characters RFC 6749 2.3.1 form-encodes (generated
    # ones are letters and digits, which raw Basic sends unchanged).
    mgmt_oauth_client = mgmt_server.add_client([WRITE], client_secret="s3cr+t&k3y=%41/x")
    mgmt_server.route("POST", "/api/profiles", scope=WRITE).respond_with_json({}, status=201)
    with httpx.Client(base_url=mgmt_server.url, trust_env=False) as client:
        response = client.post(
            "/oauth/token",
            data={
                "grant_type": "client_credentials",
                "client_id": mgmt_oauth_client.client_id,
                "client_secret": mgmt_oauth_client.client_secret,
                "scope": WRITE,
            },
        )
        assert response.status_code == 200, response.text
        assert response.json()["scope"] == WRITE
        token = response.json()["access_token"]
        created = client.post("/api/profiles", headers={"Authorization": f"Bearer {token}"})
        assert created.status_code == 201
        # httpx's BasicAuth does not form-encode: the diagnosis says so.
        raw = client.post(
            "/oauth/token",
            data={"grant_type": "client_credentials"},
            auth=(mgmt_oauth_client.client_id, mgmt_oauth_client.client_secret),
        )
    assert raw.status_code == 401
    assert raw.json()["error"] == "invalid_client"
    assert "without form-encoding" in raw.json()["error_description"]
    assert raw.headers["WWW-Authenticate"].startswith("Basic realm=")
    assert mgmt_oauth_client.client_secret not in raw.text


@pytest.mark.mgmtauth(oauth_token_path="/portal/token", oauth_token_ttl=300)
def test_the_token_path_and_lifetime_options(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    answer = http.post(
        mgmt_server.url_for("/portal/token"),
        data={"grant_type": "client_credentials"},
        auth=encoded_auth(mgmt_oauth_client),
    )
    assert answer.json()["expires_in"] == 300
    assert http.post(mgmt_server.url_for("/oauth/token")).status_code == 404
    with pytest.raises(ValueError, match="fake's own endpoint"):
        mgmt_server.route("POST", "/portal/token")


@pytest.mark.parametrize(
    ("kwargs", "status", "error"),
    [
        ({"data": {"grant_type": "password"}}, 400, "unsupported_grant_type"),
        ({"data": {}}, 400, "invalid_request"),
        ({"json": {"grant_type": "client_credentials"}}, 400, "invalid_request"),
        ({"data": "grant_type=client_credentials&grant_type=x"}, 400, "invalid_request"),
        ({"data": {"grant_type": "client_credentials", "scope": "a:b"}}, 400, "invalid_scope"),
        ({"data": {"grant_type": "client_credentials", "scope": "x" * 70_000}}, 400, None),
        ({"data": {"grant_type": "client_credentials"}, "auth": None}, 401, "invalid_client"),
    ],
)
def test_bad_requests_get_rfc_errors(
    mgmt_server: MgmtServer,
    mgmt_oauth_client: OAuthClient,
    http: requests.Session,
    kwargs: dict[str, object],
    status: int,
    error: str | None,
) -> None:
    send: dict[str, object] = {"auth": encoded_auth(mgmt_oauth_client), **kwargs}
    if isinstance(send.get("data"), str):
        send["headers"] = {"Content-Type": "application/x-www-form-urlencoded"}
    response = http.post(mgmt_server.url_for("/oauth/token"), **send)  # type: ignore[arg-type]
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == (error or "invalid_request")
    assert body["error_description"]
    assert "returnCode" not in body
    assert mgmt_oauth_client.client_secret not in response.text
    assert quote_plus(mgmt_oauth_client.client_secret) not in response.text


def test_a_malformed_basic_header_and_both_methods(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    url = mgmt_server.url_for("/oauth/token")
    malformed = http.post(
        url, data={"grant_type": "client_credentials"}, headers={"Authorization": "Basic %%%"}
    )
    assert (malformed.status_code, malformed.json()["error"]) == (401, "invalid_client")
    both = http.post(
        url,
        data={"grant_type": "client_credentials", "client_secret": "x"},
        auth=encoded_auth(mgmt_oauth_client),
    )
    assert (both.status_code, both.json()["error"]) == (400, "invalid_request")
    assert "two client authentication methods" in both.json()["error_description"]
    wrong_method = http.get(url)
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"] == "invalid_request"
    assert wrong_method.headers["Allow"] == "POST"


def test_api_calls_without_token_with_expired_token_and_without_scope(
    mgmt_server: MgmtServer,
    mgmt_clock: MgmtClock,
    http: requests.Session,
) -> None:
    client = mgmt_server.add_client(["acme:*:tiq:2026-07:profiles:read"])
    mgmt_server.route("GET", "/api/profiles", scope=READ).respond_with_json([])
    mgmt_server.route("PUT", "/api/profiles", scope=WRITE).respond_with_json({})
    url = mgmt_server.url_for("/api/profiles")
    bare = http.get(url)
    assert bare.status_code == 401
    assert bare.headers["WWW-Authenticate"] == "Bearer"
    assert "error" not in bare.json()
    token = access_token(mgmt_server, http, client)
    lacking = http.put(url, headers={"Authorization": f"Bearer {token}"})
    assert lacking.status_code == 403
    assert lacking.headers["WWW-Authenticate"] == (
        f'Bearer error="insufficient_scope", scope="{WRITE}"'
    )
    assert lacking.json() == {
        "error": "insufficient_scope",
        "message": f"Token does not contain required scope: {WRITE}",
    }
    mgmt_clock.advance(seconds=7201)
    expired = http.get(url, headers={"Authorization": f"Bearer {token}"})
    assert expired.status_code == 401
    assert expired.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    calls = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert [c.status for c in calls] == [401, 403, 401]
    assert calls[2].credential_expired
    timeline = mgmt_server.timeline()
    assert f"lacks the scope {WRITE}" in timeline
    assert "it has acme:*:tiq:2026-07:profiles:read" in timeline
    with pytest.raises(AssertionError, match="expired"):
        mgmt_server.assert_no_expired_credential_used()


def test_churn_is_a_new_token_for_the_same_scopes_while_one_is_valid(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    access_token(mgmt_server, http, mgmt_oauth_client)
    access_token(mgmt_server, http, mgmt_oauth_client)
    issued = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert issued[1].while_valid == ("T1",)
    with pytest.raises(AssertionError, match="token churn") as info:
        mgmt_server.assert_credential_reused()
    assert "one OAuth access token per set of scopes" in str(info.value)


@pytest.mark.mgmtauth(throttle=1)
def test_throttling_is_429_in_the_rfc_shape(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    for _ in range(2):
        access_token(mgmt_server, http, mgmt_oauth_client)
    throttled = token_request(mgmt_server, http, mgmt_oauth_client)
    assert throttled.status_code == 429
    assert throttled.json()["error"] == "temporarily_unavailable"
    assert int(throttled.headers["Retry-After"]) >= 1
    with pytest.raises(AssertionError, match="token churn"):
        mgmt_server.assert_credential_reused()


def test_scripted_faults_on_the_token_endpoint(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    mgmt_server.fail_next(error=503, version="oauth")
    failed = token_request(mgmt_server, http, mgmt_oauth_client)
    assert failed.status_code == 503
    assert failed.json()["error"] == "temporarily_unavailable"
    mgmt_server.drop_connection_next(version="oauth")
    with pytest.raises(requests.ConnectionError):
        token_request(mgmt_server, http, mgmt_oauth_client)
    mgmt_server.malformed_next(version="oauth")
    cut = token_request(mgmt_server, http, mgmt_oauth_client)
    assert cut.text.startswith('{"access_token": "eyJ')
    access_token(mgmt_server, http, mgmt_oauth_client)


def test_expire_and_revoke_on_cue_and_rotation(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/x", auth="oauth").respond_with_json({})
    url = mgmt_server.url_for("/api/x")
    token = access_token(mgmt_server, http, mgmt_oauth_client)
    mgmt_server.revoke(token)
    revoked = http.get(url, headers={"Authorization": f"Bearer {token}"})
    assert (revoked.status_code, revoked.json()["error"]) == (401, "invalid_token")
    rotated = mgmt_server.rotate_client_secret(mgmt_oauth_client)
    old = token_request(mgmt_server, http, mgmt_oauth_client)
    assert "old secret" in old.json()["error_description"]
    fresh = access_token(mgmt_server, http, rotated)
    mgmt_server.schedule_fault("expire", at="call2")  # the next protected call
    assert http.get(url, headers={"Authorization": f"Bearer {fresh}"}).status_code == 401
    mgmt_server.revoke_client(rotated)
    gone = token_request(mgmt_server, http, rotated)
    assert (gone.status_code, gone.json()["error"]) == (400, "invalid_grant")


def test_route_scope_from_a_regex_pattern(mgmt_server: MgmtServer, http: requests.Session) -> None:

    client = mgmt_server.add_client(["acme:main:tiq:2026-07:profiles:read"])
    pattern = re.compile(r"/api/(?P<profile>[^/]+)/visitors")
    mgmt_server.route(
        "GET", pattern, scope="acme:{profile}:tiq:2026-07:profiles:read"
    ).respond_with_json([])
    token = access_token(mgmt_server, http, client)
    headers = {"Authorization": f"Bearer {token}"}
    assert http.get(mgmt_server.url_for("/api/main/visitors"), headers=headers).ok
    assert http.get(mgmt_server.url_for("/api/dev/visitors"), headers=headers).status_code == 403
    with pytest.raises(ValueError, match="named groups"):
        mgmt_server.route("GET", "/api/y", scope="acme:{profile}:tiq:2026-07:profiles:read")


def test_a_scope_placeholder_is_filled_from_the_normalized_path(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    # Issue 38, item 10: /api/main/../dev/visitors passed with a token for main; a gateway
    # that normalizes the path serves dev's visitors.
    client = mgmt_server.add_client(["acme:main:tiq:2026-07:profiles:read"])
    pattern = re.compile(r"/api/(?P<profile>[^/]+)/")
    mgmt_server.route(
        "GET", pattern, scope="acme:{profile}:tiq:2026-07:profiles:read"
    ).respond_with_json([])
    token = access_token(mgmt_server, http, client)
    url = urlsplit(mgmt_server.url)
    for path, status in (
        ("/api/main/visitors", 200),
        ("/api/main/../dev/visitors", 403),
        ("/api/main/./x/../../dev/visitors", 403),
        ("/api/main//visitors", 200),
    ):
        connection = HTTPConnection(str(url.hostname), url.port, timeout=10)
        try:  # http.client sends the path as written (requests would resolve the dots)
            connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
            assert connection.getresponse().status == status, path
        finally:
            connection.close()
    mgmt_server.expect_refusals()


def test_basic_auth_by_hand_with_base64(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    ident, secret = encoded_auth(mgmt_oauth_client)
    header = "Basic " + base64.b64encode(f"{ident}:{secret}".encode()).decode()
    response = http.post(
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials"},
        headers={"Authorization": header},
    )
    assert response.status_code == 200


def test_a_malformed_authorization_on_an_oauth_route_is_invalid_request(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/x", scope=READ).respond_with_json({})
    token = access_token(mgmt_server, http, mgmt_oauth_client)
    for header in ("Bearer", f"Bearer {token} extra"):
        answer = http.get(mgmt_server.url_for("/api/x"), headers={"Authorization": header})
        assert answer.status_code == 400, header
        assert answer.headers["WWW-Authenticate"] == 'Bearer error="invalid_request"'
        assert answer.json()["error"] == "invalid_request"
        assert token not in answer.text
    # Another scheme is no bearer credential at all (RFC 6750 3.1): a bare challenge.
    other = http.get(mgmt_server.url_for("/api/x"), headers={"Authorization": f"Token {token}"})
    assert other.status_code == 401
    assert other.headers["WWW-Authenticate"] == "Bearer"
    assert token not in other.text


@pytest.mark.mgmtauth(https=True)
def test_over_https_with_httpx(mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient) -> None:
    mgmt_server.route("GET", "/api/x", scope=READ).respond_with_json({"ok": 1})
    context = mgmt_server.client_ssl_context()
    assert context is not None
    with httpx.Client(base_url=mgmt_server.url, verify=context, trust_env=False) as client:
        answer = client.post(
            "/oauth/token",
            data={"grant_type": "client_credentials", "scope": " ".join(mgmt_oauth_client.scopes)},
            auth=httpx.BasicAuth(*encoded_auth(mgmt_oauth_client)),
        )
        assert answer.status_code == 200, answer.text
        token = answer.json()["access_token"]
        assert client.get("/api/x", headers={"Authorization": f"Bearer {token}"}).json() == {
            "ok": 1
        }


def test_an_oversized_chunked_body_gets_the_rfc_shape(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient
) -> None:
    import http.client
    import json
    from urllib.parse import urlsplit

    def chunks() -> object:
        yield b"grant_type=client_credentials&scope="
        for _ in range(20):
            yield b"x" * 8192

    parts = urlsplit(mgmt_server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    connection.request(
        "POST",
        "/oauth/token",
        chunks(),  # type: ignore[arg-type]
        {"Content-Type": "application/x-www-form-urlencoded"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    body = json.loads(response.read())
    connection.close()
    assert response.status in (400, 413)
    assert body["error"] == "invalid_request"
    assert "returnCode" not in body


@pytest.mark.parametrize(
    ("framing", "body", "status"),
    [
        (b"Transfer-Encoding: chunked\r\n", b"zz\r\ngrant_type\r\n0\r\n\r\n", 400),
        (b"Content-Length: 5\r\nContent-Length: 6\r\n", b"grant", 400),
        (b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n", 501),
    ],
)
def test_framing_errors_at_the_token_endpoint_get_the_rfc_shape(
    mgmt_server: MgmtServer, framing: bytes, body: bytes, status: int
) -> None:
    import json
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(mgmt_server.url)
    with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10) as sock:
        sock.sendall(
            b"POST /oauth/token HTTP/1.1\r\nHost: x\r\n"
            + framing
            + b"Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n\r\n"
            + body
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, answer = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status), head
    assert json.loads(answer)["error"] == "invalid_request"


def test_the_request_log_masks_the_basic_credentials(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    token_request(mgmt_server, http, mgmt_oauth_client)
    http.post(  # the un-encoded mistake
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials"},
        auth=(mgmt_oauth_client.client_id, mgmt_oauth_client.client_secret),
    )
    logged = [r.header("Authorization") or "" for r in mgmt_server.requests]
    assert len(logged) == 2
    for value in logged:
        # "Basic " and the fingerprint of the Base64 credentials, which carry the secret
        assert re.fullmatch(r"Basic #[0-9a-f]{6}", value), value


def test_another_scheme_at_the_token_endpoint_is_invalid_client_even_with_commas(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    # Issue 38, item 9: Digest's parameters were split at their commas into "2
    # Authorization values", a 400 invalid_request.
    answer = http.post(
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials"},
        headers={"Authorization": 'Digest username="a", realm="b"'},
    )
    assert answer.status_code == 401
    assert answer.json()["error"] == "invalid_client"
    assert "the Authorization scheme is 'Digest', not Basic" in answer.json()["error_description"]
    assert answer.headers["WWW-Authenticate"].startswith("Basic ")


def test_basic_credentials_on_an_oauth_route_get_a_bare_bearer_challenge(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, http: requests.Session
) -> None:
    # Issue 38, item 9: RFC 6750 3.1 answers an unsupported authentication method as a
    # request without authentication: 401, a challenge without an error code (was 400).
    mgmt_server.route("GET", "/api/profiles", scope=READ).respond_with_json({})
    answer = http.get(mgmt_server.url_for("/api/profiles"), auth=encoded_auth(mgmt_oauth_client))
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert "the Authorization scheme is 'Basic', not 'Bearer'" in answer.json()["message"]
    mgmt_server.expect_refusals()


@pytest.mark.parametrize("joined", [f"{WRITE},{READ}", f"{WRITE}, {READ}"])
def test_scopes_joined_by_commas_are_told_to_be_separated_by_one_space(
    mgmt_server: MgmtServer, http: requests.Session, joined: str
) -> None:
    # Issue 43, 3: it said "the scope '...' has 11 part(s); a scope has 6".
    mgmt_server.expect_refusals()
    client = mgmt_server.add_client([READ, WRITE])
    answer = http.post(
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials", "scope": joined},
        auth=encoded_auth(client),
    )
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_scope")
    described = answer.json()["error_description"]
    assert "holds a comma: scopes are separated by one space" in described, described
    assert "part(s)" not in described
    with pytest.raises(ValueError, match="holds a comma: scopes are separated by one space"):
        mgmt_server.add_client([f"{READ},{WRITE}"])
