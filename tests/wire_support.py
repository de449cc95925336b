"""Checks and helpers shared by the tests of several folders (v1, v2, http).

In tests/ itself: pytest puts the directory of tests/conftest.py on ``sys.path``, so a
test of any folder imports it by its plain name (see tests/README.md)."""

from __future__ import annotations

import selectors
import socket
import subprocess
from email.message import Message

#: "Response headers present on success" of the interface document, for both endpoints.
DOCUMENTED_SUCCESS_HEADERS = frozenset(
    {
        "Cache-Control",
        "Pragma",
        "Expires",
        "X-XSS-Protection",
        "X-NodeId",
        "X-Version",
        "Set-Cookie",
        "Content-Length",
        "Connection",
    }
)


def assert_success_headers(headers: Message, content: bytes) -> None:
    """Every documented success header with its documented value, and nothing beyond
    them but the body's type and the server's own two (Server, Date)."""
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-cache,no-store,must-revalidate"
    assert headers["Pragma"] == "no-cache"
    assert headers["Expires"] == "0"
    assert headers["X-XSS-Protection"] == "1;mode=block"
    assert headers["X-NodeId"]
    assert headers["X-Version"]
    assert int(headers["Content-Length"]) == len(content)
    assert headers["Connection"]
    assert set(headers.keys()) - DOCUMENTED_SUCCESS_HEADERS <= {"Content-Type", "Server", "Date"}


#: A request on a raw socket that asks the server to close after its answer.
PROBE = b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def one_request(host: str, port: int) -> bytes:
    """The whole answer to :data:`PROBE` on a new connection, read until the server
    closes it."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(PROBE)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def first_line(process: subprocess.Popen[str], *, guard: float, what: str) -> str:
    """The first line ``process`` prints (``mgmtauth-server --json``'s startup line),
    waiting at most ``guard`` real seconds: a hang guard, not a timing check."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=guard):
            process.kill()
            raise AssertionError(f"{what} printed nothing in {guard} s")
    line = process.stdout.readline()
    if not line:
        _, err = process.communicate(timeout=guard)
        raise AssertionError(f"{what} exited {process.returncode}: {err}")
    return line
