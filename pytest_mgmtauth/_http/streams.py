"""Stand-ins for a connection's reader: counting what the application reads of a body
(a connection is kept alive only when the whole body was read), and the brief drain after
an answer that closes the connection (see :class:`_BriefDrain`)."""

from __future__ import annotations

import io
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket
    from collections.abc import Callable

#: After the answer: what the client still sends is discarded until it is silent this
#: long, or for DRAIN_SECONDS at most; then the connection closes.
DRAIN_SILENCE = 0.25
DRAIN_SECONDS = 5.0


class _CountedInput(io.RawIOBase):
    """The request body as the application reads it, counting the bytes read: the
    connection is kept alive only if the whole body was read (else its rest would be
    taken for the next request line)."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data: bytes = self._stream.read(size)
        self.count += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        n: int = self._stream.readinto(buffer) or 0
        self.count += n
        return n

    def readline(self, size: int | None = -1) -> bytes:
        data: bytes = self._stream.readline(size)
        self.count += len(data)
        return data


#: The interim answer to ``Expect: 100-continue`` (RFC 9110 15.2.1).
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _ContinueOnRead(io.RawIOBase):
    """The connection's reader for a request that sent ``Expect: 100-continue``: the
    first read of its body sends ``100 Continue``, once. A request answered without
    reading its body (a 413 for its Content-Length, a framing error) gets its final
    answer and no interim one (RFC 9110 10.1.1: the server may answer at once)."""

    def __init__(self, rfile: Any, send: Callable[[bytes], object]) -> None:
        super().__init__()
        self._rfile = rfile
        self._send: Callable[[bytes], object] | None = send

    def _continue(self) -> None:
        send, self._send = self._send, None
        if send is not None:
            send(CONTINUE)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        self._continue()
        data: bytes = self._rfile.read(size)
        return data

    def read1(self, size: int = -1) -> bytes:
        self._continue()
        data: bytes = self._rfile.read1(size)
        return data

    def readinto(self, buffer: Any) -> int:
        self._continue()
        n: int = self._rfile.readinto(buffer) or 0
        return n

    def readline(self, size: int | None = -1) -> bytes:
        self._continue()
        data: bytes = self._rfile.readline(size)
        return data


class _SkipDrain(io.BufferedIOBase):
    """Stands in for the reader of a kept-alive connection while Werkzeug's drain runs
    (which would otherwise read the next request): reads nothing."""

    def __init__(self, rfile: Any) -> None:
        super().__init__()
        self.inner = rfile

    def read(self, size: int | None = -1) -> bytes:
        return b""


class _BriefDrain(io.BufferedIOBase):
    """Stands in for the connection's reader once the answer is decided.

    After every answer Werkzeug discards what the client still sends (so that a client
    still sending a large body reads a 413 instead of a reset), with a blocking read
    of 10 MB: a client that sent part of a 20 MB body and waits held the connection
    until the stall timeout (30 s). Read through this, that drain discards what arrives
    until the client is silent for DRAIN_SILENCE, sends EOF, or DRAIN_SECONDS pass, and
    then reports EOF: the connection closes at once.
    """

    def __init__(self, rfile: Any, connection: socket.socket) -> None:
        super().__init__()
        self._rfile = rfile
        self._connection = connection

    def read(self, size: int | None = -1) -> bytes:
        deadline = time.monotonic() + DRAIN_SECONDS
        try:
            while (left := deadline - time.monotonic()) > 0:
                self._connection.settimeout(min(DRAIN_SILENCE, left))
                if not self._rfile.read1(65536):
                    break
        except (OSError, ValueError):  # silence (a timeout), a reset, a closed reader
            pass
        return b""

    def readline(self, size: int | None = -1) -> bytes:
        return b""

    def close(self) -> None:
        self._rfile.close()
        super().close()
