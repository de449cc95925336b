"""Every diagnosis of docs/diagnoses.md, provoked with a real HTTP client.

Each test checks the text the client gets (the error body's message), the reason on
the event, and that failure messages and the timeline carry it too. Secrets never
appear whole in any of them.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from urllib.parse import quote, urlsplit

import httpx
import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from pytest_mgmtauth import (
    Account,
    ApiCall,
    AuthRejected,
    BadRequest,
    LoginRejected,
    MgmtClock,
    MgmtServer,
)

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
#: Contains every character that must be URL-encoded in a form body.
NASTY_KEY = "Ab3+cd%41ef&gh=ij/kl"


def error(response: requests.Response | httpx.Response) -> tuple[int, int, str]:
    body = response.json()
    return response.status_code, body["returnCode"], body["message"]


def last(mgmt_server: MgmtServer, kind: type) -> object:
    return [e for e in mgmt_server.events if isinstance(e, kind)][-1]


# -- /v2/auth: how the key travelled ---------------------------------------------------


def test_unencoded_key_is_named_with_each_kind_of_damage(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    account = mgmt_server.add_account(api_key=NASTY_KEY)
    # The bug: the key written into the body as it is.
    response = http.post(
        f"{mgmt_server.url}/v2/auth",
        data=f"username={quote(account.username)}&key={account.api_key}",
        headers=FORM,
    )
    status, code, message = error(response)
    assert (status, code) == (401, 1401)
    assert message.startswith("Authentication failed: the API key arrived un-encoded: ")
    assert "each '+' arrived as a space (1 of them)" in message
    assert "'%' sequences were decoded" in message
    assert (
        "the field was cut at the first '&' (after 11 characters) and the other 8 arrived "
        "as a stray form field split again at its '='"
    ) in message
    assert "URL-encode the API key in the form body" in message
    event = last(mgmt_server, AuthRejected)
    assert isinstance(event, AuthRejected)
    assert message.endswith(event.reason)
    assert event.reason in mgmt_server.timeline()
    for text in (message, mgmt_server.timeline()):
        assert NASTY_KEY not in text
        assert "gh=ij" not in text


def test_unencoded_percent_that_decodes_to_non_utf8_names_the_field(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    account = mgmt_server.add_account(api_key="Zz%C3%28keyrest")
    response = http.post(
        f"{mgmt_server.url}/v2/auth",
        data=f"username={quote(account.username)}&key={account.api_key}",
        headers=FORM,
    )
    status, _, message = error(response)
    assert status == 400
    assert "in form field 'key', a '%XX' escape decodes to bytes that are not UTF-8" in message
    assert "written into the body without URL-encoding" in message
    assert "Zz%C3%28keyrest" not in message
    assert isinstance(last(mgmt_server, BadRequest), BadRequest)


def test_plus_that_arrived_as_a_space_from_a_hand_rolled_encoder(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    account = mgmt_server.add_account(api_key="Ab+cd&ef%41/")
    # Encodes everything except '+': the server reads it as a space.
    hand_rolled = quote(account.api_key, safe="+")
    response = http.post(
        f"{mgmt_server.url}/v2/auth",
        data=f"username={quote(account.username)}&key={hand_rolled}",
        headers=FORM,
    )
    _, _, message = error(response)
    assert "each '+' of the API key arrived as a space" in message
    assert "must travel as %2B" in message


def test_double_encoded_key_is_named(mgmt_server: MgmtServer) -> None:
    account = mgmt_server.add_account(api_key=NASTY_KEY)
    # The bug: quoting the key by hand and then letting httpx encode the dict again.
    response = httpx.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": account.username, "key": quote(account.api_key, safe="")},
    )
    status, code, message = error(response)
    assert (status, code) == (401, 1401)
    assert "the API key arrived URL-encoded twice" in message
    assert "%2B for '+'" in message
    assert NASTY_KEY not in message


def test_json_body_is_named(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    response = requests.post(
        f"{mgmt_server.url}/v2/auth",
        json={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    status, code, message = error(response)
    assert (status, code) == (415, 415)
    assert "this request sent JSON (use data={...}, not json={...})" in message
    event = last(mgmt_server, BadRequest)
    assert isinstance(event, BadRequest)
    assert event.reason == message
    assert mgmt_account.api_key not in message


def test_json_body_under_a_form_content_type_is_named_without_echoing_it(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    body = f'{{"username": "{mgmt_account.username}", "key": "{mgmt_account.api_key}"}}'
    response = http.post(f"{mgmt_server.url}/v2/auth", data=body, headers=FORM)
    status, _, message = error(response)
    assert status == 400
    assert "the body is JSON but the Content-Type says application/x-www-form-urlencoded" in message
    assert mgmt_account.api_key not in message


def test_missing_content_type_from_a_str_body_is_named(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    body = f"username={quote(mgmt_account.username)}&key={quote(mgmt_account.api_key)}"
    response = http.post(f"{mgmt_server.url}/v2/auth", data=body)  # requests sends none
    status, _, message = error(response)
    assert status == 415
    assert "this request has no Content-Type header" in message
    assert "requests sends no Content-Type when data= is a str or bytes" in message


def test_wrong_content_type_is_named(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    response = httpx.post(
        f"{mgmt_server.url}/v2/auth",
        content=f"username={quote(mgmt_account.username)}&key={quote(mgmt_account.api_key)}",
        headers={"Content-Type": "text/plain"},
    )
    status, _, message = error(response)
    assert status == 415
    assert "this request sent Content-Type: text/plain" in message


def test_unencoded_plus_in_the_username_points_at_the_account(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    account = mgmt_server.add_account("ops+ci@example.com")
    response = http.post(
        f"{mgmt_server.url}/v2/auth",
        data=f"username={account.username}&key={quote(account.api_key, safe='')}",
        headers=FORM,
    )
    _, _, message = error(response)
    assert "no account 'ops ci@example.com' exists" in message
    assert "did you mean 'ops+ci@example.com'?" in message


# -- bearer tokens -------------------------------------------------------------------


def test_missing_bearer_scheme_is_named_and_attributed_to_the_token(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    http: requests.Session,
    get_token: object,
) -> None:
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    token = get_token(mgmt_account)  # type: ignore[operator]
    response = http.get(f"{mgmt_server.url}/api/things", headers={"Authorization": token})
    status, code, message = error(response)
    assert (status, code) == (401, 1401)
    assert "holds the token without the 'Bearer' scheme" in message
    assert "send 'Authorization: Bearer <token>'" in message
    event = last(mgmt_server, ApiCall)
    assert isinstance(event, ApiCall)
    assert (event.username, event.credential) == (mgmt_account.username, "T1")
    # The service refused T1, so getting a new token now is reuse, not churn.
    get_token(mgmt_account)  # type: ignore[operator]
    mgmt_server.assert_token_reused()
    assert token not in mgmt_server.timeline()


def test_wrong_scheme_is_named(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, get_token: object
) -> None:
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    token = get_token(mgmt_account)  # type: ignore[operator]
    response = http.get(
        f"{mgmt_server.url}/api/things", headers={"Authorization": f"Token {token}"}
    )
    _, _, message = error(response)
    assert "the Authorization scheme is 'Token', not 'Bearer'" in message
    assert token not in message


def test_expired_token_says_how_long_ago(
    mgmt_clock: MgmtClock,  # first: the service starts on the frozen clock (exact times)
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    http: requests.Session,
    get_token: object,
) -> None:
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    token = get_token(mgmt_account)  # type: ignore[operator]
    mgmt_clock.advance(seconds=1800 + 42)
    response = http.get(
        f"{mgmt_server.url}/api/things", headers={"Authorization": f"Bearer {token}"}
    )
    status, code, message = error(response)
    assert (status, code) == (401, 1401)
    assert "token T1 expired 42 s ago (valid 1800 s from issue)" in message
    with pytest.raises(AssertionError) as excinfo:
        mgmt_server.assert_no_expired_token_used()
    failure = str(excinfo.value)
    assert "token T1 expired 42 s ago" in failure
    assert "00:30:42  GET /api/things with T1 -> 401" in failure
    assert token not in failure


def test_token_not_issued_by_this_fake_is_named(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    foreign_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    forged = jwt.encode(
        {
            "sub": mgmt_account.username,
            "iss": "pytest-mgmtauth",
            "iat": now,
            "nbf": now,
            "exp": now + 1800,
            "jti": "0123456789abcdef",
        },
        foreign_key,
        algorithm="RS512",
    )
    response = http.get(
        f"{mgmt_server.url}/api/things", headers={"Authorization": f"Bearer {forged}"}
    )
    _, code, message = error(response)
    assert code == 1401
    assert "signature does not verify with this fake's key" in message
    event = last(mgmt_server, ApiCall)
    assert isinstance(event, ApiCall)
    assert event.username == mgmt_account.username  # attributed by its sub claim
    hs = jwt.encode({"sub": mgmt_account.username}, "k" * 32, algorithm="HS256")
    response = http.get(f"{mgmt_server.url}/api/things", headers={"Authorization": f"Bearer {hs}"})
    assert (
        "the token's algorithm is 'HS256', not 'RS512': this fake never issued it"
        in (error(response)[2])
    )


# -- v1 sessions -----------------------------------------------------------------------


def test_jsessionid_the_cookie_jar_never_sent_explains_path_and_secure(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    login = http.post(
        f"{mgmt_server.url}/v1/login",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
    )
    utk = login.json()["utk"]
    # The bug: trusting the session's cookie jar to send JSESSIONID back.
    response = http.get(f"{mgmt_server.url}/v1/things", params={"utk": utk})
    status, code, message = error(response)
    assert (status, code) == (401, 1401)
    assert message.startswith("Authentication failed: no JSESSIONID cookie was sent. ")
    assert "/v1/login sets it with Path=/urest_service; Secure; HttpOnly" in message
    assert "its Path=/urest_service does not cover /v1/things" in message
    assert "it is Secure and this request came over http://" in message
    assert "send 'Cookie: JSESSIONID=<id>' yourself" in message
    assert utk not in message


def test_missing_utk_is_named_and_a_misplaced_one_is_found(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, v1_login: object
) -> None:
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    session_id, utk = v1_login(mgmt_account)  # type: ignore[operator]
    cookie = {"Cookie": f"JSESSIONID={session_id}"}
    _, _, message = error(http.get(f"{mgmt_server.url}/v1/things", headers=cookie))
    assert "the utk query parameter is missing" in message
    _, _, message = error(
        http.get(f"{mgmt_server.url}/v1/things", headers={**cookie, "X-Utk": utk})
    )
    assert "utk arrived in the header 'X-Utk', not in the query string" in message
    assert utk not in message
    event = last(mgmt_server, ApiCall)
    assert isinstance(event, ApiCall)
    assert (event.username, event.credential) == (mgmt_account.username, "S1")


def test_utk_of_another_session_is_named(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, v1_login: object
) -> None:
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    _, first_utk = v1_login(mgmt_account)  # type: ignore[operator]
    second_id, _ = v1_login(mgmt_account)  # type: ignore[operator]
    response = http.get(
        f"{mgmt_server.url}/v1/things",
        params={"utk": first_utk},
        headers={"Cookie": f"JSESSIONID={second_id}"},
    )
    _, _, message = error(response)
    assert "the utk does not belong to session S2 (it is the utk of session S1)" in message
    assert first_utk not in message


def test_locked_account_still_being_hammered_is_named(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    wrong = {"username": mgmt_account.username, "password": "not-it"}
    for _ in range(5):
        assert http.post(f"{mgmt_server.url}/v1/login", data=wrong).status_code == 401
    first = http.post(f"{mgmt_server.url}/v1/login", data=wrong)
    _, code, message = error(first)
    assert code == 1402
    assert "hammering" not in message
    for _ in range(2):
        response = http.post(f"{mgmt_server.url}/v1/login", data=wrong)
    status, code, message = error(response)
    assert (status, code) == (401, 1402)
    assert message.startswith("Too many unsuccessful login attempts; try again in 10 minutes: ")
    assert (
        "the client is still hammering the locked account: 3 login attempts since the "
        "lockout began, stop retrying on 1402"
    ) in message
    event = last(mgmt_server, LoginRejected)
    assert isinstance(event, LoginRejected)
    assert event.reason in mgmt_server.timeline(mgmt_account.username)


# -- thundering herd, on the wire -------------------------------------------------------


def _held_auth_requests(mgmt_server: MgmtServer, account: Account, n: int) -> list[int]:
    """``n`` /v2/auth requests that are all in flight at once, made so deterministically:
    each sends its headers, and the bodies follow only once the fake has seen all of
    them arrive (it reads a body after the request's arrival is recorded)."""
    parts = urlsplit(mgmt_server.url)
    body = f"username={quote(account.username)}&key={quote(account.api_key, safe='')}".encode()
    connections = []
    service = mgmt_server._service
    start = service.credentials._tick  # counts arrivals (and grants, of which there are none yet)
    assert parts.hostname is not None
    for _ in range(n):
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.putrequest("POST", "/v2/auth")
        conn.putheader("Content-Type", "application/x-www-form-urlencoded")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        connections.append(conn)
    deadline = time.monotonic() + 10
    while service.credentials._tick < start + n and time.monotonic() < deadline:
        time.sleep(0.005)
    statuses = []
    for conn in connections:
        conn.send(body)
    for conn in connections:
        statuses.append(conn.getresponse().status)
        conn.close()
    return statuses


def test_threads_refreshing_together_are_a_thundering_herd(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    assert _held_auth_requests(mgmt_server, mgmt_account, 3) == [200, 200, 200]
    with pytest.raises(AssertionError) as excinfo:
        mgmt_server.assert_single_flight()
    message = str(excinfo.value)
    assert f"thundering herd: 2 grant(s) to account {mgmt_account.username!r}" in message
    assert "CONCURRENT: requested before T1 was issued (thundering herd)" in message
    with pytest.raises(AssertionError, match="a thundering herd: several threads"):
        mgmt_server.assert_token_reused()


def test_a_client_with_a_lock_around_its_refresh_is_single_flight(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    lock = threading.Lock()
    cache: dict[str, str] = {}

    def token() -> str:
        with lock:
            if "token" not in cache:
                response = requests.post(
                    f"{mgmt_server.url}/v2/auth",
                    data={"username": mgmt_account.username, "key": mgmt_account.api_key},
                )
                cache["token"] = response.json()["token"]
            return cache["token"]

    barrier = threading.Barrier(4)
    statuses: list[int] = []

    def worker() -> None:
        barrier.wait()
        response = requests.get(
            f"{mgmt_server.url}/api/things", headers={"Authorization": f"Bearer {token()}"}
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 4
    mgmt_server.assert_single_flight()
    mgmt_server.assert_auth_count(1)
    mgmt_server.assert_token_reused()


def test_asyncio_tasks_sharing_a_locked_refresh_are_single_flight(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/api/things").respond_with_json([])

    async def run() -> list[int]:
        lock = asyncio.Lock()
        cache: dict[str, str] = {}
        async with httpx.AsyncClient(base_url=mgmt_server.url) as client:

            async def token() -> str:
                async with lock:
                    if "token" not in cache:
                        answer = await client.post(
                            "/v2/auth",
                            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
                        )
                        cache["token"] = answer.json()["token"]
                    return cache["token"]

            async def call() -> int:
                bearer = {"Authorization": f"Bearer {await token()}"}
                return (await client.get("/api/things", headers=bearer)).status_code

            return list(await asyncio.gather(*(call() for _ in range(6))))

    assert asyncio.run(run()) == [200] * 6
    mgmt_server.assert_single_flight()
    mgmt_server.assert_auth_count(1, version="v2")


# -- fix hints in the idiom of the client that sent the request ------------------------

#: A real User-Agent of each client, and what its fix must say.
AGENT_IDIOMS = [
    ("python-requests/2.32.3", "requests.post(url, data={...})"),
    ("python-httpx/0.28.1", "httpx.post(url, data={...})"),
    ("Python/3.12 aiohttp/3.10.5", "session.post(url, data={...})"),
    ("Python-urllib/3.12", "urllib.parse.urlencode({...}).encode()"),
    ("node", "new URLSearchParams({...})"),
    ("curl/8.5.0", "--data-urlencode 'name=value'"),
    ("Go-http-client/1.1", "url.Values{...}.Encode()"),
    ("Java-http-client/17.0.12", "URLEncoder.encode(value, StandardCharsets.UTF_8)"),
    ("Java/11.0.24", "URLEncoder.encode(value, StandardCharsets.UTF_8)"),
]


def _post_raw(server: MgmtServer, path: str, body: str, headers: dict[str, str]) -> str:
    """POST ``body`` as it is (http.client sends no User-Agent of its own)."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request("POST", path, body=body.encode(), headers=headers)
        answer = conn.getresponse()
        message = json.loads(answer.read())["message"]
        assert isinstance(message, str)
        return message
    finally:
        conn.close()


@pytest.mark.parametrize(("agent", "idiom"), AGENT_IDIOMS, ids=[a for a, _ in AGENT_IDIOMS])
def test_unencoded_key_fix_is_in_the_idiom_of_the_user_agent(
    mgmt_server: MgmtServer, agent: str, idiom: str
) -> None:
    account = mgmt_server.add_account(api_key=NASTY_KEY)
    message = _post_raw(
        mgmt_server,
        "/v2/auth",
        f"username={quote(account.username)}&key={account.api_key}",
        {**FORM, "User-Agent": agent},
    )
    assert "the API key arrived un-encoded" in message
    # What must be on the wire, for every client...
    assert "'+' as %2B, '&' as %26, '=' as %3D, '%' as %25" in message
    # ...then the idiom of this one, and no other language's.
    assert idiom in message
    if not agent.lower().startswith("python"):
        assert "urllib" not in message
        assert "requests" not in message
    assert NASTY_KEY not in message


def test_unencoded_password_fix_for_node_fetch_names_no_python(mgmt_server: MgmtServer) -> None:
    # The case: a template-string body, sent by Node's fetch with the form type.
    account = mgmt_server.add_account(password="pa55+word&x=y")
    message = _post_raw(
        mgmt_server,
        "/v1/login",
        f"username={quote(account.username)}&password={account.password}",
        {**FORM, "User-Agent": "node"},
    )
    assert "the password arrived un-encoded" in message
    assert "new URLSearchParams" in message
    assert "urllib" not in message
    assert "data={" not in message


def test_an_unknown_client_gets_the_wire_format_and_every_idiom(mgmt_server: MgmtServer) -> None:
    account = mgmt_server.add_account(api_key=NASTY_KEY)
    message = _post_raw(
        mgmt_server,
        "/v2/auth",
        f"username={quote(account.username)}&key={account.api_key}",
        {**FORM, "User-Agent": "my-client/1.0"},
    )
    assert "'+' as %2B" in message
    for idiom in ("urllib.parse.urlencode", "URLSearchParams", "url.Values", "URLEncoder"):
        assert idiom in message


@pytest.mark.parametrize(
    ("agent", "idiom"),
    [
        ("node", "new URLSearchParams({...}), not JSON.stringify(...)"),
        ("curl/8.5.0", "not --json"),
        ("Go-http-client/1.1", "not json.Marshal"),
        ("python-requests/2.32.3", "use data={...}, not json={...}"),
    ],
)
def test_json_instead_of_a_form_fix_is_in_the_idiom_of_the_user_agent(
    mgmt_server: MgmtServer, mgmt_account: Account, agent: str, idiom: str
) -> None:
    body = f'{{"username": "{mgmt_account.username}", "key": "k"}}'
    message = _post_raw(
        mgmt_server, "/v2/auth", body, {"Content-Type": "application/json", "User-Agent": agent}
    )
    assert "this request sent JSON" in message
    assert idiom in message


def test_node_fetch_string_body_without_a_content_type_is_named(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # fetch(url, {method: "POST", body: `username=...`}) labels the body text/plain.
    message = _post_raw(
        mgmt_server,
        "/v2/auth",
        f"username={quote(mgmt_account.username)}&key={quote(mgmt_account.api_key)}",
        {"Content-Type": "text/plain;charset=UTF-8", "User-Agent": "node"},
    )
    assert "this request sent Content-Type: text/plain;charset=UTF-8" in message
    assert "which fetch sets for a string body" in message
    assert "new URLSearchParams" in message


def test_real_python_clients_get_their_own_idiom(mgmt_server: MgmtServer) -> None:
    account = mgmt_server.add_account(api_key=NASTY_KEY)
    body = f"username={quote(account.username)}&key={account.api_key}"
    url = f"{mgmt_server.url}/v2/auth"
    by_requests = requests.post(url, data=body, headers=FORM).json()["message"]
    by_httpx = httpx.post(url, content=body, headers=FORM).json()["message"]
    assert "requests.post(url, data={...})" in by_requests
    assert "httpx.post(url, data={...})" in by_httpx
