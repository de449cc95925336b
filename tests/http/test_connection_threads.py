"""A connection's thread, done with it, serves the next connection instead of a new
thread being started for each (issue 14: a client without a Session opens two
connections per test), and ends after a while without one."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import requests
from wire_support import PROBE, one_request

from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionResources
from pytest_mgmtauth._http import connections as _connections
from pytest_mgmtauth._http.connections import ConnectionServer
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


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    # A server of its own: the session's has the other tests' threads.
    server = FakeHTTPServer()
    server.start()
    server.app.open()  # no state bound: every request gets a 503
    yield server
    server.stop()


def _one_request(server: FakeHTTPServer) -> bytes:
    return one_request(server.host, server.port)


def test_the_next_connection_is_served_by_the_waiting_thread(server: FakeHTTPServer) -> None:
    inner = server.server
    assert isinstance(inner, ConnectionServer)
    assert _one_request(server).startswith(b"HTTP/1.1 ")
    _until(lambda: inner._waiting_workers == 1, "the connection's thread waits for another")
    before = _connection_threads()
    for _ in range(3):
        assert _one_request(server).startswith(b"HTTP/1.1 ")
        _until(lambda: inner._waiting_workers == 1, "the thread waits again")
    assert _connection_threads() - before == set()  # no thread started


def test_concurrent_connections_each_get_a_thread(server: FakeHTTPServer) -> None:
    inner = server.server
    assert isinstance(inner, ConnectionServer)
    # Two connections open at once (neither sends): the second cannot wait for the first.
    with (
        socket.create_connection((server.host, server.port), timeout=10) as first,
        socket.create_connection((server.host, server.port), timeout=10) as second,
    ):
        _until(lambda: len(inner._closed) == 2, "both connections served at once")
        first.sendall(PROBE)
        second.sendall(PROBE)
        assert first.recv(65536).startswith(b"HTTP/1.1 ")
        assert second.recv(65536).startswith(b"HTTP/1.1 ")
    _until(lambda: inner._waiting_workers == 2, "both threads wait for another connection")


def test_a_waiting_thread_ends_after_its_idle_time(
    server: FakeHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_connections, "WORKER_IDLE", 0.05)
    inner = server.server
    assert isinstance(inner, ConnectionServer)
    before = _connection_threads()
    assert _one_request(server).startswith(b"HTTP/1.1 ")
    started = _connection_threads() - before
    assert len(started) == 1
    _until(lambda: inner._waiting_workers == 0, "the waiting thread gives up")
    [thread] = started
    thread.join(10)
    assert not thread.is_alive()


def test_a_waiting_thread_keeps_no_tests_state_alive(request: pytest.FixtureRequest) -> None:
    import gc
    import weakref

    from pytest_mgmtauth import Options
    from pytest_mgmtauth._fake.server import MgmtServer
    from pytest_mgmtauth._fake.session import SessionResources

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
    _until(lambda: inner._waiting_workers == 1, "the thread waits for another connection")
    fake.close()
    del fake
    gc.collect()
    assert service() is None
    assert binding() is None


def test_a_connection_no_thread_can_serve_is_closed_and_the_test_told_why(
    refused_threads: set[str],
) -> None:
    # At the process's thread limit: the client sees its connection closed, the test
    # gets the reason at its end (fake.check()), and the server goes on accepting.
    pool = SessionResources()  # a server of its own, without waiting connection threads
    try:
        fake = MgmtServer(Options(), pool)
        fake.route("GET", "/api/ping").respond_with_json({"ok": True})
        refused_threads.add("mgmtauth-connection")
        with pytest.raises(requests.ConnectionError):
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
