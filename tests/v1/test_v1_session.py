"""POST /v1/login, v1 calls with the JSESSIONID cookie and utk, /v1/logout."""

from __future__ import annotations

import http.client
import json
import weakref
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

import pytest
import requests
from wire_support import assert_success_headers

from pytest_mgmtauth import (
    Account,
    AccountLocked,
    ApiCall,
    LoggedIn,
    LoggedOut,
    LoginRejected,
    MgmtClock,
    MgmtServer,
    SessionExpired,
)

Login = Callable[[Account], tuple[str, str]]


def _login_raw(server: MgmtServer, account: Account) -> http.client.HTTPResponse:
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
    body = urlencode({"username": account.username, "password": account.password})
    connection.request(
        "POST", "/v1/login", body, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    response = connection.getresponse()
    weakref.finalize(response, connection.close)  # kept alive: close it with the answer
    return response


def _v1_get(
    http: requests.Session, server: MgmtServer, path: str, session_id: str, utk: str | None
) -> requests.Response:
    params = {"utk": utk} if utk is not None else {}
    return http.get(
        f"{server.url}{path}", params=params, headers={"Cookie": f"JSESSIONID={session_id}"}
    )


def test_login_answer_has_the_cookie_lines_and_headers(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    response = _login_raw(mgmt_server, mgmt_account)
    content = response.read()
    assert response.status == 200
    body = json.loads(content)
    assert body.keys() == {"utk"}
    assert body["utk"]
    # Raw header lines in the order they were sent: JSESSIONID first, on its own line.
    set_cookies = [value for name, value in response.getheaders() if name == "Set-Cookie"]
    assert len(set_cookies) == 2
    session_line, remember_line = set_cookies
    name_value, *attributes = (part.strip() for part in session_line.split(";"))
    assert name_value.startswith("JSESSIONID=")
    assert len(name_value.removeprefix("JSESSIONID=")) >= 16
    assert attributes == ["Path=/urest_service", "Secure", "HttpOnly"]
    assert remember_line.startswith("rememberMe=deleteMe;")
    assert "Path=/urest_service" in remember_line
    assert "Max-Age=0" in remember_line
    assert_success_headers(response.headers, content)


def test_cookie_and_utk_authenticate_v1_calls(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_login: Login, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({"tags": []})
    session_id, utk = v1_login(mgmt_account)
    response = _v1_get(http, mgmt_server, "/v1/tags", session_id, utk)
    assert response.status_code == 200
    assert response.json() == {"tags": []}
    call = mgmt_server.events[-1]
    assert isinstance(call, ApiCall)
    assert (call.version, call.credential, call.status) == ("v1", "S1", 200)


def test_cookie_without_utk_is_refused_saying_so(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_login: Login, http: requests.Session
) -> None:
    route = mgmt_server.route("GET", "/v1/tags")
    route.respond_with_json({"tags": []})
    session_id, _ = v1_login(mgmt_account)
    response = _v1_get(http, mgmt_server, "/v1/tags", session_id, None)
    assert response.status_code == 401
    assert response.json()["returnCode"] == 1401
    assert "the utk query parameter is missing" in response.json()["message"]
    assert route.call_count == 0


def test_utk_of_another_session_is_refused(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_login: Login, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({})
    first_id, _ = v1_login(mgmt_account)
    _, second_utk = v1_login(mgmt_account)
    response = _v1_get(http, mgmt_server, "/v1/tags", first_id, second_utk)
    assert response.status_code == 401
    assert "it is the utk of session S2" in response.json()["message"]


def test_utk_without_cookie_is_refused_explaining_the_cookie_path(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_login: Login, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({})
    _, utk = v1_login(mgmt_account)
    response = http.get(f"{mgmt_server.url}/v1/tags", params={"utk": utk})
    assert response.status_code == 401
    message = response.json()["message"]
    assert "no JSESSIONID cookie was sent" in message
    assert "Path=/urest_service" in message


def test_logout_ends_the_session(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_login: Login, http: requests.Session
) -> None:
    route = mgmt_server.route("GET", "/v1/tags")
    route.respond_with_json({})
    session_id, utk = v1_login(mgmt_account)
    response = http.post(
        f"{mgmt_server.url}/v1/logout",
        headers={
            "Cookie": f"JSESSIONID={session_id}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert response.status_code == 200
    after = _v1_get(http, mgmt_server, "/v1/tags", session_id, utk)
    assert after.status_code == 401
    assert "session S1 ended by /v1/logout" in after.json()["message"]
    assert route.call_count == 0
    kinds = [type(e) for e in mgmt_server.events]
    assert kinds == [LoggedIn, LoggedOut, ApiCall]


def test_logout_without_the_cookie_is_refused(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_login: Login, http: requests.Session
) -> None:
    v1_login(mgmt_account)
    response = http.post(f"{mgmt_server.url}/v1/logout")
    assert response.status_code == 401
    assert "no JSESSIONID cookie was sent to /v1/logout" in response.json()["message"]


def test_wrong_password_is_401_1401(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    response = http.post(
        f"{mgmt_server.url}/v1/login",
        data={"username": mgmt_account.username, "password": "guess"},
    )
    assert response.status_code == 401
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["returnCode"] == 1401
    assert body["message"].startswith("Authentication failed")
    assert "Set-Cookie" not in response.headers


@pytest.mark.mgmtauth(lockout_threshold=3)
def test_lockout_is_1402_until_lockout_duration_has_passed(
    # mgmt_clock first: the service starts on the frozen clock (the message has exact times)
    mgmt_clock: MgmtClock,
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    http: requests.Session,
) -> None:
    def login(password: str) -> requests.Response:
        return http.post(
            f"{mgmt_server.url}/v1/login",
            data={"username": mgmt_account.username, "password": password},
        )

    assert [login("bad").json()["returnCode"] for _ in range(3)] == [1401] * 3
    locked = login(mgmt_account.password)
    assert locked.status_code == 401
    assert locked.json()["returnCode"] == 1402
    assert locked.json()["message"].startswith(
        "Too many unsuccessful login attempts; try again in 10 minutes: account locked "
        "since 00:00:00 until 00:10:00 after 3 failed logins"
    )
    mgmt_clock.advance(minutes=9, seconds=59)
    assert login(mgmt_account.password).json()["returnCode"] == 1402
    mgmt_clock.advance(seconds=1)
    assert login(mgmt_account.password).status_code == 200
    [lock] = [e for e in mgmt_server.events if isinstance(e, AccountLocked)]
    assert lock.username == mgmt_account.username
    assert lock.until - lock.at == timedelta(minutes=10)
    assert lock.until == mgmt_clock.now()
    rejected = [e.return_code for e in mgmt_server.events if isinstance(e, LoginRejected)]
    assert rejected == [1401, 1401, 1401, 1402, 1402]


@pytest.mark.mgmtauth(lockout_threshold=1, lockout_duration=60)
def test_lockout_duration_option_shortens_the_lockout(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    data = {"username": mgmt_account.username, "password": "bad"}
    http.post(f"{mgmt_server.url}/v1/login", data=data)
    mgmt_clock.advance(seconds=59)
    assert http.post(f"{mgmt_server.url}/v1/login", data=data).json()["returnCode"] == 1402
    mgmt_clock.advance(seconds=1)
    assert http.post(f"{mgmt_server.url}/v1/login", data=data).json()["returnCode"] == 1401


@pytest.mark.mgmtauth(session_timeout=300)
def test_idle_session_ends_by_itself(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    v1_login: Login,
    http: requests.Session,
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({})
    session_id, utk = v1_login(mgmt_account)
    mgmt_clock.advance(seconds=299)
    assert _v1_get(http, mgmt_server, "/v1/tags", session_id, utk).status_code == 200
    mgmt_clock.advance(seconds=299)  # idle time counts from the last use
    assert _v1_get(http, mgmt_server, "/v1/tags", session_id, utk).status_code == 200
    mgmt_clock.advance(seconds=300)
    response = _v1_get(http, mgmt_server, "/v1/tags", session_id, utk)
    assert response.status_code == 401
    assert "expired after 300 s idle" in response.json()["message"]
    expired = [e for e in mgmt_server.events if isinstance(e, SessionExpired)]
    assert [(e.session, e.at) for e in expired] == [("S1", mgmt_clock.now())]


def test_missing_permission_is_401_1469(
    mgmt_server: MgmtServer, v1_login: Login, http: requests.Session
) -> None:
    reader = mgmt_server.add_account(permissions=["tags:read"])
    read = mgmt_server.route("GET", "/v1/tags", permission="tags:read")
    read.respond_with_json({"tags": []})
    write = mgmt_server.route("POST", "/v1/tags", permission="tags:write")
    write.respond_with_json({"created": True})
    session_id, utk = v1_login(reader)
    assert _v1_get(http, mgmt_server, "/v1/tags", session_id, utk).status_code == 200
    response = http.post(
        f"{mgmt_server.url}/v1/tags",
        params={"utk": utk},
        headers={"Cookie": f"JSESSIONID={session_id}"},
    )
    assert response.status_code == 401
    body = response.json()
    assert body["returnCode"] == 1469
    assert body["message"].startswith("User is authenticated but the request is denied")
    assert "'tags:write'" in body["message"]
    assert write.call_count == 0
    # A 1469 does not end the session.
    assert _v1_get(http, mgmt_server, "/v1/tags", session_id, utk).status_code == 200


@pytest.mark.parametrize(
    ("cookie", "utk", "expected"),
    [
        ("JSESSIONID=0123456789ABCDEF0123456789ABCDEF", "live", "names no session of this test"),
        ("JSESSIONID=", "live", "no JSESSIONID cookie was sent"),
        (None, "live", "no JSESSIONID cookie was sent"),
        ("live", "made-up-utk", "no session has it"),
        ("live", "", "the utk query parameter is missing"),
    ],
    ids=["unknown-session", "empty-cookie", "no-cookie", "unknown-utk", "empty-utk"],
)
def test_bad_v1_credentials_get_401_json_never_the_routes_answer(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    v1_login: Login,
    http: requests.Session,
    cookie: str | None,
    utk: str,
    expected: str,
) -> None:
    route = mgmt_server.route("GET", "/v1/secret")
    route.respond_with_json({"secret": "the route's answer"})
    session_id, live_utk = v1_login(mgmt_account)
    headers = {}
    if cookie is not None:
        headers["Cookie"] = f"JSESSIONID={session_id}" if cookie == "live" else cookie
    response = http.get(
        f"{mgmt_server.url}/v1/secret",
        params={"utk": live_utk if utk == "live" else utk},
        headers=headers,
    )
    assert response.status_code == 401
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["returnCode"] == 1401
    assert expected in response.json()["message"]
    assert "the route's answer" not in response.text
    assert route.call_count == 0
