"""Slow, stalled, vanishing and never-TLS clients: the fake answers each as well as it
can, blocks nobody else meanwhile, raises nothing inside, and keeps serving.

Socket timeouts here are hang guards (a test fails instead of hanging), never timing
assertions.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import time
from urllib.parse import urlencode

import pytest
from hostile_support import World, build_request, exchange

from pytest_mgmtauth import MgmtServer

FORM = "application/x-www-form-urlencoded"
GUARD = 10.0  # seconds: a hang guard only


def auth_request(world: World) -> bytes:
    body = urlencode({"username": world.full.username, "key": world.full.api_key}).encode()
    raw: bytes = build_request("POST", "/v2/auth", [("Host", "x"), ("Content-Type", FORM)], body)
    return raw


def _closing(raw: bytes) -> bytes:
    """``raw`` asking the server to close after its answer (these clients read to EOF;
    the fake keeps connections alive otherwise)."""
    line, _, rest = raw.partition(b"\r\n")
    return line + b"\r\nConnection: close\r\n" + rest


def test_slow_client_byte_by_byte_gets_its_token(world: World) -> None:
    raw = _closing(auth_request(world))
    world.side_requests += 1
    with socket.create_connection(world.address, timeout=GUARD) as sock:
        for i in range(len(raw)):
            sock.sendall(raw[i : i + 1])
            if i % 16 == 0:
                time.sleep(0.001)
        answer = sock.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 200 ")
    token = json.loads(answer.partition(b"\r\n\r\n")[2])["token"]
    assert token.count(".") == 2
    world.secrets.add(token)
    assert not world.errors


def _stalled_connections(world: World) -> list[socket.socket]:
    """Eight ways to stop mid-request, each left open."""
    full = _closing(auth_request(world))
    head, _, body = full.partition(b"\r\n\r\n")
    partials = [
        b"",  # connected, silent
        b"PO",  # half a method
        b"POST /v2/auth HTTP/1.1\r\n",  # request line, no headers
        head[: len(head) // 2],  # half the headers
        head + b"\r\n\r\n",  # headers, none of the body
        head + b"\r\n\r\n" + body[:5],  # part of the body
        build_request(
            "GET", "/api/items", [("Host", "x"), ("Authorization", f"Bearer {world.token}")]
        )[:-2],
        build_request(
            "PUT",
            "/api/echo",
            [("Host", "x"), ("Authorization", f"Bearer {world.token}"), ("Content-Length", "100")],
            content_length=None,
        )
        + b"0123456789",  # protected call, body short of its length
    ]
    stalled = []
    world.side_requests += len(partials)
    for partial in partials:
        sock = socket.create_connection(world.address, timeout=GUARD)
        if partial:
            sock.sendall(partial)
        stalled.append(sock)
    return stalled


def test_stalled_clients_block_nobody(world: World) -> None:
    stalled = _stalled_connections(world)
    try:
        # While eight connections hang mid-request, a correct client is served.
        for _ in range(3):
            answer = world.send(auth_request(world))
            assert answer.status in (200, 429)
            call = world.send(
                build_request(
                    "GET", "/api/items", [("Host", "x"), ("Authorization", f"Bearer {world.token}")]
                )
            )
            assert call.status == 200
        # The stalled protected call has not reached its handler.
        assert world.routes["echo"].call_count == 0
    finally:
        for sock in stalled:
            sock.close()
    assert not world.errors


def test_stalled_clients_that_finish_late_are_answered(world: World) -> None:
    raw = _closing(auth_request(world))
    world.side_requests += 1
    with socket.create_connection(world.address, timeout=GUARD) as sock:
        sock.sendall(raw[:40])
        # Someone else is served in between.
        assert world.send(auth_request(world)).status in (200, 429)
        sock.sendall(raw[40:])
        answer = sock.makefile("rb").read()
    assert answer.split(b" ", 2)[1] in (b"200", b"429")
    if answer.split(b" ", 2)[1] == b"200":
        world.secrets.add(json.loads(answer.partition(b"\r\n\r\n")[2])["token"])


def test_short_body_then_hang_up_is_a_4xx_not_a_crash(world: World) -> None:
    # Content-Length promises 100 bytes, 10 arrive, then the client half-closes.
    raw = build_request(
        "POST",
        "/v2/auth",
        [("Host", "x"), ("Content-Type", FORM), ("Content-Length", "100")],
        content_length=None,
    )
    answer = world.send(raw + b"username=x")
    assert answer.status is not None
    assert 400 <= answer.status < 500


@pytest.mark.parametrize("how", ["close", "reset"])
def test_clients_that_vanish_mid_request(world: World, how: str) -> None:
    world.side_requests += 4
    for cut in (0, 10, 60, 200):
        sock = socket.create_connection(world.address, timeout=GUARD)
        sock.sendall(auth_request(world)[:cut])
        if how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    # The server noticed nothing it should raise about, and still answers.
    world.check_still_serving()
    assert not world.errors


def test_client_that_never_reads_its_answer(world: World) -> None:
    # Ten clients send a full request and never read; the answers are small enough to
    # sit in socket buffers, so no server thread waits on them.
    socks = []
    world.side_requests += 10
    try:
        for _ in range(10):
            sock = socket.create_connection(world.address, timeout=GUARD)
            sock.sendall(
                build_request(
                    "GET", "/api/items", [("Host", "x"), ("Authorization", f"Bearer {world.token}")]
                )
            )
            socks.append(sock)
        world.check_still_serving()
    finally:
        for sock in socks:
            sock.close()
    assert not world.errors


@pytest.mark.mgmtauth(https=True)
def test_https_clients_that_never_speak_tls_block_nobody(mgmt_server: MgmtServer) -> None:
    account = mgmt_server.add_account()
    host, port = mgmt_server.url.removeprefix("https://").split(":")
    address = (host, int(port))
    silent = [socket.create_connection(address, timeout=GUARD) for _ in range(4)]
    garbage = socket.create_connection(address, timeout=GUARD)
    garbage.sendall(b"POST /v2/auth HTTP/1.1\r\n\r\n")  # plain HTTP to the TLS port
    try:
        conn = http.client.HTTPSConnection(
            host, int(port), timeout=GUARD, context=mgmt_server.client_ssl_context()
        )
        conn.request(
            "POST",
            "/v2/auth",
            body=urlencode({"username": account.username, "key": account.api_key}),
            headers={"Content-Type": FORM},
        )
        answer = conn.getresponse()
        assert answer.status == 200
        assert json.loads(answer.read())["token"].count(".") == 2
        conn.close()
    finally:
        for sock in [*silent, garbage]:
            sock.close()
    assert not mgmt_server._binding.errors


def test_exchange_helper_reports_reset_as_no_status(world: World) -> None:
    # The raw client itself: a request line over 64 KiB is refused by http.server (414)
    # or the connection is reset before the answer; neither is a 5xx.
    world.side_requests += 1
    answer = exchange(world.address, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
    assert answer.status in (None, 414)
