"""``mgmt_server.requests`` (issue 29, item 14): every request the fake answered in the
test, oldest first, as it arrived, secrets masked as in events, refused ones included,
and the test it belongs to."""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import datetime
from urllib.parse import quote_plus, urlencode, urlsplit

import pytest
import requests

import pytest_mgmtauth
from pytest_mgmtauth import Account, MgmtServer, RecordedRequest
from pytest_mgmtauth._http.binding import REQUEST_LOG_SIZE
from pytest_mgmtauth._service.accounts import fingerprint


def _raw(server: MgmtServer, raw: bytes) -> bytes:
    parts = urlsplit(server.url)
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_requests_are_logged_as_they_arrived_with_secrets_masked(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    http: requests.Session,
    request: pytest.FixtureRequest,
) -> None:
    mgmt_server.route("GET", "/api/items").respond_with_json({"items": []})
    auth = http.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        headers={"X-Trace": "t1"},
    )
    token = auth.json()["token"]
    http.get(
        f"{mgmt_server.url}/api/items?page=2&q=a%20b",
        headers={"Authorization": f"Bearer {token}"},
    )
    first, second = mgmt_server.requests
    assert isinstance(first, RecordedRequest)
    assert (first.method, first.path, first.query, first.status) == ("POST", "/v2/auth", "", 200)
    assert first.host == urlsplit(mgmt_server.url).netloc
    assert first.header("x-trace") == "t1"
    assert first.header("Content-Type") == "application/x-www-form-urlencoded"
    assert first.test == request.node.nodeid
    assert isinstance(first.at, datetime)
    # The form as sent, its key masked (the URL-encoded spelling too), the username kept.
    assert first.body is not None
    assert first.body.startswith(urlencode({"username": mgmt_account.username}) + "&key=")
    assert mgmt_account.api_key not in first.body
    assert quote_plus(mgmt_account.api_key) not in first.body  # as it was sent
    assert first.body.endswith("&key=" + fingerprint(mgmt_account.api_key))
    # The token in Authorization is masked as in events; the path and query kept raw.
    assert (second.method, second.path, second.query, second.status) == (
        "GET",
        "/api/items",
        "page=2&q=a%20b",
        200,
    )
    authorization = second.header("Authorization")
    assert authorization is not None
    assert authorization.startswith("Bearer ")
    assert token not in authorization
    assert second.body == ""  # a GET without a body: read, empty
    with pytest.raises(AttributeError):
        second.method = "PUT"  # type: ignore[misc]
    assert "RecordedRequest" in pytest_mgmtauth.__all__


def test_refused_requests_are_logged_too(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    v1_login: Callable[[Account], tuple[str, str]],
    http: requests.Session,
) -> None:
    http.get(f"{mgmt_server.url}/nowhere?utk=x")  # an unknown route
    http.post(f"{mgmt_server.url}/v2/auth", json={"username": "x"})  # bad input
    # A framing error (a NUL in a header): answered before anything reads the body.
    _raw(
        mgmt_server,
        b"POST /v2/auth HTTP/1.1\r\nHost: h\r\nX-A: a\x00b\r\nContent-Length: 3\r\n\r\nabc",
    )
    session_id, utk = v1_login(mgmt_account)
    http.get(  # the session's utk and JSESSIONID, masked
        f"{mgmt_server.url}/v1/items?utk={utk}", headers={"Cookie": f"JSESSIONID={session_id}"}
    )
    logged = mgmt_server.requests
    assert [(r.method, r.path, r.status) for r in logged] == [
        ("GET", "/nowhere", 404),
        ("POST", "/v2/auth", 415),
        ("POST", "/v2/auth", 400),
        ("POST", "/v1/login", 200),
        ("GET", "/v1/items", 404),
    ]
    assert logged[0].body is None  # not read: the answer did not need it
    assert logged[2].body is None
    assert logged[2].header("X-A") == "a\x00b"
    assert mgmt_account.password not in str(logged[3].body)
    assert utk not in logged[4].query
    assert session_id not in str(logged[4].header("Cookie"))


def test_a_scripted_reset_is_logged_without_a_status(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    mgmt_server.drop_connection_next()
    with pytest.raises(requests.ConnectionError):
        http.post(
            f"{mgmt_server.url}/v2/auth",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        )
    (entry,) = mgmt_server.requests
    assert (entry.path, entry.status) == ("/v2/auth", None)


def test_the_log_keeps_the_last_requests(
    mgmt_server: MgmtServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = mgmt_server._binding.requests
    for i in range(REQUEST_LOG_SIZE + 5):
        log._entries.append(
            RecordedRequest("GET", "h", f"/r{i}", "", (), None, 404, datetime.now())
        )
    logged = mgmt_server.requests
    assert len(logged) == REQUEST_LOG_SIZE
    assert logged[0].path == "/r5"


def test_each_test_starts_with_an_empty_log(mgmt_server: MgmtServer) -> None:
    assert mgmt_server.requests == []
