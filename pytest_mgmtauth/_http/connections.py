"""The session server's socket side: accepting connections (TLS wrapped, its handshake
deferred to the connection's thread), a thread per connection that notes which test was
bound when it was accepted, and the kept-alive connections idle between requests, which
:meth:`ConnectionServer.drop_idle_connections` closes at a test's end."""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import select
import selectors
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from werkzeug.serving import ThreadedWSGIServer

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable

    from .app import FakeApp
    from .binding import Binding

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

#: Seconds a connection thread waits for another connection before it ends.
WORKER_IDLE = 30.0


def _peer_closed(connection: socket.socket) -> bool:
    """Whether the client has closed its end (its FIN is waiting to be read): then no
    client holds the connection to reuse, and there is no need to wait for ours. Peeks
    at the TCP stream (under TLS too, below the TLS layer); anything else reads False."""
    try:
        # Readable first: recv on a socket with a timeout waits for data up to it.
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(connection.fileno(), select.POLLIN)
            readable = bool(poller.poll(0))
        else:  # pragma: no cover - Windows
            readable = bool(select.select([connection.fileno()], [], [], 0)[0])
        if not readable:
            return False
        return socket.socket.recv(connection, 1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return False


class _Connection(Protocol):
    """A connection's request handler, as the server keeps track of it."""

    connection: Any


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
        self._idle: set[_Connection] = set()
        #: Per open connection: set once its thread has closed it.
        self._closed: dict[Any, threading.Event] = {}
        #: Per open connection: the test binding current when it was accepted. The one
        #: way a binding reaches a request: from here to the connection's handler
        #: (binding_of), which puts it in each request's Arrival for the app.
        self._bindings: dict[Any, Binding | None] = {}
        #: Connection threads done with their connection, waiting for another one.
        self._waiting_workers = 0
        self._handoff: queue.SimpleQueue[tuple[Any, Any, Binding | None]] = queue.SimpleQueue()
        #: shutdown() writes here to wake the accept loop (see serve_forever).
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._stop = threading.Event()
        self._loop_ended = threading.Event()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept connections until :meth:`shutdown`. socketserver's loop wakes every
        ``poll_interval`` to look for a shutdown request, so ``stop()`` waited up to that
        long at every session's end, and the
        loop took the GIL 20 times a second all session long. This one sleeps until a
        connection comes or :meth:`shutdown` wakes it. ``poll_interval`` is ignored."""
        opened = self.fake_app.opened if self.fake_app is not None else None
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._wake_reader, selectors.EVENT_READ)
                listening = False
                while not self._stop.is_set():
                    if not listening and (opened is None or opened.is_set()):
                        # Not before the app is open (FakeApp.open): until then the
                        # listening socket's backlog holds the connections.
                        selector.register(self.socket, selectors.EVENT_READ)
                        listening = True
                    ready = selector.select()
                    if self._stop.is_set():
                        break
                    if any(key.fileobj is self._wake_reader for key, _ in ready):
                        with contextlib.suppress(OSError):
                            self._wake_reader.recv(64)
                    if any(key.fileobj is self.socket for key, _ in ready):
                        self._accept_one()
                        self.service_actions()
        finally:
            self._loop_ended.set()
            self.server_close()

    def _accept_one(self) -> None:
        # socketserver's _handle_request_noblock, through its public methods.
        try:
            request, client_address = self.get_request()
        except OSError:
            return
        if not self.verify_request(request, client_address):
            self.shutdown_request(request)
            return
        try:
            self.process_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
            self.shutdown_request(request)
        except BaseException:
            self.shutdown_request(request)
            raise

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

    def server_close(self) -> None:
        super().server_close()
        self._wake_reader.close()
        self._wake_writer.close()

    def mark_idle(self, handler: _Connection) -> None:
        """A kept-alive connection waits for its next request."""
        with self._idle_lock:
            self._idle.add(handler)

    def mark_busy(self, handler: _Connection) -> tuple[bool, Binding | None]:
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
            closing = [
                self._closed.get(handler.connection)
                for handler in idle
                if not _peer_closed(handler.connection)
            ]
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
        with self._idle_lock:
            reuse = self._waiting_workers > 0
            if reuse:
                self._waiting_workers -= 1
        if reuse:
            self._handoff.put((request, client_address, binding))
            return
        # In a list the thread empties: a Thread keeps its args until its target returns.
        thread = threading.Thread(
            target=self._worker,
            args=([(request, client_address, binding)],),
            daemon=True,
            name="mgmtauth-connection",
        )
        try:
            thread.start()
        except RuntimeError as exc:
            # No thread to serve it (the process is at its thread limit): the client sees
            # its connection closed (_accept_one), and the test is told why at its end
            # rather than left with an unexplained reset.
            if binding is not None:
                binding.add_error(
                    RuntimeError(
                        f"pytest-mgmtauth could not start a thread to serve a connection "
                        f"({exc}), so it closed the connection unanswered: the process is "
                        "at its limit of threads"
                    ),
                    "pytest-mgmtauth itself",
                )
            raise

    def _worker(self, first: list[tuple[Any, Any, Binding | None]]) -> None:
        """Serve a connection, then wait a while for the next one to serve: handing a
        connection to a waiting thread costs less than starting a thread (and the GIL
        handoffs of a thread's start), twice per test for a client without a Session."""
        # Only `job` names the connection, dropped before the wait: a waiting thread
        # keeps no test's binding (and service) alive.
        job: tuple[Any, Any, Binding | None] | None = first.pop()
        while job is not None:
            self._serve_connection(*job)
            job = None
            with self._idle_lock:
                self._waiting_workers += 1
            try:
                job = self._handoff.get(timeout=WORKER_IDLE)
            except queue.Empty:
                with self._idle_lock:
                    if self._waiting_workers > 0 and self._handoff.empty():
                        self._waiting_workers -= 1
                        return
                # A connection was handed over as the wait ended: serve it.
                job = self._handoff.get()

    def _serve_connection(self, request: Any, client_address: Any, binding: Binding | None) -> None:
        closed = threading.Event()
        with self._idle_lock:
            self._closed[request] = closed
            self._bindings[request] = binding
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._idle_lock:
                self._closed.pop(request, None)
                self._bindings.pop(request, None)
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
