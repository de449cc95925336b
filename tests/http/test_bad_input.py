"""Malformed requests: a 4xx JSON answer that says what was wrong, never a 5xx.

The requests are written byte by byte with http.client, so each one is exactly the
mistake it names (HTTP libraries fix some of them behind the caller's back).
"""

from __future__ import annotations

import contextlib
import http.client
import json
from urllib.parse import urlencode, urlsplit

import pytest
import requests

from pytest_mgmtauth import Account, BadRequest, MgmtServer

FORM_TYPE = "application/x-www-form-urlencoded"


def _send(
    server: MgmtServer,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    *,
    method: str = "POST",
) -> tuple[int, dict[str, object], http.client.HTTPResponse]:
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    assert response.headers["Content-Type"] == "application/json", raw
    payload: dict[str, object] = json.loads(raw)
    return response.status, payload, response


def _assert_answer(status: int, body: dict[str, object], expected: int, *needles: str) -> None:
    assert status == expected, body
    assert 400 <= status < 500
    assert body.keys() >= {"returnCode", "message"}
    message = str(body["message"])
    for needle in needles:
        assert needle in message, message


def _form(**fields: str) -> bytes:
    return urlencode(fields).encode()


@pytest.fixture
def v2_body(mgmt_account: Account) -> bytes:
    return _form(username=mgmt_account.username, key=mgmt_account.api_key)


@pytest.fixture
def v1_body(mgmt_account: Account) -> bytes:
    return _form(username=mgmt_account.username, password=mgmt_account.password)


# -- Content-Type --------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v2/auth", "/v1/login"])
def test_missing_content_type_is_415_and_names_the_requests_trap(
    mgmt_server: MgmtServer, v2_body: bytes, path: str
) -> None:
    status, body, _ = _send(mgmt_server, path, v2_body, {})
    _assert_answer(
        status,
        body,
        415,
        "this request has no Content-Type header",
        f"Content-Type: {FORM_TYPE}",
        "requests sends no Content-Type when data= is a str or bytes",
    )


def test_requests_with_a_str_body_gets_that_diagnosis(
    mgmt_server: MgmtServer, v2_body: bytes, http: requests.Session
) -> None:
    response = http.post(f"{mgmt_server.url}/v2/auth", data=v2_body.decode())
    assert response.status_code == 415
    assert "pass a dict" in response.json()["message"]


def test_wrong_content_type_is_415(mgmt_server: MgmtServer, v2_body: bytes) -> None:
    status, body, _ = _send(mgmt_server, "/v2/auth", v2_body, {"Content-Type": "text/plain"})
    _assert_answer(status, body, 415, "this request sent Content-Type: text/plain")


def test_json_instead_of_a_form_is_415(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    data = json.dumps({"username": mgmt_account.username, "key": mgmt_account.api_key})
    status, body, _ = _send(
        mgmt_server, "/v2/auth", data.encode(), {"Content-Type": "application/json"}
    )
    _assert_answer(status, body, 415, "this request sent JSON", "not json=")


def test_json_sent_with_requests_json_argument(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    response = http.post(
        f"{mgmt_server.url}/v1/login",
        json={"username": mgmt_account.username, "password": mgmt_account.password},
    )
    assert response.status_code == 415
    assert "this request sent JSON" in response.json()["message"]


def test_json_body_under_a_form_content_type_is_400(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    data = json.dumps({"username": mgmt_account.username, "key": mgmt_account.api_key})
    status, body, _ = _send(mgmt_server, "/v2/auth", data.encode(), {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 400, "the body is JSON")


def test_multipart_is_415(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    response = http.post(
        f"{mgmt_server.url}/v2/auth",
        files={"username": (None, mgmt_account.username), "key": (None, mgmt_account.api_key)},
    )
    assert response.status_code == 415
    assert "multipart/form-data (use data=, not files=)" in response.json()["message"]


def test_content_type_with_charset_is_fine(mgmt_server: MgmtServer, v2_body: bytes) -> None:
    parts = urlsplit(mgmt_server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
    connection.request("POST", "/v2/auth", v2_body, {"Content-Type": f"{FORM_TYPE}; charset=UTF-8"})
    with contextlib.closing(connection):
        assert connection.getresponse().status == 200


# -- the body ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fields", "needles"),
    [
        ("/v2/auth", {"username": "a@example.com"}, ["missing form field 'key'"]),
        ("/v2/auth", {"key": "k"}, ["missing form field 'username'"]),
        (
            "/v2/auth",
            {"username": "a@example.com", "password": "p"},
            ["missing form field 'key'", "passwords go to /v1/login"],
        ),
        (
            "/v1/login",
            {"username": "a@example.com", "key": "k"},
            ["missing form field 'password'", "API keys go to /v2/auth"],
        ),
    ],
)
def test_missing_field_is_400_naming_it(
    mgmt_server: MgmtServer, path: str, fields: dict[str, str], needles: list[str]
) -> None:
    status, body, _ = _send(mgmt_server, path, _form(**fields), {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 400, *needles)


def test_repeated_field_is_400(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    data = (
        _form(username=mgmt_account.username, key=mgmt_account.api_key)
        + b"&"
        + _form(key=mgmt_account.api_key)
    )
    status, body, _ = _send(mgmt_server, "/v2/auth", data, {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 400, "form field 'key' appears 2 times; send it once")


def test_empty_field_is_400(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    data = _form(username=mgmt_account.username, password="")
    status, body, _ = _send(mgmt_server, "/v1/login", data, {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 400, "form field 'password' is empty")


@pytest.mark.parametrize("data", [b"", b"   "])
def test_empty_body_is_400(mgmt_server: MgmtServer, data: bytes) -> None:
    status, body, _ = _send(mgmt_server, "/v2/auth", data, {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 400, "the body is empty", "username, key")


def test_non_utf8_bytes_are_400_not_an_empty_form(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    data = _form(username=mgmt_account.username) + b"&key=caf\xe9"
    status, body, _ = _send(mgmt_server, "/v2/auth", data, {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 400, "is not ASCII (0xe9)", "URL-encode the values")


def test_percent_escape_of_non_utf8_bytes_is_400(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    data = _form(username=mgmt_account.username) + b"&key=caf%E9"
    status, body, _ = _send(mgmt_server, "/v2/auth", data, {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 400, "not UTF-8")


def test_oversized_body_is_413(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    data = _form(username=mgmt_account.username, key="k" * 100_000)
    status, body, _ = _send(mgmt_server, "/v2/auth", data, {"Content-Type": FORM_TYPE})
    _assert_answer(status, body, 413, "the fake reads at most")


def test_oversized_chunked_body_is_413(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    def chunks() -> object:
        yield _form(username=mgmt_account.username) + b"&key="
        for _ in range(20):
            yield b"k" * 8192

    parts = urlsplit(mgmt_server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    connection.request(
        "POST",
        "/v2/auth",
        chunks(),  # type: ignore[arg-type]
        {"Content-Type": FORM_TYPE},
        encode_chunked=True,
    )
    response = connection.getresponse()
    payload = json.loads(response.read())
    _assert_answer(response.status, payload, 413)


def test_oversized_body_to_a_route_is_413_before_its_handler(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    route = mgmt_server.route("POST", "/api/upload")
    route.respond_with_json({"stored": True})
    status, body, _ = _send(
        mgmt_server, "/api/upload", b"x" * 100_000, {"Content-Type": "application/octet-stream"}
    )
    _assert_answer(status, body, 413)
    assert route.call_count == 0


def test_bad_input_is_recorded_as_an_event(mgmt_server: MgmtServer) -> None:
    _send(mgmt_server, "/v2/auth", b"x=1", {"Content-Type": "text/plain"})
    [event] = mgmt_server.events
    assert isinstance(event, BadRequest)
    assert (event.method, event.path, event.status) == ("POST", "/v2/auth", 415)
    assert "text/plain" in event.reason


# -- credentials on protected calls --------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "needle"),
    [
        ("Bearer", "Bearer"),
        ("Bearer  ", "Bearer"),
        ("garbage", "is not 'Bearer <token>'"),
        ("Basic dXNlcjpwYXNz", "the Authorization scheme is 'Basic'"),
        ("Token abc.def.ghi", "the Authorization scheme is 'Token'"),
        ("Bearer abc def", "contains a space"),
        ("Bearer \u00e9\u00e9\u00e9", ""),
    ],
)
def test_garbage_or_wrong_scheme_authorization_is_401_json(
    mgmt_server: MgmtServer, authorization: str, needle: str
) -> None:
    route = mgmt_server.route("GET", "/api/x")
    route.respond_with_json({"reached": True})
    status, body, _ = _send(
        mgmt_server,
        "/api/x",
        None,
        {"Authorization": authorization},
        method="GET",
    )
    _assert_answer(status, body, 401, needle)
    assert body["returnCode"] == 1401
    assert route.call_count == 0


def test_two_authorization_headers_are_refused(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", "/api/x").respond_with_json({})
    parts = urlsplit(mgmt_server.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
    connection.putrequest("GET", "/api/x")
    connection.putheader("Authorization", "Bearer a.b.c")
    connection.putheader("Authorization", "Bearer d.e.f")
    connection.endheaders()
    with contextlib.closing(connection):
        response = connection.getresponse()
        body = json.loads(response.read())
    _assert_answer(response.status, body, 401, "2 Authorization values", "send exactly one")


def test_v1_cookie_without_utk_is_401_json(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_body: bytes
) -> None:
    mgmt_server.route("GET", "/v1/x").respond_with_json({})
    _, _, login = _send(mgmt_server, "/v1/login", v1_body, {"Content-Type": FORM_TYPE})
    session_line = (login.headers.get_all("Set-Cookie") or [""])[0]
    session_id = session_line.split(";")[0].removeprefix("JSESSIONID=")
    status, body, _ = _send(
        mgmt_server, "/v1/x", None, {"Cookie": f"JSESSIONID={session_id}"}, method="GET"
    )
    _assert_answer(status, body, 401, "the utk query parameter is missing")


def test_garbage_cookie_header_is_401_json(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", "/v1/x").respond_with_json({})
    status, body, _ = _send(
        mgmt_server, "/v1/x?utk=u", None, {"Cookie": ";;;=;JSESSIONID"}, method="GET"
    )
    _assert_answer(status, body, 401, "no JSESSIONID cookie was sent")


def test_a_sweep_of_small_mistakes_never_gets_a_5xx(
    mgmt_server: MgmtServer, v2_body: bytes
) -> None:
    # A sweep of small mistakes in one test; each must be a 4xx.
    cases: list[tuple[bytes | None, dict[str, str]]] = [
        (b"%", {"Content-Type": FORM_TYPE}),
        (b"&&&", {"Content-Type": FORM_TYPE}),
        (b"=", {"Content-Type": FORM_TYPE}),
        (b"username=&key=", {"Content-Type": FORM_TYPE}),
        (b"username=%zz&key=%", {"Content-Type": FORM_TYPE}),
        (b"\x00\x01", {"Content-Type": FORM_TYPE}),
        (v2_body, {"Content-Type": ";;;"}),
        (None, {"Content-Type": FORM_TYPE}),
    ]
    for data, headers in cases:
        for path in ("/v2/auth", "/v1/login", "/v1/logout"):
            status, body, _ = _send(mgmt_server, path, data, headers)
            assert 400 <= status < 500, (path, data, headers, body)
            assert body.keys() >= {"returnCode", "message"}
