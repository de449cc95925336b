"""The forwarding's own connections in the process that also runs the tests: the fake
answers the service's hosts there (under interception) or refuses them (without), and a
live run's forwarding must reach the service itself all the same. Nothing is sent: the
C functions underneath are replaced by recorders for the test."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from pytest_mgmtauth._fake import resolution
from pytest_mgmtauth._fake.resolution import HostNotIntercepted, outside


def _record(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What reaches the C ``getaddrinfo`` and ``connect`` from now on (recorded, never
    done): after the replacements are in place, which take what they call through to."""
    seen: list[Any] = []
    monkeypatch.setitem(resolution._through, "getaddrinfo", lambda *args: seen.append(args[0]))
    monkeypatch.setitem(resolution._through, "connect", lambda sock, address: seen.append(address))
    return seen


def test_without_interception_the_forwarding_looks_the_service_up_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    undo = resolution.refuse_lookups(["api.tealiumiq.com"])
    looked_up = _record(monkeypatch)
    try:
        with pytest.raises(HostNotIntercepted):
            socket.getaddrinfo("api.tealiumiq.com", 443)
        with outside():
            socket.getaddrinfo("api.tealiumiq.com", 443)
        with pytest.raises(HostNotIntercepted):  # only inside the block
            socket.getaddrinfo("api.tealiumiq.com", 443)
    finally:
        undo()
    assert looked_up == ["api.tealiumiq.com"]


def test_under_interception_the_forwarding_connects_to_the_service_not_the_fake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    undo = resolution.resolve_to_fake(
        ["api.tealiumiq.com"], https=("127.0.0.1", 1), http=("127.0.0.1", 2)
    )
    looked_up = _record(monkeypatch)
    try:
        with socket.socket() as sock:
            sock.connect(("api.tealiumiq.com", 443))
            with outside():
                sock.connect(("api.tealiumiq.com", 443))
    finally:
        undo()
    assert looked_up == [("127.0.0.1", 1), ("api.tealiumiq.com", 443)]
