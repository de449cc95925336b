"""mgmtauth-server accepts no connection before its control API is mounted, its fake
bound and its startup accounts added (issue 29, item 10): a client that polled
``GET /_mgmtauth/clock`` right after starting the server got 404 (recorded as an unknown
route, which ``check`` counted) or 503."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mgmtauth import MgmtServer, Options, UnknownRoute
from pytest_mgmtauth._http.app import FakeApp
from pytest_mgmtauth._standalone import control as control_module
from pytest_mgmtauth._standalone.server import AccountSpec, StandaloneServer

#: Real seconds the poller keeps trying; a guard, not a timing assertion.
GUARD = 20.0

ALICE = AccountSpec(username="alice@example.com", api_key="alices-key")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _poll(port: int, request: bytes, stop: threading.Event, statuses: list[int]) -> None:
    """Send ``request`` from before the server listens until one answer comes, as a
    client's wait-for-ready loop does."""
    deadline = time.monotonic() + GUARD
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=GUARD)
        except OSError:  # not listening yet
            time.sleep(0.002)
            continue
        with sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        if answer.startswith(b"HTTP/1.1 "):
            statuses.append(int(answer.split()[1]))
            return


def _slowed(original: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return original(*args, **kwargs)

    return slow


@pytest.fixture
def slow_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Widen the start's steps so that a poller surely arrives between them: binding the
    fake (a 503 before it), making the control API (an unknown route before it) and
    adding the startup account (a 401 before it)."""
    monkeypatch.setattr(FakeApp, "bind", _slowed(FakeApp.bind, 0.2))
    monkeypatch.setattr(MgmtServer, "add_account", _slowed(MgmtServer.add_account, 0.2))
    monkeypatch.setattr(
        control_module.ControlAPI, "__init__", _slowed(control_module.ControlAPI.__init__, 0.2)
    )


@pytest.fixture
def port() -> int:
    return _free_port()


@pytest.fixture
def started(port: int, key_file: Path) -> Iterator[tuple[StandaloneServer, list[int], list[int]]]:
    server = StandaloneServer(Options(), port=port, accounts=[ALICE], key_file=str(key_file))
    host = b"Host: 127.0.0.1:%d\r\nConnection: close\r\n" % port
    clock = b"GET /_mgmtauth/clock HTTP/1.1\r\n" + host + b"\r\n"
    form = b"username=alice%40example.com&key=alices-key"
    auth = (
        b"POST /v2/auth HTTP/1.1\r\n" + host + b"Content-Type: application/x-www-form-urlencoded"
        b"\r\nContent-Length: %d\r\n\r\n%s" % (len(form), form)
    )
    clock_statuses: list[int] = []
    auth_statuses: list[int] = []
    stop = threading.Event()
    pollers = [
        threading.Thread(target=_poll, args=(port, clock, stop, clock_statuses), daemon=True),
        threading.Thread(target=_poll, args=(port, auth, stop, auth_statuses), daemon=True),
    ]
    for poller in pollers:
        poller.start()
    try:
        server.start()
        for poller in pollers:
            poller.join(GUARD)
        yield server, clock_statuses, auth_statuses
    finally:
        stop.set()
        server.stop()


@pytest.mark.usefixtures("slow_start")
def test_a_client_polling_at_start_gets_real_answers(
    started: tuple[StandaloneServer, list[int], list[int]],
) -> None:
    server, clock_statuses, auth_statuses = started
    assert clock_statuses == [200]
    assert auth_statuses == [200]
    unknown = [e for e in server.fake.events if isinstance(e, UnknownRoute)]
    assert unknown == []
    assert server.check()["ok"]
