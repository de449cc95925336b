"""A request belongs to the test during which its connection was accepted.

Without this, a client that stalls (or a server thread that is slow to be scheduled
under load) could land its event in the next test's timeline; found as a rare failure of
the hostile suite under ``pytest -n 2``.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import pytest

from pytest_mgmtauth import Options, UnknownRoute
from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionResources

PROBE = b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.fixture
def pool(request: pytest.FixtureRequest) -> SessionResources:
    """The plugin's session pool (an internal fixture)."""
    pool: SessionResources = request.getfixturevalue("_mgmtauth_pool")
    return pool


def test_a_request_sent_after_its_test_ended_reaches_no_later_test(pool: SessionResources) -> None:
    first = MgmtServer(Options(), pool)
    parts = urlsplit(first.url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    try:
        stalled = socket.create_connection(address, timeout=10)
        # Connections are accepted in order by one thread: once a later connection has
        # been answered, the stalled one has been accepted too, during the first test.
        with socket.create_connection(address, timeout=10) as probe:
            probe.sendall(PROBE)
            assert _read_all(probe).startswith(b"HTTP/1.1 404")
    finally:
        first.close()

    second = MgmtServer(Options(), pool)
    try:
        with stalled:
            stalled.sendall(PROBE)
            answer = _read_all(stalled)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503")
        assert "opened during a test that has ended" in json.loads(body)["message"]
        assert second.events == []  # nothing leaked into the test that is running now
        assert len(first.events) == 1  # only the probe
        [probe_event] = first.events
        assert isinstance(probe_event, UnknownRoute)
        assert probe_event.path == "/nowhere"
    finally:
        second.close()
