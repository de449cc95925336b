"""The session server's socket side: accepting connections (TLS wrapped, its handshake
deferred to the connection's thread), a thread per connection that notes which test was
bound when it was accepted, and the kept-alive connections idle between requests, which
:meth:`ConnectionServer.drop_idle_connections` closes at a test's end.

One thread (``serve_forever``'s) accepts every connection and hands it to a connection
thread: one done with its last connection and waiting for another, else a new one."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import queue
import select
import selectors
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING, Any

from werkzeug.serving import ThreadedWSGIServer

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable

    from .app import FakeApp
    from .binding import Binding
    from .handler import ConnectionHandler

#: The attribute of a TLS socket that holds its :class:`Handshake`: the ssl module hands
#: a handshake's SNI callback the socket and nothing else.
HANDSHAKE = "mgmtauth_handshake"


@dataclasses.dataclass(eq=False)
class Handshake:
    """What a TLS handshake's SNI callback (``server.py``) and the connection's handler
    or the proxy's tunnel (``handler.py``, ``hosts.py``) tell each other."""

    #: The test the connection belongs to (set by the handler before the handshake).
    binding: Binding | None = None
    #: The host of the service the client's SNI named, on the listener where the SNI
    #: chooses the certificate (``server.TestCA.by_name_context``).
    sni_host: str | None = None
    #: Why a tunnel's SNI check refused the handshake (``server.TestCA.host_context``).
    sni_problem: str | None = None


def handshake_of(sock: Any) -> Handshake:
    """The :class:`Handshake` of a TLS socket (a new one on first use)."""
    handshake: Handshake | None = getattr(sock, HANDSHAKE, None)
    if handshake is None:
        handshake = Handshake()
        setattr(sock, HANDSHAKE, handshake)
    return handshake


#: Seconds drop_idle_connections waits for the connections it closes to be closed.
DROP_WAIT = 1.0

#: Seconds a connection thread waits to lead again before it ends.
WORKER_IDLE = 30.0

#: select.poll where there is one: polling a connection and the listening socket costs
#: one system call, and no descriptor to create and close.
_poll = getattr(select, "poll", None)


def _peer_closed(connection: socket.socket) -> bool:
    """Whether the client has closed its end (its FIN is waiting to be read): then no
    client holds the connection to reuse, and there is no need to wait for ours. Peeks
    at the TCP stream (under TLS too, below the TLS layer); anything else reads False."""
    try:
        # Readable first: recv on a socket with a timeout waits for data up to it.
        if not _readable_now(connection):
            return False
        return socket.socket.recv(connection, 1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return False


def _readable_now(connection: socket.socket) -> bool:
    """Whether a read of ``connection`` would not wait (bytes, or the client's FIN, are
    there): one system call."""
    if _poll is not None:
        poller = _poll()
        poller.register(connection.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([connection.fileno()], [], [], 0)[0])  # pragma: no cover - Windows


#: Bytes of an answer above which it is never deferred (ConnectionWriter.defer).
LARGE_WRITE = 65536


class ConnectionReader(socket.SocketIO):
    """A connection's raw reader, which tells whether bytes wait (:meth:`bytes_waiting`)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, "rb")
        self._probing = False

    def bytes_waiting(self, buffered: io.BufferedReader[Any]) -> bool:
        """Whether bytes wait past what the request read, in ``buffered`` (this reader's
        buffer) or on the socket: read from the socket only if some are there already.
        One system call at most, where the socket's own non-blocking read takes three
        (the timeout switched off and on again)."""
        self._probing = True
        try:
            return bool(buffered.peek(1))
        except (OSError, ValueError):  # closed, or reset
            return False
        finally:
            self._probing = False

    def readinto(self, buffer: Any) -> int | None:
        if self._probing and not _readable_now(self._sock):  # type: ignore[attr-defined]
            return None  # nothing there: the buffered reader's peek reads b""
        return super().readinto(buffer)


class ConnectionWriter(io.BufferedIOBase):
    """A connection's writer, unbuffered as socketserver's but for two holds:

    - an answer's head until its body's first bytes (:meth:`hold`): the client gets its
      answer in one segment, and wakes once for it;
    - an answer that keeps the connection, until its thread is done with it and about
      to wait for the next request (:meth:`defer`, :meth:`release`): what the thread
      still does after the answer (Werkzeug's drain, closing the response) is done
      while the client waits for it, not while the client's own thread runs on and
      each of its system calls hands the GIL back and forth.

    A large answer (:data:`LARGE_WRITE`) is never deferred."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._held = b""
        self._deferring = False

    def writable(self) -> bool:
        return True

    def hold(self, head: bytes) -> None:
        """Keep ``head`` to go out with the next write, or at :meth:`flush`."""
        self._held += head

    def defer(self) -> None:
        """Keep what is written from now on (up to :data:`LARGE_WRITE`), flushes too,
        until :meth:`release` or :meth:`close`."""
        self._deferring = True

    def release(self) -> None:
        """Write what was deferred; write as it comes from now on."""
        self._deferring = False
        self.flush()

    def write(self, data: Any) -> int:
        with memoryview(data) as view:
            size = view.nbytes
            if self._deferring and len(self._held) + size <= LARGE_WRITE:
                self._held += view
                return size
            self._deferring = False
            if self._held:
                held, self._held = self._held, b""
                self._send(held + view if size else held)
            elif size:
                self._send(view)
            return size

    def flush(self) -> None:
        if self._held and not self._deferring:
            held, self._held = self._held, b""
            self._send(held)

    def close(self) -> None:
        if not self.closed and self._held:
            self._deferring = False
            with contextlib.suppress(OSError):  # the client is gone: nothing to tell it
                self.flush()
        super().close()

    def _send(self, data: Any) -> None:  # one call per write: the tests count them
        self._sock.sendall(data)

    def fileno(self) -> int:
        return self._sock.fileno()


class ConnectionServer(ThreadedWSGIServer):
    daemon_threads = True
    block_on_close = False
    fake_app: FakeApp | None = None
    #: Set on the proxy's listener (intercept option): see _http/hosts.py.
    tunnel_context: Callable[[str], ssl.SSLContext] | None = None
    #: Which listener of the fake it is (``arrival.REGION_LISTENER``, or None for the
    #: fake's own address): each request's Arrival says so.
    listener: str | None = None
    #: Connections accepted so far (the keep-alive benchmark counts them).
    connections_accepted = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._idle_lock = threading.Lock()
        self._idle: set[ConnectionHandler] = set()
        #: Per open connection that drop_idle_connections waits for: set once its thread
        #: has closed it (made by the dropper, not for every connection).
        self._closed: dict[Any, threading.Event] = {}
        #: Per open connection: the test binding current when it was accepted. The one
        #: way a binding reaches a request: from here to the connection's handler
        #: (binding_of), which puts it in each request's Arrival for the app.
        self._bindings: dict[Any, Binding | None] = {}
        #: Connection threads done with their connection, waiting for another.
        self._waiting_workers = 0
        #: A connection (or None: the end, at shutdown) handed to a waiting thread.
        self._jobs: queue.SimpleQueue[tuple[Any, Any, Binding | None] | None] = queue.SimpleQueue()
        #: What the accepting thread waits on: the listening socket (once the app is
        #: open, ``_listening``) and the wake-up socket.
        self._selector: selectors.BaseSelector | None = None
        self._listening = False
        #: shutdown() writes here to wake the accept loop (see serve_forever).
        self._wake_reader, self._wake_writer = socket.socketpair()
        #: A socket always readable (its peer closed): what Werkzeug's drain waits on
        #: after an answer that keeps the connection alive (see handler._after_answer).
        self.always_readable, peer = socket.socketpair()
        peer.close()
        self._stop = threading.Event()
        self._loop_ended = threading.Event()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until :meth:`shutdown`: this thread accepts each connection and hands it
        to a connection thread (one done with its last connection, else a new one).
        socketserver's loop woke every ``poll_interval`` to look for a shutdown request;
        here it sleeps until a connection comes or :meth:`shutdown` wakes it.
        ``poll_interval`` is ignored."""
        try:
            self._selector = selectors.DefaultSelector()
            self._selector.register(self._wake_reader, selectors.EVENT_READ)
            while True:
                job = self._accept_next()
                if job is None:
                    break
                self._hand_over(job)
                del job  # while it waits, this thread keeps no test's binding alive
        finally:
            self._loop_ended.set()
            self.server_close()

    def _accept_next(self) -> tuple[Any, Any, Binding | None] | None:
        """Wait for a connection and accept it, or None once shut down."""
        opened = self.fake_app.opened if self.fake_app is not None else None
        selector = self._selector
        assert selector is not None
        while not self._stop.is_set():
            if not self._listening and (opened is None or opened.is_set()):
                # Not before the app is open (FakeApp.open): until then the listening
                # socket's backlog holds the connections.
                selector.register(self.socket, selectors.EVENT_READ)
                self._listening = True
            ready = selector.select()
            if self._stop.is_set():
                break
            files = [key.fileobj for key, _ in ready]
            if self._wake_reader in files:
                with contextlib.suppress(OSError):
                    self._wake_reader.recv(64)
            if self.socket in files:
                job = self._accept_one()
                self.service_actions()
                if job is not None:
                    return job
        return None

    def _accept_one(self) -> tuple[Any, Any, Binding | None] | None:
        # socketserver's _handle_request_noblock, through its public methods.
        try:
            request, client_address = self.get_request()
        except OSError:
            return None
        if not self.verify_request(request, client_address):
            self.shutdown_request(request)
            return None
        # Which test was bound when the connection was accepted (in accept order,
        # before any client bytes are parsed).
        binding = self.fake_app.current if self.fake_app is not None else None
        self.connections_accepted += 1
        return request, client_address, binding

    def _hand_over(self, job: tuple[Any, Any, Binding | None]) -> None:
        """Give ``job`` to a thread waiting for work, else to a new thread; when no
        thread can be started (the process is at its thread limit), close the connection
        unanswered and tell its test why at its end."""
        with self._idle_lock:
            waiting = self._waiting_workers > 0
            if waiting:
                self._waiting_workers -= 1
        if waiting:
            self._jobs.put(job)
            return
        # In a list it empties: a thread's args live as long as it does.
        thread = threading.Thread(
            target=self._work, args=([job],), daemon=True, name="mgmtauth-connection"
        )
        try:
            thread.start()
        except RuntimeError as exc:
            if job[2] is not None:
                job[2].add_error(
                    RuntimeError(
                        f"pytest-mgmtauth could not start a thread to serve a connection "
                        f"({exc}), so it closed the connection unanswered: the process is "
                        "at its limit of threads"
                    ),
                    "pytest-mgmtauth itself",
                )
            self.shutdown_request(job[0])

    def _work(self, first: list[tuple[Any, Any, Binding | None]]) -> None:
        """A connection thread: serve its connection, then wait a while for another."""
        job: tuple[Any, Any, Binding | None] | None = first.pop()
        while job is not None:
            self._serve_connection(*job)
            job = None  # a waiting thread keeps no test's binding alive
            job = self._next_job()

    def _next_job(self) -> tuple[Any, Any, Binding | None] | None:
        """Done with its connection, a thread waits a while for another: it, or None
        (the wait ended, or the server shut down). A waiting thread costs less than
        starting one."""
        with self._idle_lock:
            if self._stop.is_set():
                return None
            self._waiting_workers += 1
        try:
            return self._jobs.get(timeout=WORKER_IDLE)
        except queue.Empty:
            with self._idle_lock:
                if self._waiting_workers > 0 and self._jobs.empty():
                    self._waiting_workers -= 1
                    return None
            # A connection was handed over as the wait ended: take it.
            return self._jobs.get()

    def wake(self) -> None:
        """Have the loop of :meth:`serve_forever` look at its state again (the app
        opened, or a stop)."""
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"\0")

    def shutdown(self) -> None:
        """Stop the loop of :meth:`serve_forever` and wait for it to end (as
        socketserver's: it must be running, in another thread)."""
        self._stop.set()
        self.wake()
        self._loop_ended.wait()
        with self._idle_lock:  # the threads waiting to lead end now
            waiting, self._waiting_workers = self._waiting_workers, 0
        for _ in range(waiting):
            self._jobs.put(None)

    def server_close(self) -> None:
        super().server_close()
        if self._selector is not None:
            self._selector.close()
        self._wake_reader.close()
        self._wake_writer.close()
        self.always_readable.close()

    def mark_idle(self, handler: ConnectionHandler) -> None:
        """A kept-alive connection waits for its next request."""
        with self._idle_lock:
            self._idle.add(handler)

    def mark_busy(self, handler: ConnectionHandler) -> tuple[bool, Binding | None]:
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
            # Each still open (its thread has not closed it): set once it is.
            closing = [
                self._closed.setdefault(handler.client_socket, threading.Event())
                for handler in idle
                if handler.client_socket in self._bindings
                and not _peer_closed(handler.client_socket)
            ]
        for handler in idle:
            with contextlib.suppress(OSError):
                # The plain socket's shutdown, also under TLS: the handler's thread,
                # waiting in peek() (or still writing its answer, which completes),
                # reads EOF and closes the connection.
                socket.socket.shutdown(handler.client_socket, socket.SHUT_RD)
        deadline = time.monotonic() + DROP_WAIT
        for closed in closing:
            # Closed (the FIN sent) before this returns: a client's pooled connection
            # then reads as closed when the next test reuses it, and is replaced.
            closed.wait(max(0.0, deadline - time.monotonic()))
        return len(idle)

    def _serve_connection(self, request: Any, client_address: Any, binding: Binding | None) -> None:
        with self._idle_lock:
            self._bindings[request] = binding
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._idle_lock:
                closed = self._closed.pop(request, None)
                self._bindings.pop(request, None)
            if closed is not None:
                closed.set()

    def binding_of(self, connection: Any) -> Binding | None:
        """The binding current when ``connection`` was accepted (its handler asks once)."""
        with self._idle_lock:
            return self._bindings.get(connection)

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
