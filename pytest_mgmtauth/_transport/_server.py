"""The socket: a pytest-httpserver ``HTTPServer`` tuned to serve a whole test session.

Differences from the stock server, each for a measured reason (see the field notes):

* threaded, so concurrent clients and a client that stalls mid-request block nobody;
* our own request handler class, so Werkzeug's per-request log lines (slow, noisy) are
  off, Nagle's algorithm is off (HTTPS round trips were 14 ms instead of 4 ms), and
  ``protocol_version`` is set on our class instead of on Werkzeug's shared one;
* a 50 ms poll interval, so ``stop()`` takes ~50 ms instead of ~500 ms;
* nothing is appended to ``log``: a session-long server would grow without bound;
* TLS handshakes happen in the request's thread, not in the accepting one, so a
  client that connects and never speaks TLS blocks nobody;
* a request whose Host or Content-Length headers are invalid (RFC 9112) is marked for a
  400, and repeated ``Cookie`` headers are joined with "; " (Werkzeug joins with ",");
* after the answer, what the client still sends is discarded only briefly (see
  :class:`_BriefDrain`): Werkzeug's own drain could hold a connection for 30 s;
* HTTP/1.1 keep-alive, as the real service answers (``Connection: keep-alive``), when
  the test's ``keep_alive`` option allows it and the answer leaves the connection in a
  known state (the request's body was read whole, no framing problem, the client did not
  ask to close); otherwise ``Connection: close`` and the brief drain. Werkzeug always
  closes. A connection's first request belongs to the test during which it was accepted;
  each further one to the test bound when its first byte arrived. Connections idle
  between requests are closed when a test ends (:meth:`_Server.drop_idle_connections`),
  as a real server's idle timeout would: clients check a pooled connection before reusing
  it and open a new one.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import ssl
import struct
import threading
import time
from typing import TYPE_CHECKING, Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response
from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

from .._domain._redact import SecretMasker
from ._app import ACCEPTED_BINDING, AFTER_ANSWER, FRAMING_PROBLEM, Binding, FakeApp
from ._errors import MAX_BODY_BYTES, error_bytes
from ._parsing import framing_problem

if TYPE_CHECKING:
    from collections.abc import Callable

#: Seconds a connection may sit idle mid-request before its thread gives up on it.
STALL_TIMEOUT = 30.0
#: After the answer: what the client still sends is discarded until it is silent this
#: long, or for DRAIN_SECONDS at most; then the connection closes.
DRAIN_SILENCE = 0.25
DRAIN_SECONDS = 5.0
#: Seconds drop_idle_connections waits for the connections it closes to be closed.
DROP_WAIT = 1.0


class _FakeRequest(Request):
    # One byte over the limit, so that a chunked body (no Content-Length) that is too
    # large reads as too large (read_body answers 413) instead of silently truncated.
    max_content_length = MAX_BODY_BYTES + 1
    max_form_memory_size = MAX_BODY_BYTES

    def __repr__(self) -> str:
        # Shown in tracebacks (pytest prints a frame's arguments): Werkzeug's repr holds
        # the whole URL, and with it a utk in the query or a jsessionid in the path.
        return f"<{type(self).__name__} {_mask_for(self.environ)(_target(self))!r} [{self.method}]>"


def _target(request: Request) -> str:
    try:
        query = "&".join(f"{k}={v}" for k, v in request.args.items(multi=True))
    except Exception:  # a repr must not raise
        query = "<query not shown>"
    return request.path + (f"?{query}" if query else "")


def _mask_for(environ: Any) -> Callable[[str], str]:
    """The secret masker of the test a connection belongs to (JWTs only without one)."""
    binding = environ.get(ACCEPTED_BINDING) if environ is not None else None
    if binding is None:
        binding = getattr(_accepted, "binding", None)
    return binding.service.redact if binding is not None else SecretMasker().mask


#: The first bytes of a TLS handshake record (content type 22, version 3.x).
_TLS_RECORD_STARTS = (b"\x16\x03",)

#: Per connection thread: the test binding current when the connection was accepted.
_accepted = threading.local()


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


class _RequestHandler(WSGIRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = STALL_TIMEOUT
    server: _Server
    #: Requests read from this connection so far.
    _served = 0
    #: Whether this request's answer keeps the connection open.
    _keep = False

    def handle_one_request(self) -> None:
        self._keep = False
        if self._served:
            # A kept-alive connection, idle until the next request's first byte: that
            # request belongs to the test bound then (see _Server.drop_idle_connections).
            self.server.mark_idle(self)
            try:
                first = self.rfile.peek(1)  # type: ignore[attr-defined]
            except (OSError, ValueError):  # the idle timeout, a reset, a dropped one
                first = b""
            still_open, binding = self.server.mark_busy(self)
            if not first or not still_open:
                self.close_connection = True
                return
            _accepted.binding = binding
        self._served += 1
        super().handle_one_request()

    def run_wsgi(self) -> None:
        try:
            super().run_wsgi()
        finally:
            if isinstance(self.rfile, _SkipDrain):
                self.rfile = self.rfile.inner

    def send_header(self, keyword: str, value: str) -> None:
        # Werkzeug writes "Connection: close" on every answer.
        if keyword.lower() == "connection" and self._keep:
            value = "keep-alive"
        super().send_header(keyword, value)

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            # Deferred from accept() (see _Server.get_request); a failed handshake
            # closes this connection only.
            try:
                self.connection.do_handshake()
            except ssl.SSLError as exc:
                self.close_connection = True
                self.handshake_failed = True
                if exc.reason == "HTTP_REQUEST":
                    self._answer_plain_http()
            except OSError:
                self.close_connection = True
                self.handshake_failed = True

    def _answer_plain_http(self) -> None:
        """A plain-HTTP request reached the HTTPS fake (OpenSSL saw "POST /..." where a
        TLS handshake belongs): answer a plain HTTP 400 that says so, and record it."""
        reason = (
            "this fake serves HTTPS: plain HTTP was sent to it; use an https:// URL (for "
            "v3, https://{host} with the host of the auth answer) and trust the test CA "
            "(mgmt_server.ca_bundle)"
        )
        body = error_bytes(400, reason)
        head = (
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        # Recorded before the answer goes out: a client that reads the answer and then
        # the timeline finds the event there.
        binding = getattr(_accepted, "binding", None)
        if binding is not None and not binding.closed.is_set():
            binding.service.record_bad_request("-", "-", 400, reason)
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
        if hasattr(_accepted, "binding"):
            environ[ACCEPTED_BINDING] = _accepted.binding
        headers = [(name, value.replace("\r\n", "")) for name, value in self.headers.items()]
        problem = framing_problem(self.request_version, headers)
        if problem is not None:
            environ[FRAMING_PROBLEM] = problem
        cookies = [value for name, value in headers if name.lower() == "cookie"]
        if len(cookies) > 1:
            # RFC 9113 8.2.3 / RFC 6265 5.4: cookie lines join with "; ". Werkzeug joins
            # repeated headers with ",", which hid a JSESSIONID sent in a second line.
            environ["HTTP_COOKIE"] = "; ".join(cookies)
        if not environ.get("wsgi.input_terminated"):
            environ["wsgi.input"] = _CountedInput(environ["wsgi.input"])
        environ[AFTER_ANSWER] = self._after_answer
        return environ

    def _may_keep_alive(self) -> bool:
        environ = self.environ
        binding = environ.get(ACCEPTED_BINDING)
        if binding is None or binding.closed.is_set() or not binding.service.options.keep_alive:
            return False
        if self.close_connection or self.request_version != "HTTP/1.1":
            return False  # the client asked to close (or HTTP/1.0 without keep-alive)
        if environ.get(FRAMING_PROBLEM) is not None or environ.get("wsgi.input_terminated"):
            return False
        if self.headers.defects or self.headers.get_payload():
            # A line that is no header ("Bad Name: x") ends the parsed headers there: the
            # lines after it (a Content-Length, say) were read but not understood, so
            # where this request ends is unknown.
            return False
        body = environ.get("wsgi.input")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return False
        if not isinstance(body, _CountedInput) or body.count < length:
            return False  # the body's rest would be read as the next request
        # Bytes already waiting past this request: a body sent without Content-Length
        # (which HTTP/1.1 reads as the next request) or pipelining, which clients do not
        # use. Closing answers this request only; RFC 9112 9.3.2 has clients retry the
        # rest on a new connection.
        return not self._bytes_waiting()

    def _bytes_waiting(self) -> bool:
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
            self.rfile = _SkipDrain(self.rfile)
            # Idle from now on for drop_idle_connections: the client may have its answer
            # (and its test may end) before this thread reads the next request.
            self.server.mark_idle(self)
            return
        self.close_connection = True
        if not isinstance(self.rfile, _BriefDrain):
            self.rfile = _BriefDrain(self.rfile, self.connection)

    def connection_dropped(self, error: BaseException, environ: Any = None) -> None:
        # Never read another request from a dropped connection (a scripted reset
        # raises through here; HTTP/1.1 would otherwise wait for a next request).
        self.close_connection = True

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header tells the fake's time: mgmt_clock's under pytest, the control
        # API's (advanced, or frozen) in the standalone server.
        binding = getattr(_accepted, "binding", None)
        if timestamp is None and binding is not None:
            timestamp = binding.service.now()
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
        if len(getattr(self, "requestline", "").split()) >= 3:
            # An unparsable version leaves http.server at HTTP/0.9, which would send
            # the body without a status line; the client wrote an HTTP/1.x-style line.
            self.request_version = "HTTP/1.0"
        short, long = self.responses.get(code, ("Error", ""))
        # http.server quotes the request line ("Bad request syntax ('GET /?utk=...')").
        text = _mask_for(None)(f"{message or short}: {explain or long}".rstrip(": "))
        if getattr(self, "raw_requestline", b"")[:2] in _TLS_RECORD_STARTS:
            # A TLS ClientHello at the plain-HTTP fake: the client cannot read this
            # answer, so the diagnosis goes to the timeline too.
            text = (
                "a TLS handshake arrived at this plain-HTTP fake: use its http:// URL, or "
                "serve HTTPS (the https option) for clients that build https://{host}"
            )
            self.request_version = "HTTP/1.0"  # a status line, as the event says 400
            binding = getattr(_accepted, "binding", None)
            if binding is not None and not binding.closed.is_set():
                binding.service.record_bad_request("-", "-", 400, text)
        body = error_bytes(code, text)
        self.send_response(code, short)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True


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


class _Server(ThreadedWSGIServer):
    daemon_threads = True
    block_on_close = False
    fake_app: FakeApp | None = None
    #: Connections accepted so far (the keep-alive benchmark counts them).
    connections_accepted = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._idle_lock = threading.Lock()
        self._idle: set[_RequestHandler] = set()
        #: Per open connection: set once its thread has closed it.
        self._closed: dict[Any, threading.Event] = {}

    def mark_idle(self, handler: _RequestHandler) -> None:
        """A kept-alive connection waits for its next request."""
        with self._idle_lock:
            self._idle.add(handler)

    def mark_busy(self, handler: _RequestHandler) -> tuple[bool, Binding | None]:
        """The next request's first byte arrived (or the connection ended): whether the
        connection is still open, and the binding the request belongs to."""
        with self._idle_lock:
            if handler not in self._idle:
                return False, None  # dropped while idle
            self._idle.discard(handler)
            return True, self.fake_app.current if self.fake_app is not None else None

    def drop_idle_connections(self) -> int:
        """Close every kept-alive connection idle between requests now (a FIN, as a
        server's idle timeout); the number closed. At a test's end, and on cue."""
        with self._idle_lock:
            idle, self._idle = self._idle, set()
            closing = [self._closed.get(handler.connection) for handler in idle]
        for handler in idle:
            with contextlib.suppress(OSError):
                # The plain socket's shutdown, also under TLS: the handler's thread,
                # waiting in peek() (or still writing its answer, which completes),
                # reads EOF and closes the connection.
                socket.socket.shutdown(handler.connection, socket.SHUT_RD)
        deadline = time.monotonic() + DROP_WAIT
        for closed in closing:
            # Closed (the FIN sent) before this returns: a client's pooled connection
            # then reads as closed when the next test reuses it, and is replaced.
            if closed is not None:
                closed.wait(max(0.0, deadline - time.monotonic()))
        return len(idle)

    def process_request(self, request: Any, client_address: Any) -> None:
        # As ThreadingMixIn does, plus: note which test was bound when the connection
        # was accepted (in accept order, before any client bytes are parsed).
        binding = self.fake_app.current if self.fake_app is not None else None
        self.connections_accepted += 1
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address, binding),
            daemon=True,
            name="mgmtauth-connection",
        )
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any, binding: Binding | None) -> None:
        _accepted.binding = binding
        closed = threading.Event()
        with self._idle_lock:
            self._closed[request] = closed
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._idle_lock:
                self._closed.pop(request, None)
            closed.set()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        if self._tls_context is not None:
            sock = self._tls_context.wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        return sock, address

    _tls_context: ssl.SSLContext | None = None

    def shutdown_request(self, request: Any) -> None:
        # A connection set to linger 0 (a scripted reset) must close without the FIN
        # of shutdown(SHUT_WR), so that the client sees a reset, not an empty answer.
        try:
            linger = request.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8)
        except OSError:
            linger = b""
        if linger == struct.pack("ii", 1, 0):
            self.close_request(request)
        else:
            super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Dropped and broken connections are the client's business; errors inside the
        # application never get here (FakeApp catches and queues them).
        pass


def _drain_briefly_after(app: Any) -> Any:
    """The WSGI app, then the brief drain (see :class:`_BriefDrain`) of its request."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        answer = app(environ, start_response)
        after = environ.get(AFTER_ANSWER)
        if after is not None:
            after()
        return answer

    return wsgi


class FakeHTTPServer(HTTPServer):
    """One per test session (per xdist worker) and scheme; tests bind their state to
    :attr:`app` for their duration."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        super().__init__(host=host, port=port, ssl_context=ssl_context, threaded=True)
        self.app = FakeApp()
        self.no_handler_status_code = 404
        self._start_lock = threading.Lock()

    def mount(self, prefix: str, app: Callable[[Request], Response]) -> None:
        """Serve ``app`` under ``prefix`` besides the fake (see :meth:`FakeApp.mount`)."""
        self.app.mount(prefix, app)

    def start(self) -> None:
        with self._start_lock:
            if self.is_running():
                return
            app = _drain_briefly_after(_FakeRequest.application(self.application))
            # Plain TCP server; TLS is layered per connection in get_request.
            server = _Server(self.host, self.port, app, handler=_RequestHandler)
            server.fake_app = self.app
            if self.ssl_context is not None:
                server._tls_context = self.ssl_context
                server.ssl_context = self.ssl_context  # Werkzeug reports wsgi.url_scheme
            self.server = server
            self.port = server.port
            self.server_thread = threading.Thread(
                target=self.thread_target, daemon=True, name="mgmtauth-server"
            )
            self.server_thread.start()

    def thread_target(self) -> None:
        assert self.server is not None
        self.server.serve_forever(poll_interval=0.05)

    def application(self, request: Request) -> Response:
        return self.app(request)

    @property
    def connections_accepted(self) -> int:
        """TCP connections this server accepted so far."""
        server = self.server
        return server.connections_accepted if isinstance(server, _Server) else 0

    def drop_idle_connections(self) -> int:
        """Close the kept-alive connections idle between requests now; how many."""
        server = self.server
        return server.drop_idle_connections() if isinstance(server, _Server) else 0

    def dispatch(self, request: Request) -> Response:
        return self.app(request)

    @property
    def base_url(self) -> str:
        return self.url_for("/").rstrip("/")
