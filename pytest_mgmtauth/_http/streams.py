"""Stand-ins for a connection's reader: counting what the application reads of a body
(a connection is kept alive only when the whole body was read), and the brief drain after
an answer that closes the connection (see :class:`BriefDrain`)."""

from __future__ import annotations

import io
import re
import socket
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

#: After the answer: what the client still sends is discarded until it is silent this
#: long, or for DRAIN_SECONDS at most; then the connection closes.
DRAIN_SILENCE = 0.25
DRAIN_SECONDS = 5.0
#: ... and nothing is discarded unless its first bytes come within this long (as
#: Werkzeug's drain waits for them).
DRAIN_START = 0.01


#: The interim answer to ``Expect: 100-continue`` (RFC 9110 15.2.1).
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class CountedInput(io.RawIOBase):
    """The request body as the application reads it, counting the bytes read: the
    connection is kept alive only if the whole body was read (else its rest would be
    taken for the next request line).

    With ``send`` (a request that sent ``Expect: 100-continue``), the first read sends
    ``100 Continue``, once. A request answered without reading its body (a 413 for its
    Content-Length, a framing error) gets its final answer and no interim one (RFC 9110
    10.1.1: the server may answer at once)."""

    def __init__(self, stream: Any, send: Callable[[bytes], object] | None = None) -> None:
        super().__init__()
        self._stream = stream
        self._send = send
        self.count = 0

    def _continue(self) -> None:
        send, self._send = self._send, None
        if send is not None:
            send(CONTINUE)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self._send is not None:
            self._continue()
        data: bytes = self._stream.read(size)
        self.count += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        if self._send is not None:
            self._continue()
        n: int = self._stream.readinto(buffer) or 0
        self.count += n
        return n

    def readline(self, size: int | None = -1) -> bytes:
        if self._send is not None:
            self._continue()
        data: bytes = self._stream.readline(size)
        self.count += len(data)
        return data


#: Longest chunk-size line (with its extensions) and trailer field line read, in bytes.
MAX_CHUNK_LINE = 4096
#: Most bytes of chunk-size lines, extensions and trailer fields in one body.
MAX_CHUNK_OVERHEAD = 64 * 1024

#: chunk-size [ chunk-ext ] (RFC 9112 7.1, 7.1.1), the size's hex digits captured.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[\t\x20-\x7e\x80-\xff])*"'
_CHUNK_LINE = re.compile(
    rf"(?P<size>[0-9A-Fa-f]+)(?:[ \t]*;[ \t]*{_TOKEN}(?:[ \t]*=[ \t]*(?:{_TOKEN}|{_QUOTED}))?)*"
)
#: A trailer field line: a token name, a colon, a value without NUL or CR.
_FIELD_LINE = re.compile(rf"{_TOKEN}:[^\x00\r\n]*")


class ChunkedBodyError(OSError):
    """The chunked body breaks RFC 9112 7.1; ``str()`` says how, in the client's terms."""


class Dechunked(io.RawIOBase):
    """A chunked request body (RFC 9112 7.1), strictly: hex chunk sizes, chunk
    extensions read and ignored, trailer fields read and discarded, CRLF (or LF, RFC
    9112 2.2) after each line and chunk. Werkzeug's reader refused every extension and
    trailer and took '0x5', '+5' and '5_0' as sizes. A broken body raises
    :class:`ChunkedBodyError` (its reason also goes to ``problem``, which the app
    answers as a 400)."""

    def __init__(self, rfile: Any, problem: Callable[[str], None]) -> None:
        super().__init__()
        self._rfile = rfile
        self._problem = problem
        self._left = 0
        self._overhead = 0
        #: The last chunk and the trailer section were read: the body ended cleanly.
        self.done = False

    def readable(self) -> bool:
        return True

    def _fail(self, reason: str) -> ChunkedBodyError:
        self._problem(reason)
        return ChunkedBodyError(reason)

    def _line(self, what: str) -> bytes:
        line: bytes = self._rfile.readline(MAX_CHUNK_LINE + 1)
        self._overhead += len(line)
        if self._overhead > MAX_CHUNK_OVERHEAD:
            raise self._fail(
                f"the chunked body's chunk-size lines, extensions and trailer fields are over "
                f"{MAX_CHUNK_OVERHEAD} bytes"
            )
        if not line:
            raise self._fail(
                f"the chunked body ended before {what}: a chunked body ends with a '0' line, "
                "any trailer fields, and an empty line"
            )
        if not line.endswith(b"\n"):
            if len(line) > MAX_CHUNK_LINE:
                raise self._fail(f"{what} is longer than {MAX_CHUNK_LINE} bytes")
            raise self._fail(f"the chunked body ended in {what}")
        return line[:-2] if line.endswith(b"\r\n") else line[:-1]

    def _next_chunk(self) -> bool:
        """Read the next chunk-size line: False when it was the last chunk (the trailer
        section then read too)."""
        text = self._line("a chunk-size line").decode("latin-1")
        match = _CHUNK_LINE.fullmatch(text)
        if match is None:
            size = text.split(";", 1)[0].strip(" \t")
            if re.fullmatch(r"[0-9A-Fa-f]+", size):
                why = "a chunk extension is not ';name' or ';name=value' (RFC 9112 7.1.1)"
            elif not size:
                why = "a chunk-size line has no size"
            else:
                why = (
                    "a chunk size is not hexadecimal digits (RFC 9112 7.1: no sign, no '0x', "
                    "no spaces or underscores)"
                )
            raise self._fail(f"{why}; each chunk starts with its size in hex and CRLF")
        digits = match.group("size").lstrip("0") or "0"
        if len(digits) > 15:
            raise self._fail("a chunk size is too large (over 15 hex digits)")
        self._left = int(digits, 16)
        if self._left == 0:
            self._trailers()
            return False
        return True

    def _trailers(self) -> None:
        while True:
            line = self._line("the trailer section")
            if not line:
                self.done = True
                return
            if not _FIELD_LINE.fullmatch(line.decode("latin-1")):
                raise self._fail(
                    "a trailer field after the last chunk is not 'Name: value' (RFC 9112 7.1.2); "
                    "an empty line ends the chunked body"
                )

    def readinto(self, buffer: Any) -> int:
        if self.done or not len(buffer):
            return 0
        if self._left == 0 and not self._next_chunk():
            return 0
        data: bytes = self._rfile.read(min(len(buffer), self._left))
        if not data:
            raise self._fail("the chunked body ended in the middle of a chunk")
        buffer[: len(data)] = data
        self._left -= len(data)
        if self._left == 0:
            end = self._rfile.readline(2)
            if end not in (b"\r\n", b"\n"):
                raise self._fail(
                    "a chunk's data is not followed by CRLF: the chunk size says fewer bytes "
                    "than were sent (sizes are hexadecimal)"
                )
        return len(data)


#: What ends a request head: an empty line, after CRLF or a bare LF (as http.server
#: reads header lines).
_HEAD_ENDS = (b"\n\r\n", b"\n\n")


class HeadBounded(io.RawIOBase):
    """The raw reader of a connection to the proxy: it never takes from the socket more
    than up to the end of a request head in one read (it peeks first), so that what the
    client sent after a ``CONNECT``'s head (its TLS ClientHello, often in the same
    packet) stays in the socket for the tunnel's TLS. A buffered reader over the socket
    would keep those bytes in its buffer, where TLS never sees them."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        #: The last bytes taken, for a head's end split across two reads.
        self._tail = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        try:
            ahead = self._sock.recv(len(buffer), socket.MSG_PEEK)
        except BlockingIOError:
            return None  # as socket.SocketIO: nothing yet on a non-blocking socket
        window = self._tail + ahead
        take = len(ahead)
        for end in _HEAD_ENDS:
            # Only an end that reaches into the new bytes (not one taken already).
            found = window.find(end, max(0, len(self._tail) - len(end) + 1))
            if found != -1:
                take = min(take, found + len(end) - len(self._tail))
        if not take:
            return 0
        got = self._sock.recv_into(buffer, take)
        self._tail = (self._tail + bytes(buffer[:got]))[-2:]
        return got


class BriefDrain(io.BufferedIOBase):
    """Stands in for the connection's reader (:attr:`inner`) once the answer is decided,
    while Werkzeug's drain runs.

    After every answer Werkzeug discards what the client still sends (so that a client
    still sending a large body reads a 413 instead of a reset), with a blocking read
    of 10 MB: a client that sent part of a 20 MB body and waits held the connection
    until the stall timeout (30 s). Read through this, that drain discards what arrives
    until the client is silent for DRAIN_SILENCE, sends EOF, or DRAIN_SECONDS pass, and
    then reports EOF: the connection closes at once. For a kept-alive connection
    (``connection`` None) it reads nothing: the drain would read the next request.
    """

    def __init__(self, rfile: Any, connection: socket.socket | None = None) -> None:
        super().__init__()
        self.inner = rfile
        self._connection = connection

    def read(self, size: int | None = -1) -> bytes:
        if self._connection is None:
            return b""
        deadline = time.monotonic() + DRAIN_SECONDS
        silence = DRAIN_START
        try:
            while (left := deadline - time.monotonic()) > 0:
                self._connection.settimeout(min(silence, left))
                if not self.inner.read1(65536):
                    break
                silence = DRAIN_SILENCE
        except (OSError, ValueError):  # silence (a timeout), a reset, a closed reader
            pass
        return b""

    def readline(self, size: int | None = -1) -> bytes:
        return b""
