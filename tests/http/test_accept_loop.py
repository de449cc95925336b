"""The accept loop sleeps until a connection comes or ``stop()`` wakes it (issue 14):
socketserver's loop woke every poll interval to look for a shutdown request, so each
session's end waited for the next poll, and the loop took the GIL 20 times a second."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from wire_support import one_request

from pytest_mgmtauth._http.connections import ConnectionServer
from pytest_mgmtauth._http.server import FakeHTTPServer


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    server = FakeHTTPServer()
    server.start()
    server.app.open()  # no state bound: every request gets a 503
    yield server
    if server.is_running():
        server.stop()


def _answer(server: FakeHTTPServer) -> bytes:
    return one_request(server.host, server.port)


def test_an_idle_loop_does_not_wake_up(
    server: FakeHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns: list[float] = []
    assert isinstance(server.server, ConnectionServer)
    monkeypatch.setattr(server.server, "service_actions", lambda: turns.append(time.monotonic()))
    time.sleep(0.3)  # socketserver's loop (0.05 s poll) would have turned about 6 times
    assert turns == []
    assert _answer(server).startswith(b"HTTP/1.1 ")
    # The loop turns after it hands the connection over, so the answer can come first.
    deadline = time.monotonic() + 5
    while not turns and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # a second turn, if the loop made one, would show by now
    assert len(turns) == 1  # one turn per connection accepted


def test_stop_ends_the_loop_and_closes_the_socket(server: FakeHTTPServer) -> None:
    assert _answer(server).startswith(b"HTTP/1.1 ")
    thread = server.server_thread
    assert thread is not None
    address = (server.host, server.port)
    server.stop()
    assert not thread.is_alive()
    assert not server.is_running()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=10).close()


def test_stop_with_a_connection_open(server: FakeHTTPServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=10):
        # Accepted, its thread waiting for a request: the loop ends all the same.
        thread = server.server_thread
        assert thread is not None
        server.stop()
        assert not thread.is_alive()


def test_stop_right_after_start() -> None:
    for _ in range(20):  # whether or not the loop has started to wait yet
        server = FakeHTTPServer()
        server.start()
        thread = server.server_thread
        assert thread is not None
        server.stop()
        assert not thread.is_alive()


def test_shutdown_after_the_loop_ended_returns(server: FakeHTTPServer) -> None:
    inner = server.server
    assert isinstance(inner, ConnectionServer)
    server.stop()
    done = threading.Event()

    def shut_down_again() -> None:
        inner.shutdown()
        done.set()

    threading.Thread(target=shut_down_again, daemon=True).start()
    assert done.wait(10), "a second shutdown() waited for a loop that had ended"
