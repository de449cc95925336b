"""Message framing as RFC 9112 says (issue 29, item 13), over a raw socket: chunk
extensions and trailer fields are read and ignored (they got 400), a transfer coding the
fake does not implement gets 501 (``gzip, chunked`` was served with gzip ignored), a body
chunked twice, Transfer-Encoding beside Content-Length or in HTTP/1.0, a NUL in a header
value and a header line that is not ``Name: value`` get 400 saying why; never a 500."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlencode, urlsplit

import pytest
from werkzeug import Request, Response

from pytest_mgmtauth import Account, BadRequest, MgmtServer
from pytest_mgmtauth._service.records import status_code

FORM = "application/x-www-form-urlencoded"


def _exchange(server: MgmtServer, raw: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    """Send ``raw``, half-close, read the answer to EOF."""
    parts = urlsplit(server.url)
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, json.loads(body)


def _form(account: Account) -> bytes:
    return urlencode({"username": account.username, "key": account.api_key}).encode()


def _auth(head: list[str], body: bytes, *, version: str = "HTTP/1.1") -> bytes:
    lines = [f"POST /v2/auth {version}", "Host: x", f"Content-Type: {FORM}", *head]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _chunks(data: bytes, *, extension: str = "", trailer: str = "") -> bytes:
    half = len(data) // 2
    out = b""
    for piece in (data[:half], data[half:]):
        out += f"{len(piece):x}{extension}\r\n".encode() + piece + b"\r\n"
    return out + f"0{extension}\r\n{trailer}\r\n".encode()


# -- chunk extensions and trailer fields are allowed (RFC 9112 7.1.1, 7.1.2) -------------


@pytest.mark.parametrize(
    ("extension", "trailer"),
    [
        (";a=b", ""),
        (" ; name", ""),
        (';sig="quoted; \\"value\\""', ""),
        (";a=b;c", ""),
        ("", "X-Checksum: abc\r\n"),
        ("", "X-One: 1\r\nX-Two:\r\n"),
        (";a=b", "X-Checksum: abc\r\n"),
    ],
    ids=["ext", "ext-bws", "ext-quoted", "two-exts", "trailer", "two-trailers", "both"],
)
def test_chunk_extensions_and_trailer_fields_are_read_and_ignored(
    mgmt_server: MgmtServer, mgmt_account: Account, extension: str, trailer: str
) -> None:
    raw = _auth(
        ["Transfer-Encoding: chunked"],
        _chunks(_form(mgmt_account), extension=extension, trailer=trailer),
    )
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 200, body
    assert mgmt_server.auth_count() == 1


# -- transfer codings (RFC 9112 6.1, 6.3, 7) ------------------------------------------------


@pytest.mark.parametrize(
    ("coding", "status", "said"),
    [
        ("gzip, chunked", 501, "does not implement the transfer coding 'gzip'"),
        ("deflate,chunked", 501, "does not implement the transfer coding 'deflate'"),
        ("x-custom, chunked", 501, "does not implement an unknown transfer coding"),
        ("chunked, chunked", 400, "lists chunked 2 times"),
        ("chunked, gzip", 400, "chunked must be the last coding"),
        ("gzip", 400, "chunked must be the last coding"),
        ("", 400, "the Transfer-Encoding header is empty"),
        ("chunked;q=1", 400, "takes no parameters"),
    ],
)
def test_transfer_codings_other_than_chunked_alone_are_refused(
    mgmt_server: MgmtServer, mgmt_account: Account, coding: str, status: int, said: str
) -> None:
    raw = _auth([f"Transfer-Encoding: {coding}"], _chunks(_form(mgmt_account)))
    got, headers, body = _exchange(mgmt_server, raw)
    assert (got, body["returnCode"]) == (status, status_code(status)), body
    assert said in str(body["message"])
    assert headers["connection"] == "close"
    assert mgmt_server.auth_count() == 0
    event = mgmt_server.events[-1]
    assert isinstance(event, BadRequest)
    assert event.status == status


def test_two_transfer_encoding_lines_are_one_list(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    raw = _auth(
        ["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"], _chunks(_form(mgmt_account))
    )
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 400
    assert "lists chunked 2 times" in str(body["message"])


def test_transfer_encoding_beside_content_length_is_400(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    data = _chunks(_form(mgmt_account))
    raw = _auth(["Transfer-Encoding: chunked", f"Content-Length: {len(data)}"], data)
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 400
    assert "both Transfer-Encoding and Content-Length" in str(body["message"])
    assert mgmt_server.auth_count() == 0


def test_transfer_encoding_in_http10_is_400(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    raw = _auth(["Transfer-Encoding: chunked"], _chunks(_form(mgmt_account)), version="HTTP/1.0")
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 400
    assert "HTTP/1.0 request has a Transfer-Encoding header" in str(body["message"])


# -- malformed chunked bodies: 400 saying why -------------------------------------------


@pytest.mark.parametrize(
    ("chunked", "said"),
    [
        (b"0x5\r\nabcde\r\n0\r\n\r\n", "a chunk size is not hexadecimal digits"),
        (b"+5\r\nabcde\r\n0\r\n\r\n", "a chunk size is not hexadecimal digits"),
        (b"5_0\r\nabcde\r\n0\r\n\r\n", "a chunk size is not hexadecimal digits"),
        (b";a=b\r\nabcde\r\n0\r\n\r\n", "a chunk-size line has no size"),
        (b"5;\r\nabcde\r\n0\r\n\r\n", "a chunk extension is not ';name' or ';name=value'"),
        (b'5;a="open\r\nabcde\r\n0\r\n\r\n', "a chunk extension is not"),
        (b"3\r\nabcde\r\n0\r\n\r\n", "not followed by CRLF"),
        (b"5\r\nabcde\r\n", "ended before a chunk-size line"),
        (b"5\r\nabc", "ended in the middle of a chunk"),
        (b"5\r\nabcde\r\n0\r\nX-T : 1\r\n\r\n", "a trailer field after the last chunk"),
        (b"5\r\nabcde\r\n0\r\nX-T: 1\r\n", "ended before the trailer section"),
        (b"1" * 20 + b"\r\nabcde\r\n0\r\n\r\n", "a chunk size is too large"),
        (b"5;" + b"a" * 5000 + b"\r\nabcde\r\n0\r\n\r\n", "longer than 4096 bytes"),
    ],
)
def test_a_malformed_chunked_body_is_400_saying_why(
    mgmt_server: MgmtServer, chunked: bytes, said: str
) -> None:
    raw = _auth(["Transfer-Encoding: chunked"], chunked)
    status, _, body = _exchange(mgmt_server, raw)
    assert (status, body["returnCode"]) == (400, 1400), body
    assert "the chunked request body is malformed" in str(body["message"])
    assert said in str(body["message"])
    event = mgmt_server.events[-1]
    assert isinstance(event, BadRequest)


def test_a_chunked_body_on_a_protected_route(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    seen: list[bytes] = []

    def echo(request: Request) -> Response:
        seen.append(request.get_data())
        return Response("{}", content_type="application/json")

    mgmt_server.route("PUT", "/api/echo").respond_with_handler(echo)
    status, _, body = _exchange(
        mgmt_server, _auth(["Transfer-Encoding: chunked"], _chunks(_form(mgmt_account)))
    )
    token = str(body["token"])
    raw = (
        f"PUT /api/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode() + _chunks(b'{"a": 1}', extension=";x=y", trailer="X-Sum: 1\r\n")
    status, _, _ = _exchange(mgmt_server, raw)
    assert status == 200
    assert seen == [b'{"a": 1}']


# -- header lines (RFC 9110 5.5, RFC 9112 5) ---------------------------------------------


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("X-Note: a\x00b", "the X-Note header contains a NUL byte"),
        ("X-Note: a\rb", "a header line is not 'Name: value'"),
        ("X-Note : ab", "the header line of 'X-Note' has whitespace between the name and"),
        ("Content-Length : 3", "the header line of 'Content-Length' has whitespace"),
        ("X-\x00Note: ab", "a header line is not 'Name: value'"),
        ("Bad Name: x", "a header line is not 'Name: value'"),
        (": novalue", "a header line is not 'Name: value'"),
    ],
    ids=["nul", "bare-cr", "ws-before-colon", "ws-before-colon-cl", "nul-name", "space", "no-name"],
)
def test_a_header_line_that_is_not_a_field_is_400(
    mgmt_server: MgmtServer, mgmt_account: Account, line: str, said: str
) -> None:
    form = _form(mgmt_account)
    raw = _auth([line, f"Content-Length: {len(form)}"], form)
    status, _, body = _exchange(mgmt_server, raw)
    assert (status, body["returnCode"]) == (400, 1400), body
    assert said in str(body["message"])
    assert mgmt_server.auth_count() == 0


def test_a_folded_header_line_is_still_read(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    # RFC 9112 5.2 lets a server replace obs-fold with a space instead of refusing it.
    form = _form(mgmt_account)
    raw = _auth(["X-Note: a", " b", f"Content-Length: {len(form)}"], form)
    status, _, body = _exchange(mgmt_server, raw)
    assert status == 200, body
