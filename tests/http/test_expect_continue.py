"""``Expect: 100-continue`` (issue 29, item 11): one ``100 Continue``, sent when the
fake reads the body; none when the answer is known without it (a 413 for the
Content-Length, a framing error) or to an HTTP/1.0 client. http.server and Werkzeug each
wrote one, at once, also before a 413."""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

import pytest

from pytest_mgmtauth import Account, MgmtServer

FORM = "application/x-www-form-urlencoded"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: Real seconds to wait for an interim answer that must not come (or come once).
QUIET = 0.3


def _address(server: MgmtServer) -> tuple[str, int]:
    parts = urlsplit(server.url)
    return parts.hostname or "", parts.port or 0


def _received_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sends within ``seconds`` (without closing)."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    finally:
        sock.settimeout(10)
    return data


def _read_to_eof(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _head(path: str, length: int, *, version: str = "HTTP/1.1", extra: str = "") -> bytes:
    return (
        f"POST {path} {version}\r\nHost: x\r\nContent-Type: {FORM}\r\n"
        f"Content-Length: {length}\r\nExpect: 100-continue\r\nConnection: close\r\n{extra}\r\n"
    ).encode()


def test_one_100_continue_then_the_answer(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    form = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key}).encode()
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(_head("/v2/auth", len(form)))
        interim = _received_within(sock, QUIET)
        assert interim == CONTINUE  # exactly one, and nothing else before the body
        sock.sendall(form)
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b"100 Continue" not in answer
    assert mgmt_server.auth_count() == 1


def test_no_100_continue_before_a_413_for_the_content_length(mgmt_server: MgmtServer) -> None:
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(_head("/v2/auth", 10**9))
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"100 Continue" not in answer


def test_no_100_continue_before_a_framing_error(mgmt_server: MgmtServer) -> None:
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(_head("/v2/auth", 5, extra="Content-Length: 5\r\n"))
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"100 Continue" not in answer


def test_no_100_continue_to_an_http10_client(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    form = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key}).encode()
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(_head("/v2/auth", len(form), version="HTTP/1.0") + form)
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b"100 Continue" not in answer


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_protected_call_reads_its_body_after_one_100_continue(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    get_token: Callable[[Account], str],
    chunked: bool,
) -> None:
    token = get_token(mgmt_account)
    mgmt_server.route("PUT", "/api/echo").respond_with_json({"ok": True})
    body = b'{"a": 1}'
    framing = "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {len(body)}\r\n"
    head = (
        f"PUT /api/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\n{framing}Expect: 100-continue\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    sent = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if chunked else body
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(head)
        assert _received_within(sock, QUIET) == CONTINUE
        sock.sendall(sent)
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert b"100 Continue" not in answer


@pytest.mark.parametrize(
    "expect",
    ["Expect: 100-continue\r\n", "Expect: 100-continue, 100-Continue\r\n"],
    ids=["two-lines", "a-list"],
)
def test_100_continue_asked_twice_gets_one_interim_answer(
    mgmt_server: MgmtServer, mgmt_account: Account, expect: str
) -> None:
    # The head already has one Expect line: a second one, or one line listing the
    # expectation twice, still asks for 100-continue (RFC 9110 10.1.1: a list).
    form = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key}).encode()
    head = _head("/v2/auth", len(form), extra=expect)
    if "," in expect:
        head = head.replace(b"Expect: 100-continue\r\n", b"", 1)
    assert head.lower().count(b"100-continue") == 2
    with socket.create_connection(_address(mgmt_server), timeout=10) as sock:
        sock.sendall(head)
        assert _received_within(sock, QUIET) == CONTINUE
        sock.sendall(form)
        answer = _read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b"100 Continue" not in answer
    assert mgmt_server.auth_count() == 1
