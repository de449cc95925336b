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
import requests

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
        answer = b""
        try:
            with sock:
                sock.sendall(request)
                while chunk := sock.recv(65536):
                    answer += chunk
        except OSError:  # accepted while the listener was being set up, then closed
            continue
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


def _send(port: int, request: bytes) -> int:
    """The status of ``request`` sent on a new connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split()[1])


def _auth_request(port: int) -> bytes:
    form = b"username=alice%40example.com&key=alices-key"
    return (
        b"POST /v2/auth HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s"
        % (port, len(form), form)
    )


def test_a_client_during_a_reset_gets_the_old_state_or_the_whole_new_one(
    port: int, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 38, item 11: the new state answered before its startup accounts were added
    # (68 to 112 requests per run got "no account" in a load test).
    server = StandaloneServer(Options(), port=port, accounts=[ALICE], key_file=str(key_file))
    server.start()
    statuses: list[int] = []
    add_account = MgmtServer.add_account

    def add_during_a_client_request(fake: MgmtServer, *args: Any, **kwargs: Any) -> Any:
        statuses.append(_send(port, _auth_request(port)))  # the reset is under way
        return add_account(fake, *args, **kwargs)

    try:
        monkeypatch.setattr(MgmtServer, "add_account", add_during_a_client_request)
        server.reset()
        monkeypatch.undo()
        statuses.append(_send(port, _auth_request(port)))
        logged = [(r.path, r.status) for r in server.fake.requests]
    finally:
        server.stop()
    assert statuses == [200, 200]
    assert logged == [("/v2/auth", 200)]  # the log since the reset: the one after it


def _auth_through_proxy(fake: MgmtServer) -> int:
    with requests.Session() as session:
        session.trust_env = False
        answer = session.post(
            "https://api.tealiumiq.com/v2/auth",
            data={"username": "alice@example.com", "key": "alices-key"},
            proxies={"https": fake.proxy_url or ""},
            verify=fake.ca_bundle,
            timeout=GUARD,
        )
    return answer.status_code


def test_under_intercept_the_proxy_answers_once_the_startup_accounts_exist(
    key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 38, item 11: the proxy of --intercept answered as soon as it was made, before
    # the startup accounts were added.
    server = StandaloneServer(
        Options(intercept=True), port=0, accounts=[ALICE], key_file=str(key_file)
    )
    statuses: list[int] = []
    clients: list[threading.Thread] = []
    add_account = MgmtServer.add_account

    def add_during_a_client_request(fake: MgmtServer, *args: Any, **kwargs: Any) -> Any:
        client = threading.Thread(
            target=lambda: statuses.append(_auth_through_proxy(fake)), daemon=True
        )
        client.start()
        clients.append(client)
        # Long enough for the proxy to answer now if it accepts already; the request
        # is meant to wait in the listening socket's backlog until the accounts exist.
        client.join(1.5)
        return add_account(fake, *args, **kwargs)

    monkeypatch.setattr(MgmtServer, "add_account", add_during_a_client_request)
    try:
        server.start()
        for client in clients:
            client.join(GUARD)
    finally:
        server.stop()
    assert statuses == [200]


def test_a_request_on_a_connection_accepted_before_a_reset_is_answered_after_it(
    port: int, key_file: Path
) -> None:
    # A connection belongs to the state bound when it was accepted; under pytest a closed
    # state refuses (the test has ended), but mgmtauth-server's reset hands its
    # connections on: the client gets the new state, not a 503.
    server = StandaloneServer(Options(), port=port, accounts=[ALICE], key_file=str(key_file))
    server.start()
    try:
        http = server.fake._http
        opened = http.connections_accepted
        with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as sock:
            deadline = time.monotonic() + GUARD
            while http.connections_accepted == opened and time.monotonic() < deadline:
                time.sleep(0.001)  # until the server has accepted it (a guard, no timing)
            assert http.connections_accepted == opened + 1
            server.reset()
            sock.sendall(_auth_request(port))
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        logged = [(r.path, r.status) for r in server.fake.requests]
    finally:
        server.stop()
    assert answer.split()[1] == b"200", answer
    assert logged == [("/v2/auth", 200)]
