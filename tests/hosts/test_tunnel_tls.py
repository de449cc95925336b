"""The TLS of a proxy tunnel (the intercept option), driven byte by byte from a raw
socket: the SNI check ignores case as the CONNECT does, a ClientHello sent in the same
packet as the CONNECT's head is read, and the short limit bounds only the wait for the
handshake's first byte, not the handshake (under load, tunnels died mid-handshake)."""

from __future__ import annotations

import socket
import ssl
import time
from urllib.parse import urlsplit

import pytest

from pytest_mgmtauth import Event, MgmtServer, TunnelClosed
from pytest_mgmtauth._http import hosts

pytestmark = pytest.mark.mgmtauth(intercept=True)


def _connect_head(host: str) -> bytes:
    return f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode()


def _proxy_socket(server: MgmtServer) -> socket.socket:
    assert server.proxy_url is not None
    parts = urlsplit(server.proxy_url)
    return socket.create_connection((parts.hostname or "", parts.port or 0), timeout=10)


def _tunnel_closed(events: list[Event]) -> bool:
    return any(isinstance(e, TunnelClosed) for e in events)


def _read_head(raw: socket.socket) -> bytes:
    """The proxy's answer to the CONNECT, and not a byte of the TLS after it."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = raw.recv(1)
        assert byte, head
        head += byte
    return head


class TLSClient:
    """A client's TLS over ``raw``, in memory: its ClientHello can be sent in pieces,
    or with other bytes in one packet."""

    def __init__(self, raw: socket.socket, server: MgmtServer, hostname: str) -> None:
        context = server.client_ssl_context()
        assert context is not None
        self.raw = raw
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=hostname)

    def client_hello(self) -> bytes:
        with pytest.raises(ssl.SSLWantReadError):
            self.tls.do_handshake()
        hello = self.outgoing.read()
        assert hello[:1] == b"\x16"  # a TLS handshake record
        return hello

    def finish_handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                self.raw.sendall(self.outgoing.read())
                data = self.raw.recv(65536)
                if not data:
                    raise ConnectionError(
                        "the proxy closed the tunnel during the handshake"
                    ) from None
                self.incoming.write(data)
            else:
                self.raw.sendall(self.outgoing.read())
                return

    def exchange(self, request: bytes) -> bytes:
        """Send ``request`` (which asks to close) and read the answer to its end."""
        self.tls.write(request)
        self.raw.sendall(self.outgoing.read())
        answer = b""
        while True:
            try:
                chunk = self.tls.read(65536)
            except ssl.SSLWantReadError:
                data = self.raw.recv(65536)
                if not data:
                    return answer
                self.incoming.write(data)
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return answer
            if not chunk:
                return answer
            answer += chunk


def _get(host: str) -> bytes:
    return f"GET /nowhere HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


@pytest.mark.parametrize(
    ("connect", "sni"),
    [
        ("API.TEALIUMIQ.COM", "API.TEALIUMIQ.COM"),
        ("api.tealiumiq.com", "Api.TealiumIQ.com"),
        ("API.tealiumiq.COM", "api.tealiumiq.com"),
    ],
)
def test_the_sni_check_ignores_case_as_the_connect_does(
    mgmt_server: MgmtServer, connect: str, sni: str
) -> None:
    # Node keeps the URL's case in its SNI; host names are case-insensitive (RFC 6066 3).
    with _proxy_socket(mgmt_server) as raw:
        raw.sendall(_connect_head(connect))
        assert _read_head(raw).startswith(b"HTTP/1.1 200 ")
        client = TLSClient(raw, mgmt_server, sni)
        raw.sendall(client.client_hello())
        client.finish_handshake()
        answer = client.exchange(_get(sni))
    assert answer.startswith(b"HTTP/1.1 404 "), answer[:200]
    assert not [e for e in mgmt_server.events if isinstance(e, TunnelClosed)]
    [logged] = mgmt_server.requests
    assert logged.path == "/nowhere"


@pytest.mark.parametrize("split", [0, 1, 2, 3], ids=lambda n: f"head-end-split-{n}")
def test_a_client_hello_in_the_packet_of_the_connect_is_read(
    mgmt_server: MgmtServer, split: int
) -> None:
    # The CONNECT's head and the ClientHello in one send: the proxy's reader had taken
    # the ClientHello into its buffer with the head, and the TLS layer waited for it.
    # Also with the head's last bytes sent apart, just before the ClientHello.
    head = _connect_head("api.tealiumiq.com")
    with _proxy_socket(mgmt_server) as raw:
        client = TLSClient(raw, mgmt_server, "api.tealiumiq.com")
        first, rest = head[: len(head) - split], head[len(head) - split :]
        if split:
            raw.sendall(first)
            time.sleep(0.05)  # most likely read apart; either way the same answer
            first = b""
        raw.sendall(first + rest + client.client_hello())
        assert _read_head(raw).startswith(b"HTTP/1.1 200 ")
        client.finish_handshake()
        answer = client.exchange(_get("api.tealiumiq.com"))
    assert answer.startswith(b"HTTP/1.1 404 "), answer[:200]
    assert not [e for e in mgmt_server.events if isinstance(e, TunnelClosed)]


def test_the_first_byte_limit_does_not_bound_the_handshake(
    mgmt_server: MgmtServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A handshake that starts at once and then takes longer than the first-byte limit
    # (a loaded machine) completes: the limit is for a client that never starts TLS.
    monkeypatch.setattr(hosts, "HANDSHAKE_TIMEOUT", 0.2)
    with _proxy_socket(mgmt_server) as raw:
        raw.sendall(_connect_head("api.tealiumiq.com"))
        assert _read_head(raw).startswith(b"HTTP/1.1 200 ")
        client = TLSClient(raw, mgmt_server, "api.tealiumiq.com")
        hello = client.client_hello()
        raw.sendall(hello[:5])
        time.sleep(1.0)  # five times the first-byte limit, mid-handshake
        raw.sendall(hello[5:])
        client.finish_handshake()
        answer = client.exchange(_get("api.tealiumiq.com"))
    assert answer.startswith(b"HTTP/1.1 404 "), answer[:200]
    assert not [e for e in mgmt_server.events if isinstance(e, TunnelClosed)]


def test_a_handshake_that_stalls_after_its_first_byte_is_closed_and_says_why(
    mgmt_server: MgmtServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosts, "HANDSHAKE_LIMIT", 0.3)
    with _proxy_socket(mgmt_server) as raw:
        raw.sendall(_connect_head("api.tealiumiq.com"))
        assert _read_head(raw).startswith(b"HTTP/1.1 200 ")
        client = TLSClient(raw, mgmt_server, "api.tealiumiq.com")
        raw.sendall(client.client_hello()[:5])
        assert raw.recv(1) == b""  # closed by the proxy, without a byte
    events = mgmt_server.wait(until=_tunnel_closed)
    [closed] = [e for e in events if isinstance(e, TunnelClosed)]
    assert closed.reason == (
        "the TLS handshake with api.tealiumiq.com did not finish within 0.3 s of its first byte"
    )


def test_a_client_that_closes_before_its_handshake_is_told_apart(
    mgmt_server: MgmtServer,
) -> None:
    with _proxy_socket(mgmt_server) as raw:
        raw.sendall(_connect_head("api.tealiumiq.com"))
        assert _read_head(raw).startswith(b"HTTP/1.1 200 ")
    events = mgmt_server.wait(until=_tunnel_closed)
    [closed] = [e for e in events if isinstance(e, TunnelClosed)]
    assert closed.reason == "the client closed the tunnel before its TLS handshake"
