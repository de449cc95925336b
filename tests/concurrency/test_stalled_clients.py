"""A client that stalls mid-request blocks nobody else.

Each stalled connection sends the first part of a valid ``/v2/auth`` request (nothing at
all, half its headers, or its headers and half of a body whose Content-Length promises
more) and stops. While those connections hang, other clients run whole flows under a
real-time guard. Then each stalled client sends the rest and gets its token: the fake
neither dropped nor confused the stalled conversations.
"""

from __future__ import annotations

import socket
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from pytest_mgmtauth import ApiCall, BadRequest, TokenIssued

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_mgmtauth import Account, MgmtServer

STALLED = 3

schemes = pytest.mark.parametrize(
    "https",
    [
        pytest.param(False, id="http"),
        pytest.param(True, id="https", marks=pytest.mark.mgmtauth(https=True)),
    ],
)


def auth_request(server: MgmtServer, account: Account) -> bytes:
    body = urlencode({"username": account.username, "key": account.api_key}).encode()
    host = urlsplit(server.url).netloc
    head = (
        f"POST /v2/auth HTTP/1.1\r\nHost: {host}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\nUser-Agent: stalled-client\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    return head + body


def split_point(request: bytes, stall: str) -> int:
    head_end = request.index(b"\r\n\r\n") + 4
    if stall == "silent":
        return 0
    if stall == "half-headers":
        return request.index(b"Content-Type")
    assert stall == "short-body"  # Content-Length promises more than was sent
    return head_end + (len(request) - head_end) // 2


class StalledClient:
    """A raw connection that has sent ``request[:split]`` and waits."""

    def __init__(self, server: MgmtServer, request: bytes, split: int) -> None:
        parts = urlsplit(server.url)
        assert parts.hostname is not None
        assert parts.port is not None
        self.request, self.split = request, split
        self.raw = socket.create_connection((parts.hostname, parts.port), timeout=15)
        self.context = server.client_ssl_context()
        self.hostname = parts.hostname
        self.sock: socket.socket = self.raw
        if self.context is not None and split > 0:
            # TLS first, then stall inside it; with split == 0 the TCP connection never
            # even starts the TLS handshake.
            self.sock = self.context.wrap_socket(self.raw, server_hostname=self.hostname)
        self.sock.sendall(request[:split])

    def finish(self) -> tuple[int, bytes]:
        """Send the rest, read the whole answer (the fake closes the connection)."""
        if self.context is not None and self.sock is self.raw:
            self.sock = self.context.wrap_socket(self.raw, server_hostname=self.hostname)
        self.sock.sendall(self.request[self.split :])
        answer = b""
        while chunk := self.sock.recv(65536):
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        return int(head.split()[1]), body

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def stalled(mgmt_server: MgmtServer) -> Any:
    opened: list[StalledClient] = []

    def open_stalled(account: Account, stall: str) -> StalledClient:
        request = auth_request(mgmt_server, account)
        client = StalledClient(mgmt_server, request, split_point(request, stall))
        opened.append(client)
        return client

    yield open_stalled
    for client in opened:
        client.close()


@schemes
@pytest.mark.parametrize("stall", ["silent", "half-headers", "short-body"])
def test_stalled_clients_block_nobody_and_finish_later(
    mgmt_server: MgmtServer,
    stalled: Callable[[Account, str], StalledClient],
    within: Callable[..., Any],
    stall: str,
    https: bool,
) -> None:
    mgmt_server.route("GET", "/api/devices").respond_with_json({"devices": []})
    stallers = [mgmt_server.add_account() for _ in range(STALLED)]
    connections = [stalled(account, stall) for account in stallers]
    healthy = mgmt_server.add_account()

    def healthy_flow() -> list[int]:
        with httpx.Client(verify=mgmt_server.client_ssl_context() or True, timeout=15) as c:
            auth = c.post(
                f"{mgmt_server.url}/v2/auth",
                data={"username": healthy.username, "key": healthy.api_key},
            )
            bearer = {"Authorization": f"Bearer {auth.json()['token']}"}
            calls = [c.get(f"{mgmt_server.url}/api/devices", headers=bearer) for _ in range(3)]
            return [auth.status_code] + [r.status_code for r in calls]

    statuses = within(healthy_flow, what=f"a v2 flow beside {STALLED} {stall} clients")
    assert statuses == [200, 200, 200, 200]
    # Only the healthy client has got anywhere so far.
    assert [e.username for e in mgmt_server.events if isinstance(e, TokenIssued)] == [
        healthy.username
    ]

    finished = within(
        lambda: [connection.finish() for connection in connections],
        what="the stalled clients finishing their requests",
    )
    assert [status for status, _ in finished] == [200] * STALLED
    assert all(b'"token"' in body for _, body in finished)
    issued = [e.username for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert sorted(issued, key=str) == sorted([healthy.username, *(a.username for a in stallers)])
    assert len([e for e in mgmt_server.events if isinstance(e, ApiCall)]) == 3


@pytest.mark.mgmtauth(https=True)
def test_a_tls_handshake_that_fails_or_a_plain_http_request_on_the_https_port_harms_nobody(
    mgmt_server: MgmtServer, within: Callable[..., Any], mgmt_account: Account
) -> None:
    parts = urlsplit(mgmt_server.url)
    assert parts.hostname is not None
    assert parts.port is not None
    address = (parts.hostname, parts.port)

    # Plain HTTP spoken to the HTTPS port: the handshake fails, the client gets a plain
    # 400 that says the fake serves HTTPS, and that connection closes.
    with socket.create_connection(address, timeout=15) as plain:
        plain.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

        def read_to_close() -> bytes:
            data = b""
            while chunk := plain.recv(65536):
                data += chunk
            return data

        answer = within(read_to_close, what="answering and closing a non-TLS connection")
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert b"this fake serves HTTPS" in answer

    # A client that does not trust the test CA aborts its handshake.
    untrusting = ssl.create_default_context()
    with (
        socket.create_connection(address, timeout=15) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        untrusting.wrap_socket(raw, server_hostname=parts.hostname)

    # Garbage after a ClientHello's first bytes.
    with socket.create_connection(address, timeout=15) as garbage:
        garbage.sendall(b"\x16\x03\x01\x00\x05hello-not-tls")
        within(lambda: garbage.recv(65536), what="closing a garbage TLS connection")

    trusting = mgmt_server.client_ssl_context()
    assert trusting is not None  # https=True
    with httpx.Client(verify=trusting, timeout=15) as client:
        reply = within(
            lambda: client.post(
                f"{mgmt_server.url}/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            ),
            what="a v2 auth after failed handshakes",
        )
    assert reply.status_code == 200
    assert [type(e) for e in mgmt_server.events] == [BadRequest, TokenIssued]
