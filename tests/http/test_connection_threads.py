"""Threads take turns to accept (issue 42): the thread that accepts a connection serves
it, so a request reaches the app without a handoff between threads. It hands the lead on
(to a thread waiting for it, else a new one) when another connection comes while it waits
for its client, or before it waits on anything else; a thread done with its connection
waits a while to lead again, then ends."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
import requests
from werkzeug import Request, Response
from wire_support import PROBE, one_request

from pytest_mgmtauth import Account
from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionResources
from pytest_mgmtauth._http import connections as _connections
from pytest_mgmtauth._http.connections import ConnectionReader, ConnectionServer, ConnectionWriter
from pytest_mgmtauth._http.server import FakeHTTPServer
from pytest_mgmtauth._service.options import Options


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within 10 s of real time")
        time.sleep(0.005)


def _connection_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "mgmtauth-connection"}


def _inner(server: FakeHTTPServer) -> ConnectionServer:
    inner = server.server
    assert isinstance(inner, ConnectionServer)
    return inner


def _one_request(server: FakeHTTPServer) -> bytes:
    return one_request(server.host, server.port)


def test_one_connection_after_another_is_served_by_one_thread() -> None:
    with _own_server() as (server, threads):
        inner = _inner(server)
        assert _one_request(server).startswith(b"HTTP/1.1 ")
        _until(lambda: not inner._bindings, "the connection closed")
        _until(lambda: inner._waiting_workers == 1, "the thread waits for the next one")
        before = threads()
        assert len(before) == 1  # the thread that served the first connection
        for _ in range(3):
            assert _one_request(server).startswith(b"HTTP/1.1 ")
            _until(lambda: inner._waiting_workers == 1, "the thread waits for the next one")
        assert threads() == before  # no thread started


@contextlib.contextmanager
def _own_server() -> Iterator[tuple[FakeHTTPServer, Callable[[], set[threading.Thread]]]]:
    """A server started here, and its connection threads (not other servers')."""
    others = _connection_threads()  # the session's server has its own
    server = FakeHTTPServer()
    server.start()
    server.app.open()  # no state bound: every request gets a 503
    try:
        yield server, lambda: _connection_threads() - others
    finally:
        server.stop()


def test_concurrent_connections_each_get_a_thread() -> None:
    # Its own server's threads only: another server's idle thread may end meanwhile.
    with _own_server() as (server, threads):
        inner = _inner(server)
        # Two connections open at once (neither sends): the second cannot wait for the
        # first.
        _serve_two_at_once(server)
        # Both connections' threads wait for the next connection.
        _until(lambda: inner._waiting_workers == 2, "both connections' threads wait")
        before = threads()
        assert len(before) == 2
        for _ in range(3):  # a waiting thread serves it: the next connection needs no new one
            assert _one_request(server).startswith(b"HTTP/1.1 ")
        assert threads() == before


def test_a_connection_waiting_for_its_client_lets_another_be_served(
    mgmt_server: MgmtServer,
) -> None:
    mgmt_server.route("GET", "/api/ping").respond_with_json({"ok": True})
    # Accepted, then silent: its thread waits for the request while another connection
    # comes; that one is answered while the first still waits.
    with socket.create_connection((mgmt_server._http.host, mgmt_server._http.port), timeout=10):
        answer = requests.get(f"{mgmt_server.url}/api/ping", timeout=10)
        assert answer.status_code == 401  # answered: no token was sent


def test_a_routes_own_handler_runs_while_another_thread_accepts(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # The user's code may wait on anything, here on another request to the fake: the
    # thread running it must not be the one that accepts.
    mgmt_server.route("GET", "/api/inner").respond_with_json({"inner": True})

    def outer(request: Request) -> Response:
        headers = {"Authorization": request.headers["Authorization"]}
        inner = requests.get(f"{mgmt_server.url}/api/inner", headers=headers, timeout=10)
        return Response(inner.content, status=inner.status_code)

    mgmt_server.route("GET", "/api/outer").respond_with_handler(outer)
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}
    token = requests.post(f"{mgmt_server.url}/v2/auth", data=form, timeout=10).json()["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    answer = requests.get(f"{mgmt_server.url}/api/outer", headers=bearer, timeout=10)
    assert answer.json() == {"inner": True}


class _Recording:
    """A socket that records what is sent, a call each."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(bytes(data))


def test_a_held_head_goes_out_with_the_body_in_one_write() -> None:
    sock = _Recording()
    writer = ConnectionWriter(sock)  # type: ignore[arg-type]
    writer.hold(b"HTTP/1.1 200 OK\r\n")
    writer.hold(b"Content-Length: 2\r\n\r\n")
    assert sock.sent == []
    assert writer.write(memoryview(b"{}")) == 2
    assert sock.sent == [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"]
    assert writer.write(b"more") == 4  # nothing held: written as it comes
    assert sock.sent[1:] == [b"more"]


def test_a_held_head_without_a_body_goes_out_at_flush() -> None:
    sock = _Recording()
    writer = ConnectionWriter(sock)  # type: ignore[arg-type]
    writer.hold(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert writer.write(b"") == 0  # Werkzeug's write of an empty body
    assert sock.sent == [b"HTTP/1.1 204 No Content\r\n\r\n"]
    writer.flush()
    writer.close()  # nothing held: nothing more sent
    assert len(sock.sent) == 1


def test_a_deferred_answer_goes_out_whole_at_release() -> None:
    sock = _Recording()
    writer = ConnectionWriter(sock)  # type: ignore[arg-type]
    writer.defer()
    writer.hold(b"HEAD\r\n\r\n")
    writer.write(b"body")
    writer.flush()  # Werkzeug flushes after each write: still kept
    writer.write(b"")
    assert sock.sent == []
    writer.release()
    assert sock.sent == [b"HEAD\r\n\r\nbody"]
    writer.write(b"next")  # released: written as it comes
    assert sock.sent[1:] == [b"next"]


def test_a_deferred_answer_goes_out_at_close() -> None:
    sock = _Recording()
    writer = ConnectionWriter(sock)  # type: ignore[arg-type]
    writer.defer()
    writer.write(b"answer")
    writer.close()
    assert sock.sent == [b"answer"]


def test_a_large_answer_is_never_deferred() -> None:
    sock = _Recording()
    writer = ConnectionWriter(sock)  # type: ignore[arg-type]
    writer.defer()
    writer.write(b"a" * 100)
    writer.write(b"b" * _connections.LARGE_WRITE)  # past the limit: all of it goes now
    assert sock.sent == [b"a" * 100 + b"b" * _connections.LARGE_WRITE]
    writer.write(b"c")
    assert sock.sent[1:] == [b"c"]


def test_a_large_answer_counts_its_held_head() -> None:
    sock = _Recording()
    writer = ConnectionWriter(sock)  # type: ignore[arg-type]
    writer.hold(b"h" * 100)
    writer.write(b"b" * (_connections.LARGE_WRITE - 50))
    assert sock.sent == [b"h" * 100 + b"b" * (_connections.LARGE_WRITE - 50)]


def test_bytes_waiting_looks_in_the_buffer_then_on_the_socket_without_waiting() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.settimeout(30)  # as a connection's: a read would wait up to it
        raw = ConnectionReader(left)
        buffered = io.BufferedReader(raw)
        assert not raw.bytes_waiting(buffered)  # nothing anywhere, and no wait
        right.sendall(b"GET / HTTP/1.1\r\n\r\nGET")
        assert buffered.readline() == b"GET / HTTP/1.1\r\n"
        assert buffered.readline() == b"\r\n"
        assert raw.bytes_waiting(buffered)  # "GET" in the buffer
        assert buffered.read(3) == b"GET"
        right.sendall(b"x")
        assert raw.bytes_waiting(buffered)  # on the socket
        assert buffered.read(1) == b"x"
        right.close()
        assert not raw.bytes_waiting(buffered)  # the FIN: no bytes
        assert left.gettimeout() == 30


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What the fake's connection writers send, a call each."""
    sent: list[bytes] = []
    send = ConnectionWriter._send

    def recording(self: ConnectionWriter, data: bytes) -> None:
        sent.append(bytes(data))
        send(self, data)

    monkeypatch.setattr(ConnectionWriter, "_send", recording)
    return sent


def _answers_in_one_write(mgmt_server: MgmtServer, account: Account, sends: list[bytes]) -> None:
    mgmt_server.route("GET", "/api/items").respond_with_json({"items": [1]})
    mgmt_server.route("HEAD", "/api/items").respond_with_data("")
    verify = mgmt_server.ca_bundle if mgmt_server.url.startswith("https") else True
    with requests.Session() as http:
        auth = http.post(
            mgmt_server.url + "/v2/auth",
            data={"username": account.username, "key": account.api_key},
            verify=verify,
        )
        http.headers["Authorization"] = "Bearer " + auth.json()["token"]
        got = http.get(mgmt_server.url + "/api/items", verify=verify)
        head = http.head(mgmt_server.url + "/api/items", verify=verify)
    assert got.json() == {"items": [1]}
    assert head.status_code == 200
    assert len(sends) == 3, sends
    assert all(sent.startswith(b"HTTP/1.1 200 ") for sent in sends), sends
    assert sends[0].endswith(auth.content)
    assert sends[1].endswith(got.content)
    assert sends[2].endswith(b"\r\n\r\n")  # HEAD: the head alone, at flush


def test_each_answer_leaves_in_one_write(
    mgmt_server: MgmtServer, mgmt_account: Account, sends: list[bytes]
) -> None:
    _answers_in_one_write(mgmt_server, mgmt_account, sends)


@pytest.mark.mgmtauth(https=True)
def test_each_answer_leaves_in_one_write_over_https(
    mgmt_server: MgmtServer, mgmt_account: Account, sends: list[bytes]
) -> None:
    _answers_in_one_write(mgmt_server, mgmt_account, sends)


def test_an_answer_http_server_writes_leaves_in_one_write(
    mgmt_server: MgmtServer, sends: list[bytes]
) -> None:
    # A malformed request line: http.server's send_error writes head and body.
    url = urlsplit(mgmt_server.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(b"GET\r\n\r\n")
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert sends == [answer]


def _read_all(sock: socket.socket, size: int) -> None:
    while size > 0:
        size -= len(sock.recv(65536))


def test_a_waiting_thread_ends_after_its_idle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_connections, "WORKER_IDLE", 0.05)
    with _own_server() as (server, threads):
        _serve_two_at_once(server)
        # The connections' threads wait for another, give up, and end.
        _until(lambda: len(threads()) == 0, "the waiting threads end")
        assert _inner(server)._waiting_workers == 0


def _serve_two_at_once(server: FakeHTTPServer) -> None:
    inner = _inner(server)
    with (
        socket.create_connection((server.host, server.port), timeout=10) as first,
        socket.create_connection((server.host, server.port), timeout=10) as second,
    ):
        _until(lambda: len(inner._bindings) == 2, "both connections served at once")
        first.sendall(PROBE)
        second.sendall(PROBE)
        assert first.recv(65536).startswith(b"HTTP/1.1 ")
        assert second.recv(65536).startswith(b"HTTP/1.1 ")


def test_a_thread_done_with_its_connection_keeps_no_tests_state_alive(
    request: pytest.FixtureRequest,
) -> None:
    import gc
    import weakref

    # A pool of its own (the session's key): its server has no other test's threads.
    session_pool: SessionResources = request.getfixturevalue("_mgmtauth_pool")
    pool = SessionResources(signing_key=session_pool.signing_key)
    request.addfinalizer(pool.close)
    fake = MgmtServer(Options(), pool)
    inner = pool.server(https=False).server
    assert isinstance(inner, ConnectionServer)
    service = weakref.ref(fake._service)
    binding = weakref.ref(fake._binding)
    with socket.create_connection((fake._http.host, fake._http.port), timeout=10) as sock:
        sock.sendall(PROBE)
        while sock.recv(65536):
            pass
    _until(lambda: not inner._bindings, "the connection closed")
    fake.close()
    del fake

    def freed() -> bool:
        gc.collect()
        return service() is None and binding() is None

    # The thread empties _bindings before it returns to wait for its next connection,
    # dropping the frame that held them: freed soon after, and for good while it waits.
    _until(freed, "the test's service and binding were freed")


def test_a_connection_no_thread_can_serve_is_closed_and_the_test_told_why(
    refused_threads: set[str],
) -> None:
    # At the process's thread limit: a connection that comes while the one thread waits
    # for its client is closed, the test gets the reason at its end (fake.check()), and
    # the server goes on accepting.
    pool = SessionResources()  # a server of its own, without waiting connection threads
    try:
        fake = MgmtServer(Options(), pool)
        fake.route("GET", "/api/ping").respond_with_json({"ok": True})
        address = (fake._http.host, fake._http.port)
        refused_threads.add("mgmtauth-connection")
        with (
            socket.create_connection(address, timeout=10),
            pytest.raises(requests.ConnectionError),
        ):
            requests.get(f"{fake.url}/api/ping", timeout=10)
        with pytest.raises(RuntimeError, match="could not start a thread to serve a connection"):
            fake.check()
        refused_threads.clear()
        answer = requests.get(f"{fake.url}/api/ping", timeout=10)
        assert answer.status_code == 401  # served: no token was sent
        fake.check()  # nothing more
        fake.close()
    finally:
        pool.close()
