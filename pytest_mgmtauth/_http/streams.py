"""Stand-ins for a connection's reader: counting what the application reads of a body
(a connection is kept alive only when the whole body was read), and the brief drain after
an answer that closes the connection (see :class:`_BriefDrain`)."""

from __future__ import annotations

import io
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket

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
