"""Bad input at the fake's proxy (the intercept option): each gets a clear refusal
within 5 s (a status of 400 or more with a body that says why, or a closed connection
where no HTTP answer fits), never a 500, no connection left being served, and nothing
forwarded: the only sockets are the test's own, to 127.0.0.1."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest

from pytest_mgmtauth import BadRequest, Event, MgmtServer, TunnelClosed
from pytest_mgmtauth._http.connections import ConnectionServer

pytestmark = pytest.mark.mgmtauth(intercept=True)

#: The refusal must come within this many seconds.
LIMIT = 5.0


def _proxy(server: MgmtServer) -> tuple[str, int]:
    assert server.proxy_url is not None
    parts = urlsplit(server.proxy_url)
    assert parts.hostname == "127.0.0.1"
    assert parts.port is not None
    return parts.hostname, parts.port


def _inner(server: MgmtServer) -> ConnectionServer:
    inner = server._proxy.server  # type: ignore[union-attr]
    assert isinstance(inner, ConnectionServer)
    return inner


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _tunnel_closed(events: list[Event]) -> bool:
    return any(isinstance(e, TunnelClosed) for e in events)


def _exchange(server: MgmtServer, data: bytes) -> tuple[bytes, float]:
    """Send ``data`` to the proxy; what it answered before closing, and how long it took."""
    started = time.monotonic()
    with socket.create_connection(_proxy(server), timeout=LIMIT) as raw:
        raw.sendall(data)
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    return answer, time.monotonic() - started


def _refused(server: MgmtServer, data: bytes, status: int) -> str:
    answer, took = _exchange(server, data)
    assert took < LIMIT
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
    assert b"Connection: close" in head
    message: str = json.loads(body)["message"]
    _until(lambda: not _inner(server)._closed, "the connection is no longer served")
    return message


def test_a_connect_to_a_host_the_fake_does_not_stand_in_for_is_403(
    mgmt_server: MgmtServer, request: pytest.FixtureRequest
) -> None:
    message = _refused(
        mgmt_server, b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 403
    )
    assert "stands in for api.tealiumiq.com" in message
    assert "not example.com; it forwards nothing" in message
    [bad] = [e for e in mgmt_server.events if isinstance(e, BadRequest)]
    assert (bad.method, bad.path, bad.status) == ("CONNECT", "example.com:443", 403)
    # In the request log too, as every other refused request is.
    [logged] = mgmt_server.requests
    assert (logged.method, logged.path, logged.query, logged.status) == (
        "CONNECT",
        "example.com:443",
        "",
        403,
    )
    assert (logged.host, logged.body, logged.test) == ("example.com:443", None, request.node.nodeid)
    assert logged.headers == (("Host", "example.com:443"),)


def test_each_refused_connect_is_in_the_request_log(mgmt_server: MgmtServer) -> None:
    _refused(mgmt_server, b"CONNECT api.tealiumiq.com:80 HTTP/1.1\r\n\r\n", 403)
    _refused(mgmt_server, b"CONNECT api.tealiumiq.com HTTP/1.1\r\n\r\n", 400)
    parts = urlsplit(mgmt_server.url)
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=LIMIT) as raw:
        raw.sendall(b"CONNECT api.tealiumiq.com:443 HTTP/1.1\r\n\r\n")
        while raw.recv(65536):
            pass
    logged = [(r.method, r.path, r.status, r.host) for r in mgmt_server.requests]
    assert logged == [
        ("CONNECT", "api.tealiumiq.com:80", 403, ""),
        ("CONNECT", "api.tealiumiq.com", 400, ""),
        ("CONNECT", "api.tealiumiq.com:443", 405, ""),  # at the fake's own address
    ]


def test_a_connect_to_another_port_is_403(mgmt_server: MgmtServer) -> None:
    message = _refused(mgmt_server, b"CONNECT api.tealiumiq.com:80 HTTP/1.1\r\n\r\n", 403)
    assert "port 443 of the service's hosts only, not api.tealiumiq.com:80" in message


@pytest.mark.parametrize(
    "target",
    ["api.tealiumiq.com", ":443", "api.tealiumiq.com:https", "api.tealiumiq.com:99999", "u@h:443"],
)
def test_a_malformed_connect_target_is_400(mgmt_server: MgmtServer, target: str) -> None:
    message = _refused(mgmt_server, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode(), 400)
    assert "is malformed" in message


def test_a_connect_line_of_too_many_words_is_400(mgmt_server: MgmtServer) -> None:
    answer, took = _exchange(mgmt_server, b"CONNECT api.tealiumiq.com:443 x HTTP/1.1\r\n\r\n")
    assert took < LIMIT
    assert answer.startswith(b"HTTP/1.0 400 ") or answer.startswith(b"HTTP/1.1 400 ")


@pytest.mark.parametrize("line", [b"CONNECT  HTTP/1.1", b"CONNECT api.tealiumiq.com:443"])
def test_a_connect_line_without_three_words_is_an_http11_400(
    mgmt_server: MgmtServer, line: bytes
) -> None:
    # No target, or no version: http.server answered HTTP/0.9 style, a JSON body with
    # no status line.
    message = _refused(mgmt_server, line + b"\r\n\r\n", 400)
    assert message.startswith(f"Malformed request line {line.decode()!r}: it has no ")


def _tunnel(server: MgmtServer, host: str = "api.tealiumiq.com") -> socket.socket:
    raw = socket.create_connection(_proxy(server), timeout=LIMIT)
    raw.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += raw.recv(1)
    assert head.startswith(b"HTTP/1.1 200 "), head
    return raw


def _handshake(server: MgmtServer, sni: str | None) -> None:
    context = server.client_ssl_context()
    assert context is not None
    context.check_hostname = sni is not None
    raw = _tunnel(server)
    started = time.monotonic()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        context.wrap_socket(raw, server_hostname=sni).close()
    raw.close()
    assert time.monotonic() - started < LIMIT


def test_a_tls_handshake_without_sni_closes_the_tunnel_and_says_why(
    mgmt_server: MgmtServer,
) -> None:
    _handshake(mgmt_server, None)
    events = mgmt_server.wait(until=_tunnel_closed, timeout=LIMIT)
    [closed] = [e for e in events if isinstance(e, TunnelClosed)]
    assert closed.target == "api.tealiumiq.com:443"
    assert closed.reason == "the TLS handshake named no host (no SNI)"
    _until(lambda: not _inner(mgmt_server)._closed, "the connection is no longer served")


def test_a_tls_handshake_naming_another_host_closes_the_tunnel(mgmt_server: MgmtServer) -> None:
    _handshake(mgmt_server, "platform.tealiumapis.com")
    events = mgmt_server.wait(until=_tunnel_closed, timeout=LIMIT)
    [closed] = [e for e in events if isinstance(e, TunnelClosed)]
    assert "named 'platform.tealiumapis.com' (SNI), not 'api.tealiumiq.com'" in closed.reason
    assert "CONNECT api.tealiumiq.com:443 -> tunnel closed: " in mgmt_server.timeline()
    _until(lambda: not _inner(mgmt_server)._closed, "the connection is no longer served")


def test_a_client_that_never_starts_tls_is_closed_within_the_limit(
    mgmt_server: MgmtServer,
) -> None:
    raw = _tunnel(mgmt_server)
    started = time.monotonic()
    with raw:
        assert raw.recv(1) == b""  # closed, without a byte
    assert time.monotonic() - started < LIMIT
    events = mgmt_server.wait(until=_tunnel_closed, timeout=LIMIT)
    [closed] = [e for e in events if isinstance(e, TunnelClosed)]
    assert "no TLS handshake within 3 s" in closed.reason
    _until(lambda: not _inner(mgmt_server)._closed, "the connection is no longer served")


def test_plain_http_in_the_tunnel_is_closed(mgmt_server: MgmtServer) -> None:
    raw = _tunnel(mgmt_server)
    started = time.monotonic()
    with raw:
        raw.sendall(b"GET /v2/things HTTP/1.1\r\nHost: api.tealiumiq.com\r\n\r\n")
        try:
            while raw.recv(65536):  # a TLS alert at most, then the end
                pass
        except ConnectionResetError:
            pass  # closed with the request unread: a reset
    assert time.monotonic() - started < LIMIT
    events = mgmt_server.wait(until=_tunnel_closed, timeout=LIMIT)
    [closed] = [e for e in events if isinstance(e, TunnelClosed)]
    assert closed.reason.startswith("plain HTTP arrived in the tunnel to api.tealiumiq.com")
    _until(lambda: not _inner(mgmt_server)._closed, "the connection is no longer served")


def test_an_absolute_form_request_for_a_foreign_host_is_403(mgmt_server: MgmtServer) -> None:
    message = _refused(
        mgmt_server,
        b"GET http://example.com/v2/auth HTTP/1.1\r\nHost: example.com\r\n"
        b"Connection: close\r\n\r\n",
        403,
    )
    assert "not example.com; it forwards nothing" in message


def test_an_absolute_form_request_for_a_host_of_the_service_is_served(
    mgmt_server: MgmtServer,
) -> None:
    mgmt_server.route("GET", "/urest/things", auth="v1")
    answer, _ = _exchange(
        mgmt_server,
        b"GET http://my.tealiumiq.com/urest/things?utk=u HTTP/1.1\r\n"
        b"Host: my.tealiumiq.com\r\nConnection: close\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 401 ")  # served: the v1 route wants a session
    assert "GET /urest/things at my.tealiumiq.com with no known credential -> 401" in (
        mgmt_server.timeline()
    )
    # The request log has the path of the target, as for an origin-form one.
    logged = mgmt_server.requests[-1]
    assert (logged.path, logged.query) == ("/urest/things", "utk=u")


def test_a_connect_to_the_fake_address_is_no_proxy(mgmt_server: MgmtServer) -> None:
    parts = urlsplit(mgmt_server.url)
    assert parts.hostname is not None
    assert parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=LIMIT) as raw:
        raw.sendall(b"CONNECT api.tealiumiq.com:443 HTTP/1.1\r\n\r\n")
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 405 ")
    assert b"this address of the fake is no proxy" in answer
