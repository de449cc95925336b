"""Issue 9: tokens and HTTP parsing as strict as the RFCs, over a real socket.

Raw sockets where an HTTP library would fix the mistake behind the caller's back (a
missing Host, repeated headers, odd whitespace), requests where a real client's view
matters (a 413 it can read).
"""

from __future__ import annotations

import base64
import json
import re
import socket
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

import pytest
import requests

from pytest_mgmtauth import Account, ApiCall, BadRequest, MgmtServer

FORM = "application/x-www-form-urlencoded"


def _address(server: MgmtServer) -> tuple[str, int]:
    parts = urlsplit(server.url)
    return parts.hostname or "", parts.port or 0


def _read_to_eof(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection. A socket timeout
    (the connection was held open) fails the test; a reset after the answer counts as
    closed."""
    chunks = []
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        chunks.append(data)
        answer = b"".join(chunks)
        head, end, body = answer.partition(b"\r\n\r\n")
        if end and b"\r\nconnection: keep-alive\r\n" in head.lower() + b"\r\n":
            # A kept-alive answer: complete once its Content-Length has arrived.
            length = re.search(rb"\r\ncontent-length: *(\d+)", head.lower())
            if length and len(body) >= int(length.group(1)):
                break
    return b"".join(chunks)


def _exchange(server: MgmtServer, raw: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    """Send ``raw`` as it is and read the answer to EOF (the server closes every
    connection after its answer); no half-close, so a held connection would show."""
    with socket.create_connection(_address(server), timeout=10) as sock:
        sock.sendall(raw)
        answer = _read_to_eof(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, json.loads(body)


def _request(method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", *(f"{name}: {value}" for name, value in headers)]
    head = "\r\n".join(lines).encode("latin-1")
    return head + b"\r\n\r\n" + body


def _form(account: Account) -> bytes:
    return urlencode({"username": account.username, "key": account.api_key}).encode()


# -- forged JWT headers (must fix 1) -----------------------------------------------------


def _with_header(token: str, header: object) -> str:
    encoded = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    return encoded + "." + token.split(".", 1)[1]


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"alg": "RS512", "kid": 1}, "'kid' that is 1, not a string"),
        ({"alg": "RS512", "kid": None}, "'kid' that is null"),
        ({"alg": "RS512", "crit": ["exp"]}, "has 'crit'"),
        ({"alg": "RS512", "crit": []}, "has 'crit'"),
        ({"crit": ["exp"]}, "algorithm is null"),
    ],
)
def test_forged_jwt_header_is_401_with_a_reason_not_500(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    get_token: Callable[[Account], str],
    http: requests.Session,
    header: object,
    reason: str,
) -> None:
    # Was 500 "failed internally (InvalidTokenError...)" and an error at teardown.
    mgmt_server.route("GET", "/api/items").respond_with_json({"items": []})
    forged = _with_header(get_token(mgmt_account), header)
    response = http.get(
        f"{mgmt_server.url}/api/items", headers={"Authorization": f"Bearer {forged}"}
    )
    assert response.status_code == 401, response.text
    body = response.json()
    assert body["returnCode"] == 1401
    assert reason in body["message"]
    event = mgmt_server.events[-1]
    assert isinstance(event, ApiCall)
    assert (event.status, event.return_code) == (401, 1401)
    assert not mgmt_server._binding.errors


# -- whitespace around the bearer token ------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "diagnosis"),
    [
        ("Bearer {token}\xa0", "a no-break space (U+00A0) at its end, after the token"),
        ("\xa0Bearer {token}", "a no-break space (U+00A0) at its start, before the scheme"),
        ("Bearer\xa0{token}", "a no-break space (U+00A0) between 'Bearer' and the token"),
        ("Bearer {token}\x0b", "a vertical tab (U+000B) at its end"),
        ("Bearer {token}\x85", "a next-line character (NEL) (U+0085) at its end"),
        ("Bearer \x1c{token}", "a file separator (U+001C) between 'Bearer' and the token"),
        ("Bearer {token}\x0c", "a form feed (U+000C) at its end"),
        ("Bearer {token}\xc2\xa0", "a no-break space (U+00A0, sent as UTF-8) at its end"),
        ("\xe2\x80\x83Bearer {token}", "an em space (U+2003, sent as UTF-8) at its start"),
        ("Bearer {head}\xa0{tail}", "a no-break space (U+00A0) inside the value (character 30)"),
    ],
    ids=[
        "nbsp after",
        "nbsp before",
        "nbsp between",
        "vt",
        "nel",
        "fs",
        "ff",
        "utf8 nbsp",
        "em",
        "nbsp inside",
    ],
)
def test_bearer_with_whitespace_other_than_sp_or_htab_is_refused(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    get_token: Callable[[Account], str],
    template: str,
    diagnosis: str,
) -> None:
    # str.strip() took all of these away and the token was accepted; RFC 9110 5.5
    # allows only SP and HTAB around a field value.
    route = mgmt_server.route("GET", "/api/items")
    route.respond_with_json({"items": []})
    token = get_token(mgmt_account)
    value = template.format(token=token, head=token[:22], tail=token[22:])
    raw = _request("GET", "/api/items", [("Host", "x"), ("Authorization", value)])
    status, _, body = _exchange(mgmt_server, raw)
    assert (status, body["returnCode"]) == (401, 1401), body
    message = str(body["message"])
    assert diagnosis in message, message
    assert token not in message
    event = mgmt_server.events[-1]
    assert isinstance(event, ApiCall)
    # The token found in the header anyway names the account the refusal belongs to.
    assert event.username == mgmt_account.username
    assert route.call_count == 0


@pytest.mark.parametrize(
    "template", ["Bearer {token} \t", "\t Bearer \t{token}", "Bearer  {token}"]
)
def test_bearer_with_sp_and_htab_around_it_is_fine(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    get_token: Callable[[Account], str],
    template: str,
) -> None:
    mgmt_server.route("GET", "/api/items").respond_with_json({"items": []})
    token = get_token(mgmt_account)
    raw = _request(
        "GET", "/api/items", [("Host", "x"), ("Authorization", template.format(token=token))]
    )
    status, _, body = _exchange(mgmt_server, raw)
    assert (status, body) == (200, {"items": []})


# -- the request line (RFC 9112 3) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("CONNECT  HTTP/1.1", "it has no target"),
        ("GET  HTTP/1.1", "it has no target"),
        ("GET /v2/things", "it has no HTTP version (HTTP/0.9 is not served)"),
        ("GET", "it is one word"),
    ],
)
def test_a_request_line_without_three_words_is_an_http11_400(
    mgmt_server: MgmtServer, line: str, why: str
) -> None:
    # http.server took these for HTTP/0.9 and answered a bare JSON body, no status line
    # ("GET  HTTP/1.1" was even served, as a GET of "/HTTP/1.1").
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(f"{line}\r\nHost: x\r\n\r\n".encode())
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:200]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"\r\nConnection: close" in head
    message = json.loads(body)["message"]
    assert message.startswith(f"Malformed request line {line!r}: {why}; ")
    assert "METHOD SP target SP HTTP/1.1" in message
    assert mgmt_server.requests == []  # nothing was served


# -- Host and Content-Length (RFC 9112) --------------------------------------------------------


def test_http11_request_without_host_is_400(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    raw = _request(
        "POST",
        "/v2/auth",
        [("Content-Type", FORM), ("Content-Length", str(len(_form(mgmt_account))))],
        _form(mgmt_account),
    )
    status, headers, body = _exchange(mgmt_server, raw)
    assert (status, body["returnCode"]) == (400, 1400)
    assert "has no Host header" in str(body["message"])
    assert headers["connection"] == "close"
    assert mgmt_server.auth_count() == 0
    event = mgmt_server.events[-1]
    assert isinstance(event, BadRequest)
    assert (event.path, event.status) == ("/v2/auth", 400)


def test_http10_request_without_host_is_fine(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    form = _form(mgmt_account)
    raw = (
        b"POST /v2/auth HTTP/1.0\r\nContent-Type: "
        + FORM.encode()
        + b"\r\nContent-Length: "
        + str(len(form)).encode()
        + b"\r\n\r\n"
        + form
    )
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 200, body
    assert "token" in body


def test_two_host_headers_are_400(mgmt_server: MgmtServer) -> None:
    raw = _request("GET", "/api/items", [("Host", "a"), ("Host", "b")])
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 400
    assert "2 Host headers" in str(body["message"])


@pytest.mark.parametrize("second", ["7", "99999"], ids=["equal", "different"])
def test_two_content_length_headers_are_400_even_when_equal(
    mgmt_server: MgmtServer, mgmt_account: Account, second: str
) -> None:
    # The last one won: "Content-Length: 99999" then "7" read a 7-byte body.
    form = _form(mgmt_account)
    raw = _request(
        "POST",
        "/v2/auth",
        [
            ("Host", "x"),
            ("Content-Type", FORM),
            ("Content-Length", str(len(form))),
            ("Content-Length", second if second != "7" else str(len(form))),
        ],
        form,
    )
    status, _, body = _exchange(mgmt_server, raw)
    assert (status, body["returnCode"]) == (400, 1400), body
    kind = "equal values" if second == "7" else "different values"
    assert f"2 Content-Length headers ({kind})" in str(body["message"])
    assert mgmt_server.auth_count() == 0


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ("-1", "it has a sign ('-')"),
        ("+7", "it has a sign ('+')"),
        ("0x10", "4 character(s), not all digits"),
        ("7, 7", "several values separated by commas"),
        ("\xb2", "1 character(s), not all digits"),  # '²': str.isdigit() says True
        ("S3cretPassw0rd", "14 character(s), not all digits"),
    ],
)
def test_content_length_that_is_not_digits_is_400(
    mgmt_server: MgmtServer, value: str, what: str
) -> None:
    raw = _request(
        "POST", "/v2/auth", [("Host", "x"), ("Content-Type", FORM), ("Content-Length", value)]
    )
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 400
    message = str(body["message"])
    assert "Content-Length header is not a number of bytes" in message
    assert what in message
    assert value not in message or len(value) < 3  # the value itself is not repeated


# -- two Cookie headers ---------------------------------------------------------------------------


@pytest.mark.parametrize("first", [True, False], ids=["first line", "second line"])
def test_jsessionid_in_either_of_two_cookie_headers_is_found(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    v1_login: Callable[[Account], tuple[str, str]],
    first: bool,
) -> None:
    # Werkzeug joined the lines with ",": "JSESSIONID=<id>,theme=dark" read as one
    # cookie value "<id>,theme=dark", and the session was not found.
    mgmt_server.route("GET", "/v1/items").respond_with_json({"v1": True})
    session_id, utk = v1_login(mgmt_account)
    lines = [("Cookie", f"JSESSIONID={session_id}"), ("Cookie", "theme=dark")]
    if not first:
        lines.reverse()
    raw = _request("GET", f"/v1/items?utk={utk}", [("Host", "x"), *lines])
    status, _, body = _exchange(mgmt_server, raw)
    assert (status, body) == (200, {"v1": True})


# -- a 413 closes the connection at once ----------------------------------------------------------


def test_413_for_a_large_body_closes_the_connection_at_once(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # A client announces 20 MB, sends 1 MB of it and waits for the answer. Werkzeug's
    # drain then blocked on a 10 MB read until the 30 s stall timeout; now the server
    # answers 413 and closes: _read_to_eof sees EOF (or a reset) long before its 10 s
    # timeout would fail the test.
    head = _request(
        "POST",
        "/v2/auth",
        [("Host", "x"), ("Content-Type", FORM), ("Content-Length", str(20 * 1024 * 1024))],
    )
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(head + b"k" * (1024 * 1024))
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"\r\nConnection: close\r\n" in answer
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert body["returnCode"] == 413


def test_client_that_sends_a_whole_20mb_body_reads_the_413(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    # The brief drain still discards what a client sends while it sends it, so a client
    # that writes the whole body before reading gets the 413, not a reset.
    response = http.post(
        f"{mgmt_server.url}/v2/auth",
        data=b"k" * (20 * 1024 * 1024),
        headers={"Content-Type": FORM},
    )
    assert response.status_code == 413
    assert response.headers["Connection"] == "close"
    assert response.json()["returnCode"] == 413


@pytest.mark.mgmtauth(https=True)
def test_over_https_a_client_that_sends_a_whole_20mb_body_reads_the_413(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    # The brief drain reads through the TLS layer as well.
    response = http.post(
        f"{mgmt_server.url}/v2/auth",
        data=b"k" * (20 * 1024 * 1024),
        headers={"Content-Type": FORM},
        verify=mgmt_server.ca_bundle,
    )
    assert response.status_code == 413
    assert response.json()["returnCode"] == 413
