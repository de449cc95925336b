"""``mgmt_server.requests`` (issue 29, item 14): every request the fake answered in the
test, oldest first, as it arrived, secrets masked as in events, refused ones included,
and the test it belongs to."""

from __future__ import annotations

import gzip
import json
import random
import re
import socket
import string
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit

import pytest
import requests

import pytest_mgmtauth
from pytest_mgmtauth import Account, MgmtServer, RecordedRequest
from pytest_mgmtauth._http.binding import (
    CUT_MARGIN,
    CUT_MARKER,
    DECOMPRESSED_NOTE,
    REQUEST_LOG_BYTES,
    REQUEST_LOG_HEADER,
    REQUEST_LOG_SIZE,
    LoggedRequests,
    RequestLog,
)
from pytest_mgmtauth._service.accounts import fingerprint

NOW = datetime(2026, 1, 1)


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


def test_the_log_keeps_the_last_requests(mgmt_server: MgmtServer) -> None:
    log = mgmt_server._binding.requests
    for i in range(REQUEST_LOG_SIZE + 5):
        log.add(RecordedRequest("GET", "h", f"/r{i}", "", (), None, 404, datetime.now()))
    logged = mgmt_server.requests
    assert len(logged) == REQUEST_LOG_SIZE
    assert logged[0].path == "/r5"
    assert logged.dropped == 5


def test_each_test_starts_with_an_empty_log(mgmt_server: MgmtServer) -> None:
    assert mgmt_server.requests == []


# -- secrets in any encoding (issue 38, item 1) -------------------------------------------


def _js(value: str) -> str:
    """JavaScript's encodeURIComponent."""
    return quote(value, safe="-_.!~*'()")


def _java(value: str) -> str:
    """Java's URLEncoder.encode(value, UTF_8), and URLSearchParams: '*-._' kept, a space
    as '+', every other byte as %XX."""
    return quote_plus(value, safe="*").replace("~", "%7E")


def _lower_hex(value: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), value)


def _readings(text: str) -> list[str]:
    once, once_plus = unquote(text), unquote_plus(text)
    return [text, once, once_plus, unquote(once), unquote(unquote(once_plus))]


def _logged_text(logged: Sequence[RecordedRequest]) -> str:
    return "\n".join(
        "\n".join([r.host, r.path, r.query, r.body or "", *(f"{k}: {v}" for k, v in r.headers)])
        for r in logged
    )


def test_a_secret_sent_in_any_encoding_is_masked_in_the_log(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    key, password = mgmt_account.api_key, mgmt_account.password
    user = quote(mgmt_account.username, safe="")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    bodies = [
        f"username={user}&key={_js(key)}",
        f"username={user}&key={_java(key)}",
        f"username={user}&key={_lower_hex(quote(key, safe=''))}",
        f"username={user}&key={_lower_hex(_java(key))}",
    ]
    statuses = [
        http.post(f"{mgmt_server.url}/v2/auth", data=body, headers=form).status_code
        for body in bodies
    ]
    assert statuses == [200] * len(bodies)  # each is the key, as the fake reads it
    login = f"username={user}&password={_js(password)}"
    assert http.post(f"{mgmt_server.url}/v1/login", data=login, headers=form).ok
    # The key in a query, and by HTTP Basic with the username (the fake refuses both).
    http.get(f"{mgmt_server.url}/v2/things?key={_lower_hex(_js(key))}")
    basic = http.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": mgmt_account.username, "key": "not-it"},
        auth=(mgmt_account.username, key),
    )
    assert basic.status_code == 401
    logged = mgmt_server.requests
    assert len(logged) == len(bodies) + 3
    text = _logged_text(logged)
    for reading in _readings(text):
        assert key not in reading
        assert password not in reading
    assert logged[0].body == f"username={user}&key={fingerprint(key)}"
    assert logged[-1].header("Authorization") == f"Basic {fingerprint(key)}"


# -- bounded in size (issue 38, item 7) ----------------------------------------------------


def test_the_log_is_bounded_in_size_and_says_what_it_cut_and_dropped(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    # 12 requests with large headers kept 65 MiB.
    big = {f"X-Big-{i}": "v" * 60_000 for i in range(60)}
    for _ in range(8):
        http.get(f"{mgmt_server.url}/nowhere", headers=big)
    logged = mgmt_server.requests
    assert isinstance(logged, LoggedRequests)
    assert len(logged) + logged.dropped == 8
    sizes = [entry.size() for entry in logged]
    assert sum(sizes) <= REQUEST_LOG_BYTES < sum(sizes) + sizes[0]  # as many as fit
    assert logged.dropped >= 1
    value = logged[-1].header("X-Big-0")
    assert value is not None
    marker = CUT_MARKER.format(total=60_000)
    assert value.endswith(marker)
    assert value == "v" * (REQUEST_LOG_HEADER - CUT_MARGIN) + marker
    assert logged[-1].header("Accept") == "*/*"  # short values are kept whole


def test_a_secret_where_a_text_is_cut_is_masked_not_kept_in_part(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    key = mgmt_account.api_key
    log = RequestLog(mgmt_server._service.timeline.redact)
    # The cut goes through the key at each place in turn.
    sent = ["x" * (REQUEST_LOG_HEADER - shift) + key * 3 for shift in range(0, len(key) + 1, 7)]
    for value in sent:
        headers = (("X-Key", value),)
        log.add(RecordedRequest("GET", "h", "/", "", headers, None, 404, datetime.now()))
    logged = log.entries(mgmt_server._service.timeline.redact)
    assert len(logged) == len(sent)
    for value, entry in zip(sent, logged, strict=True):
        kept = entry.headers[0][1]
        assert kept.endswith(CUT_MARKER.format(total=len(value)))
        assert key[:8] not in kept


# -- round 5 (issue 43, part 2): JSON escapes, folded headers ----------------------------


def _json_escaped(value: str, every: bool) -> str:
    """``value`` as Go and Gson write it in a JSON string ('&', '=', '<', '>' as
    \\uXXXX), or with every character so."""
    if every:
        return "".join(f"\\u{ord(char):04x}" for char in value)
    return "".join(f"\\u{ord(char):04x}" if char in "&=<>" else char for char in value)


@pytest.mark.parametrize("every", [False, True], ids=["Go/Gson", "every character"])
def test_a_key_in_json_escapes_is_masked_in_the_log(
    mgmt_server: MgmtServer, http: requests.Session, every: bool
) -> None:
    key = "Ab3&dE9=fGh+ij/KLmn8op&qr=st"  # '&' and '=', as every generated key has
    account = mgmt_server.add_account("go@example.com", api_key=key)
    escaped = _json_escaped(key, every)
    body = f'{{"username": "{account.username}", "key": "{escaped}"}}'
    mgmt_server.route("POST", "/api/keys").respond_with_json({})
    json_type = {"Content-Type": "application/json"}
    http.post(f"{mgmt_server.url}/api/keys", data=body, headers=json_type)  # a route's body
    (entry,) = mgmt_server.requests
    assert entry.body is not None
    assert escaped not in entry.body
    assert key not in json.loads(entry.body)["key"]
    assert fingerprint(key) in entry.body


def test_a_key_split_across_a_folded_header_line_is_masked_in_the_log(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    key = mgmt_account.api_key
    head, tail = key[: len(key) // 2], key[len(key) // 2 :]
    _raw(
        mgmt_server,
        b"GET /nowhere HTTP/1.1\r\nHost: h\r\nX-Key: "
        + head.encode()
        + b"\r\n "
        + tail.encode()
        + b"\r\nConnection: close\r\n\r\n",
    )
    (entry,) = mgmt_server.requests
    value = entry.header("X-Key")
    assert value is not None
    assert re.sub(r"\r?\n[ \t]+", "", value) == fingerprint(key)
    assert head not in value
    assert tail not in value


# -- round 5 (issue 43, part 2): long secrets at a cut, the cost of reading -------------


def test_a_secret_longer_than_the_cut_margin_is_masked_not_kept_in_part(
    mgmt_server: MgmtServer,
) -> None:
    # A 10,000-character secret kept about 2,240 characters where a 16 KiB cut went
    # through it: only the part before the cut was masked, and the margin is 4 KiB.
    secret = "".join(random.Random(43).choices(string.ascii_letters, k=10_000))
    account = mgmt_server.add_account("long@example.com", password=secret)
    log = RequestLog(mgmt_server._service.timeline.redact)
    sent = ["x" * (REQUEST_LOG_HEADER - shift) + secret for shift in range(100, 10_000, 1500)]
    for value in sent:
        log.add(RecordedRequest("GET", "h", "/", "", (("X-Key", value),), None, 404, NOW))
    for value, entry in zip(sent, log.entries(str), strict=True):
        kept = entry.headers[0][1]
        assert kept.endswith(CUT_MARKER.format(total=len(value)))
        assert secret[:40] not in kept
        assert secret[-40:] not in kept
        longest_run = max(map(len, re.findall(r"[A-Za-z]+", kept.replace("x", " "))), default=0)
        assert longest_run < 40, longest_run  # no piece of the secret
    assert account.password == secret


class _CountingMask:
    """A mask that counts the texts it was asked to mask."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> str:
        self.calls += 1
        return text


def _entry(i: int) -> RecordedRequest:
    return RecordedRequest("GET", "h", f"/r{i}", "", (("X-A", "1"),), "body", 200, NOW)


def test_len_and_dropped_of_the_log_mask_nothing_and_an_entry_is_masked_once() -> None:
    # A full 4 MiB log took 6-8 s to read, even for len() or .dropped: every entry was
    # masked on every read.
    log = RequestLog(size=50)
    for i in range(60):
        log.add(_entry(i))
    mask, generation = _CountingMask(), [0]
    logged = log.entries(mask, lambda: generation[0])
    assert (len(logged), logged.dropped) == (50, 10)
    assert mask.calls == 0
    assert logged[-1].path == "/r59"
    per_entry = mask.calls  # method, host, path, query, the header's two, the body
    assert per_entry == 7
    again = log.entries(mask, lambda: generation[0])  # a new read of the same log
    assert again[-1] == logged[-1]
    assert again[0].path == "/r10"
    assert mask.calls == 2 * per_entry  # the last entry from the cache; the first masked
    generation[0] += 1  # a secret was handed out: masked again, once
    assert again[-1].path == "/r59"
    assert again[-1].path == "/r59"
    assert mask.calls == 3 * per_entry
    assert list(again[:2]) == [again[0], again[1]]
    assert again == list(again)
    assert again != []
    assert [again[0]] != again


def test_reading_a_few_entries_of_mgmt_server_requests_masks_only_those(
    mgmt_server: MgmtServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(30):
        mgmt_server._binding.requests.add(_entry(i))
    masker = mgmt_server._service.timeline._masker
    counted = _CountingMask()
    real = masker.mask

    def mask(text: str) -> str:
        counted(text)
        return real(text)

    monkeypatch.setattr(masker, "mask", mask)
    assert len(mgmt_server.requests) == 30
    assert mgmt_server.requests.dropped == 0
    assert counted.calls == 0
    assert mgmt_server.requests[-1].path == "/r29"
    assert mgmt_server.requests[-1].path == "/r29"
    assert counted.calls == 7  # one entry, masked once


# -- round 5 (issue 43, part 2): compressed bodies --------------------------------------


@pytest.mark.parametrize("coding", ["gzip", "deflate", "gzip, gzip"])
def test_a_compressed_body_is_logged_decompressed_with_its_secret_masked(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session, coding: str
) -> None:
    # A gzip body was logged as its compressed bytes: the key could be read back with
    # gzip.decompress(), never masked.
    mgmt_server.route("POST", "/api/upload").respond_with_json({})
    form = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key})
    sent = form.encode()
    for step in coding.split(", "):
        sent = gzip.compress(sent) if step == "gzip" else zlib.compress(sent)
    http.post(
        f"{mgmt_server.url}/api/upload",
        data=sent,
        headers={"Content-Encoding": coding, "Content-Type": "application/x-www-form-urlencoded"},
    )
    (entry,) = mgmt_server.requests
    note = DECOMPRESSED_NOTE.format(coding=coding, sent=len(sent))
    masked = urlencode({"username": mgmt_account.username}) + "&key="
    assert entry.body == note + masked + fingerprint(mgmt_account.api_key)


@pytest.mark.parametrize(
    ("headers", "sent", "why"),
    [
        ({"Content-Encoding": "gzip"}, gzip.compress(b"0" * 1_000_000), "over 65536 bytes"),
        ({"Content-Encoding": "gzip"}, b"SECRET-KEY", "does not decompress as gzip"),
        ({"Content-Encoding": "br"}, b"\x8b\x03\x80SECRET", "cannot decompress 'br'"),
        ({}, gzip.compress(b"key=SECRET")[:-4], "does not decompress as gzip"),
    ],
    ids=["a zip bomb", "not gzip", "brotli", "gzip bytes without the header, cut short"],
)
def test_a_compressed_body_the_log_cannot_read_is_not_kept(
    mgmt_server: MgmtServer,
    http: requests.Session,
    headers: dict[str, str],
    sent: bytes,
    why: str,
) -> None:
    mgmt_server.route("POST", "/api/upload").respond_with_json({})
    http.post(f"{mgmt_server.url}/api/upload", data=sent, headers=headers)
    (entry,) = mgmt_server.requests
    assert entry.body is not None
    assert entry.body.startswith("[a ")
    assert why in entry.body
    assert entry.body.endswith(f"; {len(sent)} bytes sent]")
    assert "SECRET" not in entry.body
