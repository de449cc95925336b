"""The request handler of a connection: HTTP/1.1 keep-alive (when the answer leaves the
connection in a known state), the TLS handshake in the connection's thread, the raw-socket
answers to a request the fake never sees (plain HTTP at HTTPS, TLS at plain HTTP, a
malformed request line), the framing checks, and each request's :class:`~.arrival.Arrival`."""

from __future__ import annotations

import contextlib
import email.errors
import io
import json
import os
import socket
import ssl
from typing import TYPE_CHECKING, Any

from werkzeug.serving import WSGIRequestHandler

from .._service.flows.base import HTTP_WHITESPACE
from .arrival import ARRIVAL, Arrival, mask_for
from .connections import ConnectionReader, ConnectionWriter, handshake_of
from .errors import chunked, error_body, framing_problem
from .hosts import serve_connect
from .streams import BriefDrain, CountedInput, Dechunked, HeadBounded

if TYPE_CHECKING:
    from .binding import Binding
    from .connections import ConnectionServer

#: Seconds a connection may sit idle mid-request before its thread gives up on it.
STALL_TIMEOUT = 30.0


#: What http.server's email parser notes for a header line it cannot read as a field
#: (besides MissingHeaderBodySeparatorDefect: a line without a colon, or with
#: whitespace before it, after which it reads the rest as a body).
_HEADER_LINE_DEFECTS = (
    email.errors.FirstHeaderLineIsContinuationDefect,
    email.errors.InvalidHeaderDefect,
)


def _asks_to_continue(expect: list[str]) -> bool:
    """Whether the ``Expect`` lines ask for ``100-continue`` and nothing else: the field
    is a list (RFC 9110 5.3, 10.1.1), so the expectation may come in two lines or twice
    in one ("100-continue, 100-continue"), and still gets its one interim answer."""
    members = [m.strip(HTTP_WHITESPACE).lower() for line in expect for m in line.split(",")]
    members = [m for m in members if m]
    return bool(members) and all(m == "100-continue" for m in members)


class ConnectionHandler(WSGIRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = STALL_TIMEOUT
    server: ConnectionServer
    #: Requests read from this connection so far.
    _served = 0
    #: Whether this request's answer keeps the connection open.
    _keep = False
    #: The host of the proxy tunnel this connection became (see _http/hosts.py).
    tunnel_host: str | None = None
    #: The test this connection's current request belongs to: the one bound when the
    #: connection was accepted, then the one bound when each further request began.
    binding: Binding | None = None
    #: What the transport knows of the current request (made in make_environ).
    arrival: Arrival
    #: The socket to the client while another stands in for it (see _after_answer).
    _drained: Any = None

    @property
    def client_socket(self) -> Any:
        """The socket to the client, also while Werkzeug drains (see _after_answer)."""
        return self._drained if self._drained is not None else self.connection

    def do_CONNECT(self) -> None:
        serve_connect(self)

    def handle_one_request(self) -> None:
        self._keep = False
        if self._served:
            # The last answer goes out now that this thread is done with it (see
            # _after_answer).
            if isinstance(self.wfile, ConnectionWriter):
                try:
                    self.wfile.release()
                except OSError:  # the client is gone
                    self.close_connection = True
                    return
            # A kept-alive connection, idle until the next request's first byte: that
            # request belongs to the test bound then (see ConnectionServer.drop_idle_connections).
            self.server.mark_idle(self)
            try:
                first = self.rfile.peek(1)  # type: ignore[attr-defined]
            except (OSError, ValueError):  # the idle timeout, a reset, a dropped one
                first = b""
            still_open, binding = self.server.mark_busy(self)
            if not first or not still_open:
                self.close_connection = True
                return
            self.binding = binding
        self._served += 1
        super().handle_one_request()

    def parse_request(self) -> bool:
        # http.server takes a request line of one or two words for HTTP/0.9 and answers
        # it without a status line (a bare JSON body); "CONNECT  HTTP/1.1" (no target)
        # was one. The fake speaks HTTP/1.x only: such a line gets an HTTP/1.1 400.
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = line.split()
        if not 0 < len(words) < 3:
            return bool(super().parse_request())
        self.command, self.requestline = "", line  # as http.server sets them for an error
        self.request_version = "HTTP/1.1"  # a status line, whatever the client wrote
        self.close_connection = True
        if words[-1].upper().startswith("HTTP/"):
            why = "it has no target"
        elif len(words) == 2:
            why = "it has no HTTP version (HTTP/0.9 is not served)"
        else:
            why = "it is one word"
        self.send_error(
            400,
            f"Malformed request line {line!r}",
            f"{why}; a request line is METHOD SP target SP HTTP/1.1, like "
            "'GET /v2/things HTTP/1.1' or 'CONNECT api.tealiumiq.com:443 HTTP/1.1'",
        )
        return False

    def handle_expect_100(self) -> bool:
        # http.server sent "100 Continue" here, and Werkzeug's run_wsgi another: the
        # one interim answer goes out when the body is first read (see make_environ).
        return True

    def run_wsgi(self) -> None:
        # Werkzeug writes "100 Continue" for this header before the app runs; the app
        # may answer without reading the body, which then must not be asked for.
        self._arrived = list(self.headers.items())  # for the request log
        self._expect = self.headers.get_all("Expect") or []
        del self.headers["Expect"]
        try:
            super().run_wsgi()
        finally:
            if self._drained is not None:  # see _after_answer
                self.connection, self._drained = self._drained, None
            if isinstance(self.rfile, BriefDrain):
                self.rfile = self.rfile.inner

    def flush_headers(self) -> None:
        # The head waits for the body's first bytes (ConnectionWriter.hold); whatever
        # writes a head flushes the writer, or writes a body, after it.
        if isinstance(self.wfile, ConnectionWriter):
            self.wfile.hold(b"".join(getattr(self, "_headers_buffer", ())))
            self._headers_buffer: list[bytes] = []
        else:
            super().flush_headers()

    def send_header(self, keyword: str, value: str) -> None:
        # Werkzeug writes "Connection: close" on every answer.
        if keyword.lower() == "connection" and self._keep:
            value = "keep-alive"
        super().send_header(keyword, value)

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            super().setup()
        else:
            # socketserver's setup, but for its reader and writer, which would be made
            # only to be replaced. Its reader tells whether bytes wait past a request
            # (keep-alive); the proxy's reads a CONNECT's head without the bytes after
            # it, which belong to the tunnel's TLS (see HeadBounded).
            self.connection = self.request
            self.connection.settimeout(self.timeout)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
            raw = HeadBounded if self.server.tunnel_context is not None else ConnectionReader
            self.rfile = io.BufferedReader(raw(self.connection))
        self.binding = self.server.binding_of(self.request)
        self.wfile = ConnectionWriter(self.connection)
        if isinstance(self.connection, ssl.SSLSocket):
            # Deferred from accept() (see ConnectionServer.get_request); a failed handshake
            # closes this connection only. An SNI callback may choose the host's name.
            handshake = handshake_of(self.connection)
            handshake.binding = self.binding
            try:
                self.connection.do_handshake()
                self.tunnel_host = handshake.sni_host
            except ssl.SSLError as exc:
                self.close_connection = True
                self.handshake_failed = True
                if exc.reason == "HTTP_REQUEST":
                    self._answer_plain_http()
                elif handshake.sni_host:
                    self._refused_certificate(handshake.sni_host, exc)
            except OSError:
                self.close_connection = True
                self.handshake_failed = True

    def _refused_certificate(self, host: str, exc: ssl.SSLError) -> None:
        """A client reached the fake by a lookup of a service host (interception) and its
        TLS handshake failed after the SNI chose the host: it does not trust the test CA.
        A client made before the test (it read the CA and proxy variables before
        interception set them) and one with a bundle of its own (``trust_env=False``)
        send the same handshake, and neither comes through the proxy: the reason names
        both, the first the more common (a module-level ``httpx.Client()``)."""
        binding = self.binding
        if binding is not None and not binding.closed.is_set():
            binding.service.timeline.record_tunnel_closed(
                f"{host}:443",
                f"the TLS handshake failed ({exc.reason}): the client does not trust the "
                "fake's test CA. Most likely it was made before the test (a module-level "
                "or session-wide client, such as httpx.Client(), reads the CA and proxy "
                "variables when it is made, before interception set them): make it in a "
                "fixture or in the test. Else it verifies against a CA bundle of its own "
                "(trust_env=False, or verify= a bundle: requests and httpx then use "
                "certifi's): pass verify=mgmt_server.ca_bundle",
                via="TLS",
            )

    def _record_unreadable(self, reason: str) -> None:
        """Record a 400 for bytes that were no request of the fake's protocol."""
        binding = self.binding
        if binding is not None and not binding.closed.is_set():
            binding.service.timeline.record_bad_request("-", "-", 400, reason)

    def _answer_plain_http(self) -> None:
        """A plain-HTTP request reached the HTTPS fake (OpenSSL saw "POST /..." where a
        TLS handshake belongs): answer a plain HTTP 400 that says so, and record it."""
        reason = (
            "this fake serves HTTPS: plain HTTP was sent to it; use an https:// URL (for "
            "v3, https://{host} with the host of the auth answer) and trust the test CA "
            "(mgmt_server.ca_bundle)"
        )
        body = json.dumps(error_body(400, reason)).encode()
        head = (
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        # Recorded before the answer goes out: a client that reads the answer and then
        # the timeline finds the event there.
        self._record_unreadable(reason)
        try:
            with socket.socket(fileno=os.dup(self.connection.fileno())) as raw:
                # Read what the client sent (TLS took only its first bytes): closing a
                # socket with unread data sends a reset, which can swallow the answer.
                raw.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    for _ in range(64):
                        if not raw.recv(65536):
                            break
                raw.setblocking(True)
                raw.sendall(head + body)
                raw.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def handle(self) -> None:
        if getattr(self, "handshake_failed", False):
            return
        super().handle()

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        # The header lines run_wsgi read, but Expect (taken out since): http.server's
        # parser would make each value again.
        arrived = getattr(self, "_arrived", None)
        lines = self.headers.items() if arrived is None else arrived
        headers = [
            (name, value.replace("\r\n", ""))
            for name, value in lines
            if arrived is None or name.lower() != "expect"
        ]
        problem = framing_problem(self.request_version, headers, unparsed=self._unparsed_line())
        self.arrival = arrival = Arrival(
            self.binding,
            listener=self.server.listener,
            tunnel_host=self.tunnel_host,
            framing_problem=problem,
            headers=tuple(getattr(self, "_arrived", ())),
            after_answer=self._after_answer,
        )
        environ[ARRIVAL] = arrival  # the one key: see arrival.py
        if self.tunnel_host is not None:
            environ["wsgi.url_scheme"] = "https"  # the tunnel's TLS ends here
        cookies = [value for name, value in headers if name.lower() == "cookie"]
        if len(cookies) > 1:
            # RFC 9113 8.2.3 / RFC 6265 5.4: cookie lines join with "; ". Werkzeug joins
            # repeated headers with ",", which hid a JSESSIONID sent in a second line.
            environ["HTTP_COOKIE"] = "; ".join(cookies)
        expect = getattr(self, "_expect", [])
        if expect:
            environ["HTTP_EXPECT"] = ",".join(expect)
        send = None
        if expect and self.request_version == "HTTP/1.1" and _asks_to_continue(expect):
            send = self.wfile.write  # not to HTTP/1.0 clients (RFC 9110 10.1.1)
        if problem is None and chunked(headers):
            # Werkzeug's own reader refused chunk extensions and trailer fields.
            environ["wsgi.input_terminated"] = True
            reader = self.rfile if send is None else CountedInput(self.rfile, send)
            environ["wsgi.input"] = Dechunked(reader, arrival.chunked_broke)
        elif environ.get("wsgi.input_terminated"):
            # A framing problem: the app answers without reading the body.
            environ["wsgi.input"] = io.BytesIO()
        else:
            environ["wsgi.input"] = CountedInput(self.rfile, send)
        return environ

    def _unparsed_line(self) -> str | None:
        """The first header line http.server could not read as ``name: value`` (its
        email parser stops there and takes the lines after it for a body), or None.
        Other defects (a multipart Content-Type with no body to match) are not about
        the header lines."""
        for defect in self.headers.defects:
            if isinstance(defect, email.errors.MissingHeaderBodySeparatorDefect):
                payload = self.headers.get_payload()
                return payload.split("\n", 1)[0] if isinstance(payload, str) else ""
            if isinstance(defect, _HEADER_LINE_DEFECTS):
                return str(getattr(defect, "line", "") or "")
        return None

    def _may_keep_alive(self) -> bool:
        environ, arrival = self.environ, self.arrival
        binding = arrival.binding
        if binding is None or binding.closed.is_set() or not binding.service.options.keep_alive:
            return False
        if self.close_connection or self.request_version != "HTTP/1.1":
            return False  # the client asked to close (or HTTP/1.0 without keep-alive)
        if arrival.framing_problem is not None or environ.get("wsgi.input_terminated"):
            return False
        body = environ.get("wsgi.input")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return False
        if not isinstance(body, CountedInput) or body.count < length:
            return False  # the body's rest would be read as the next request
        # Bytes already waiting past this request: a body sent without Content-Length
        # (which HTTP/1.1 reads as the next request) or pipelining, which clients do not
        # use. Closing answers this request only; RFC 9112 9.3.2 has clients retry the
        # rest on a new connection.
        return not self._bytes_waiting()

    def _bytes_waiting(self) -> bool:
        raw = getattr(self.rfile, "raw", None)
        if isinstance(raw, ConnectionReader):
            return raw.bytes_waiting(self.rfile)  # type: ignore[arg-type]
        # TLS (its reader is the socket's own): bytes may wait in the TLS layer too.
        previous = self.connection.gettimeout()
        try:
            self.connection.settimeout(0)
            return bool(self.rfile.peek(1))  # type: ignore[attr-defined]
        except (OSError, ValueError):  # nothing yet (would block), or closed
            return False
        finally:
            with contextlib.suppress(OSError):
                self.connection.settimeout(previous)

    def _after_answer(self) -> None:
        """Called once the app has its answer: keep the connection for the next request,
        or close it after the brief drain (Werkzeug's drain reads through this)."""
        if self._may_keep_alive():
            self._keep = True
            self.rfile = BriefDrain(self.rfile)
            # Werkzeug's drain first waits up to 10 ms for the client's next bytes, on
            # self.connection alone: the thread that leads would not see a connection
            # that comes meanwhile. Nothing is drained here; its wait is on a socket
            # always readable instead (until run_wsgi ends), and the wait for the next
            # request is in handle_one_request, through the reader that watches both.
            self._drained, self.connection = self.connection, self.server.always_readable
            # The answer waits until this thread is done with the request and about to
            # wait for the next one (handle_one_request): ConnectionWriter.defer.
            if isinstance(self.wfile, ConnectionWriter):
                self.wfile.defer()
            # Idle from now on for drop_idle_connections: the client may have its answer
            # (and its test may end) before this thread reads the next request.
            self.server.mark_idle(self)
            return
        self.close_connection = True
        self.rfile = BriefDrain(self.rfile, self.connection)
        # BriefDrain waits for the client's next bytes itself, through the reader that
        # watches for new connections too (see the kept-alive case above).
        self._drained, self.connection = self.connection, self.server.always_readable

    def connection_dropped(self, error: BaseException, environ: Any = None) -> None:
        # Never read another request from a dropped connection (a scripted reset
        # raises through here; HTTP/1.1 would otherwise wait for a next request).
        self.close_connection = True

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header tells the fake's time: mgmt_clock's under pytest, the control
        # API's (advanced, or frozen) in the standalone server.
        binding = self.binding
        if timestamp is None and binding is not None:
            timestamp = binding.service.timeline.now()
        return super().date_time_string(timestamp)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass

    def log(self, type: str, message: str, *args: Any) -> None:
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # What http.server answers by itself (a malformed request line or headers, before
        # the fake sees the request): the fake's JSON shape instead of an HTML page, and
        # never a 5xx for a client's mistake: 505 for "HTTP/2.0" becomes 400 (found by
        # the hostile-input suite).
        if code == 505:
            code, message = 400, f"{message or 'Unsupported HTTP version'}: send HTTP/1.1"
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            # An unparsable version leaves http.server at HTTP/0.9, which would send
            # the body without a status line; every answer of the fake has one.
            self.request_version = "HTTP/1.0"
        short, long = self.responses.get(code, ("Error", ""))
        # http.server quotes the request line ("Bad request syntax ('GET /?utk=...')").
        text = mask_for(self.binding)(f"{message or short}: {explain or long}".rstrip(": "))
        if getattr(self, "raw_requestline", b"").startswith(b"\x16\x03"):
            # A TLS ClientHello (a handshake record: content type 22, version 3.x) at the
            # plain-HTTP fake: the client cannot read this answer, so the diagnosis goes
            # to the timeline too.
            text = (
                "a TLS handshake arrived at this plain-HTTP fake: use its http:// URL, or "
                "serve HTTPS (the https option) for clients that build https://{host}"
            )
            self.request_version = "HTTP/1.0"  # a status line, as the event says 400
            self._record_unreadable(text)
        self.send_json_error(code, text)

    def send_json_error(self, code: int, text: str) -> None:
        """An error answer in the fake's JSON shape, written straight to the connection,
        which then closes (for requests the app never sees)."""
        body = json.dumps(error_body(code, text)).encode()
        self.send_response(code)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True
