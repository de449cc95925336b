"""What one test binds to the session's HTTP server: its service, the routes it declared
(:class:`RouteHandler`, what ``mgmt_server.route()`` returns), the errors raised while
answering for it (those raised after it ended go to the session's :class:`LateErrors`)
and its request log (:class:`RequestLog` of :class:`RecordedRequest`).

The request log holds every request the fake answered for the test, as it arrived
(``mgmt_server.requests``, ``GET /_mgmtauth/requests``), refused ones included. Entries
are kept as they arrived and masked when read, with the test's secret masker: a secret
handed out after a request (a session's id, say) is masked in it too, and the requests
of a test cost no masking unless the test reads them, and an entry read is masked once
while no secret is added (``len()`` masks nothing). The log is bounded in entries and
in size: a text over its limit is masked whole at once and cut, with a marker saying so, and
the oldest entries are dropped and counted (``mgmt_server.requests.dropped``).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import re
import threading
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

from pytest_httpserver import RequestHandler, RequestMatcher

from .._service.exchange_shape import REFUSED_STATUSES, Exchange
from .._service.flows.registry import HostPlan
from .._service.timeline import to_datetime

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
    from datetime import datetime

    from pytest_httpserver.httpserver import HEADERS_T
    from werkzeug import Request, Response

    from .._service.rate_limits import Rate
    from .._service.service import AuthService
    from .forward import LiveTest


class RouteHandler(RequestHandler):
    """What ``mgmt_server.route()`` returns: a pytest-httpserver ``RequestHandler``, so
    its answer is declared the same way, that the fake authenticates every call to
    before it answers. Unlike pytest-httpserver's, each ``respond_with_*`` returns the
    handler, so one expression declares a route and keeps it:
    ``things = mgmt_server.route("GET", "/api/things").respond_with_json([])``, then
    ``things.call_count``."""

    def __init__(
        self,
        method: str,
        path: str | re.Pattern[str],
        *,
        permission: str | None,
        auth: str,
        host: str | None = None,
        scope: str | None = None,
        rate_limit: Rate | None = None,
    ) -> None:
        super().__init__(RequestMatcher(path, method=method))
        self.method = method
        """The method declared."""
        self.path = path
        """The path (or pattern) declared."""
        self.permission = permission
        """The permission declared (``None``: any authenticated account)."""
        self.auth = auth
        """The credential it takes: ``auth`` resolved to ``"v1"``, ``"v2"``, ``"v3"`` or
        ``"oauth"``."""
        self.host = host
        """The only host it answers on (``route(host=...)``); ``None``: its flow's API
        hosts."""
        self.scope = scope
        """The scope a call needs (a flow whose tokens carry scopes); ``{name}`` parts
        are filled from the named groups of a regex path."""
        self.rate_limit = None if rate_limit is None else str(rate_limit)
        """Its own rate limit, as ``route(rate_limit=...)`` declared it (``"50/s"``):
        calls past it answer 429; ``None``: the option ``rate_limits`` decides."""
        #: The same, read (what the rate rule takes).
        self.rate = rate_limit
        self.call_count = 0
        """How many calls passed authentication and were answered by this handler (its
        answer, or a 500 when it raised): one per ``ApiCall`` event of the route in the
        timeline, counted when the handler returns (a call still in the handler is in
        neither)."""

    # pytest-httpserver's respond_with_* return None; these return the handler itself,
    # so that ``things = mgmt_server.route(...).respond_with_json([])`` keeps it at hand
    # (``things.call_count``). The base class calls them on self, so they stay in step.

    def respond_with_json(  # type: ignore[override]
        self,
        response_json: Any,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> RouteHandler:
        """Answer with ``response_json`` as JSON; returns this handler."""
        super().respond_with_json(response_json, status, headers, content_type)
        return self

    def respond_with_data(  # type: ignore[override]
        self,
        response_data: str | bytes = "",
        status: int = 200,
        headers: HEADERS_T | None = None,
        mimetype: str | None = None,
        content_type: str | None = None,
    ) -> RouteHandler:
        """Answer with raw data; returns this handler."""
        super().respond_with_data(response_data, status, headers, mimetype, content_type)
        return self

    def respond_with_response(self, response: Response) -> RouteHandler:  # type: ignore[override]
        """Answer with a ready ``werkzeug.Response``; returns this handler."""
        super().respond_with_response(response)
        return self

    def respond_with_handler(  # type: ignore[override]
        self, func: Callable[[Request], Response]
    ) -> RouteHandler:
        """Answer with ``func(request)``, called with the ``werkzeug.Request``; it returns
        a ``werkzeug.Response`` (a ``str`` is wrapped in one). Returns this handler."""
        super().respond_with_handler(func)
        return self

    def required_scope(self, normalized: str) -> str | None:
        """The scope a call needs: :attr:`scope`, its ``{name}`` parts filled from the
        named groups of the call's path as a gateway that normalizes it reads it
        (``normalized``: ``/p/main/../other`` names ``other``; a part left unfilled
        needs a scope no token has)."""
        if self.scope is None or "{" not in self.scope or isinstance(self.path, str):
            return self.scope
        found = self.path.search(normalized)
        groups = found.groupdict() if found is not None else {}
        return re.sub(r"\{(\w+)\}", lambda m: groups.get(m[1]) or m[0], self.scope)

    def __repr__(self) -> str:
        perm = f", permission={self.permission!r}" if self.permission else ""
        if self.scope:
            perm += f", scope={self.scope!r}"
        host = f", host={self.host}" if self.host else ""
        if self.rate_limit is not None:
            host += f", rate_limit={self.rate_limit!r}"
        return f"<route {self.method} {self.path} auth={self.auth}{perm}{host}>"


class LateErrors:
    """Errors raised while answering a request of a test that had already ended (its
    client gave up waiting, its handler went on), kept for the end of the session: no
    test is left to re-raise them in, and they must not be lost.

    Also counts the route handlers running now, so that the session's end can wait a
    little for one that is still at work before it reports."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        #: (test id, where, exception), in the order they were raised.
        self.errors: list[tuple[str, str, BaseException]] = []
        self._running: dict[tuple[str, RouteHandler], int] = {}
        self._waiting = 0  # in wait_idle: notified only then

    def add(self, owner: str, where: str, error: BaseException) -> None:
        with self._changed:
            self.errors.append((owner, where, error))

    # Two plain calls around a handler, not a context manager: they are on every
    # protected call, and a handler is described only if the session's end waits for it.
    def started(self, owner: str, route: RouteHandler) -> None:
        """``route``'s handler starts answering a call of the test ``owner``."""
        key = (owner, route)
        with self._lock:
            self._running[key] = self._running.get(key, 0) + 1

    def returned(self, owner: str, route: RouteHandler) -> None:
        """The handler of :meth:`started` returned (or raised)."""
        key = (owner, route)
        with self._lock:
            self._running[key] -= 1
            if not self._running[key]:
                del self._running[key]
                if not self._running and self._waiting:
                    self._changed.notify_all()  # what wait_idle waits for

    def wait_idle(self, timeout: float) -> list[tuple[str, str]]:
        """Wait up to ``timeout`` seconds for every running handler to return; the
        (test id, handler) of those still running then."""
        with self._changed:
            self._waiting += 1
            try:
                self._changed.wait_for(lambda: not self._running, timeout)
            finally:
                self._waiting -= 1
            return sorted((owner, f"the handler of {route!r}") for owner, route in self._running)


class Binding:
    """One test's state, as the HTTP side sees it."""

    def __init__(
        self, service: AuthService, *, owner: str = "", late: LateErrors | None = None
    ) -> None:
        self.service = service
        #: The test this state belongs to (its node id), named in late errors.
        self.owner = owner or "the test"
        #: Its node id, or None (mgmtauth-server's state): the request log's ``test``.
        self.test_id = owner or None
        #: The requests answered for it (``mgmt_server.requests``).
        self.requests = RequestLog(service.timeline.redact)
        self.routes: list[RouteHandler] = []
        #: Exceptions raised while answering (the fake's own, or a route handler's):
        #: re-raised in the test at teardown, never lost; those raised after the test
        #: ended go to ``late`` (reported at the end of the session).
        self.errors: list[BaseException] = []
        self.late = late if late is not None else LateErrors()
        self.lock = threading.Lock()
        #: Set when the test ends: requests held by a scripted hang give up at once.
        self.closed = threading.Event()
        #: The binding that answers in its place once it is closed (mgmtauth-server's
        #: reset); None under pytest: a request of an ended test belongs to no test.
        self.successor: Binding | None = None
        #: How this test's fake stands in for the service's hosts (set by the fake).
        self.hosts = HostPlan(service.options.v3_host, service.options.intercept)
        #: The port of the region address (its listener started on first use); 0 when
        #: the app is driven without one.
        self.region_port: Callable[[], int] = lambda: 0
        #: The port of the fake's own address (0: the one a request arrived at).
        self.main_port = 0
        #: In a live run, its link to the service: every request is forwarded.
        self.live: LiveTest | None = None
        #: Its exchanges, for the drift check: kept only for a test that asked
        #: (``MgmtServer.record_exchanges``), so a test without a snapshot pays one
        #: attribute read per request. Kept raw; ``_service/exchange_shape.py`` reads them.
        self.exchanges: list[Exchange] | None = None

    def add_error(self, error: BaseException, where: str) -> None:
        with self.lock:
            if not self.closed.is_set():
                self.errors.append(error)
                return
        self.late.add(self.owner, where, error)

    def keep_exchange(self, request: Request, response: Response, *, protected: bool) -> None:
        """Add the exchange to :attr:`exchanges`, if it keeps them. ``protected``: whether it
        is an API call, a call to a declared route (any other path the fake does not serve,
        an unknown route's 404, is recorded whole, like an endpoint's answer)."""
        kept = self.exchanges
        if kept is None:
            return
        status = response.status_code
        # A protected call's data body is never read (nor kept): only a refusal's shape.
        body = b"" if protected and status not in REFUSED_STATUSES else response.get_data()
        kept.append(
            Exchange(
                method=request.method,
                path=request.path,
                status=status,
                headers=tuple(response.headers.items()),
                body=body,
                protected=protected,
            )
        )

    def log_refused(
        self, method: str, target: str, headers: tuple[tuple[str, str], ...], status: int
    ) -> None:
        """Log a request answered outside the app (the proxy's refused ``CONNECT``, whose
        target is the path), as the app logs the requests it answers."""
        self.requests.add(
            RecordedRequest(
                method=method,
                host=next((v for k, v in headers if k.lower() == "host"), ""),
                path=target,
                query="",
                headers=headers,
                body=None,
                status=status,
                at=to_datetime(self.service.timeline.now()),
                test=self.test_id,
            )
        )

    def close(self) -> None:
        with self.lock:
            self.closed.set()
            # Raised after the test re-raised its errors, before it ended: late too.
            leftover, self.errors = self.errors, []
        for error in leftover:
            self.late.add(self.owner, "answering a request", error)


# -- the request log ---------------------------------------------------------------

#: Most requests one test's log keeps; beyond it, the oldest are dropped.
REQUEST_LOG_SIZE = 1000
#: Most text the log of one test keeps (characters: bytes, for the ASCII requests are
#: mostly made of); beyond it, the oldest entries are dropped.
REQUEST_LOG_BYTES = 4 * 1024 * 1024
#: Most characters kept of one header name or value; of the body, path or query (which
#: the fake's limits hold to 64 KiB already), :data:`REQUEST_LOG_TEXT`.
REQUEST_LOG_HEADER = 16 * 1024
REQUEST_LOG_TEXT = 64 * 1024
#: How much of a cut text's end is left out besides: the text is masked whole before it
#: is cut, so a secret held then is masked whatever its length; this covers a secret
#: handed out later, masked when the log is read (a 60-character key encoded three
#: times, in Basic credentials, is under 1 KiB), so no piece of one is kept.
CUT_MARGIN = 4096


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """One request the fake answered for a test, as it arrived, secrets masked: an entry
    of ``mgmt_server.requests``, a frozen dataclass."""

    method: str
    """The request method."""
    host: str
    """The ``Host`` header as sent (``""`` without one)."""
    path: str
    """The path of the request target as sent, percent-escapes kept (routes match the
    decoded path)."""
    query: str
    """The query string as sent, without the ``?`` (``""`` without one)."""
    headers: tuple[tuple[str, str], ...]
    """Every header line as ``(name, value)`` pairs, in order, repeated ones included."""
    body: str | None
    """The body as the fake read it (decoded as UTF-8, bytes that are not UTF-8 as
    ``\\xNN``), or ``None`` when the answer did not need it: an unknown route, a framing
    error, a body over 64 KiB. A body sent with ``Content-Encoding: gzip`` or ``deflate``
    (or starting as gzip does) is kept decompressed, after a line ``[gzip body,
    decompressed by the request log: N bytes sent]``; one that does not decompress whole
    within 64 KiB, or in another coding, is not kept: ``[a br body the request log did
    not keep: why; N bytes sent]`` stands for it."""
    status: int | None
    """The status the fake answered, ``None`` for a scripted reset (no answer)."""
    at: datetime
    """When it arrived, on the fake's clock (a UTC ``datetime``, as in events)."""
    test: str | None = None
    """The node id of the test it belongs to; ``None`` in mgmtauth-server."""
    diagnosis: str | None = None
    """Why the fake refused it, for an error the fake answered itself (its
    ``X-Mgmtauth-Diagnosis`` header, masked): the diagnosis a published error body has no
    room for (v3's ``{"message": "Unauthorized"}``); ``None`` for an answer of a route's
    handler and for successes."""

    def header(self, name: str) -> str | None:
        """The first value of the header ``name`` (any case), or None."""
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), None)

    def masked(self, mask: Callable[[str], str]) -> RecordedRequest:
        """This entry with ``mask`` applied to every text that came from the client."""
        return dataclasses.replace(
            self,
            method=mask(self.method),
            host=mask(self.host),
            path=mask(self.path),
            query=mask(self.query),
            headers=tuple((mask(k), mask(v)) for k, v in self.headers),
            body=None if self.body is None else mask(self.body),
            diagnosis=None if self.diagnosis is None else mask(self.diagnosis),
        )

    def cut(self, mask: Callable[[str], str], header: int, text: int) -> RecordedRequest:
        """This entry with each text over its limit (``header`` for a header's name or
        value, ``text`` for the rest) masked and cut, with a marker saying so."""
        longest = max(len(self.method), len(self.path), len(self.query), len(self.body or ""))
        if (
            longest <= text
            and max(map(len, itertools.chain((self.host,), *self.headers))) <= header
        ):
            return self  # nothing over its limit (almost every request): no copy

        def kept(value: str, limit: int) -> str:
            if len(value) <= limit:
                return value
            # Masked whole before it is cut (a secret the cut goes through is masked,
            # whatever its length), and the end left out besides (one handed out later
            # is left out whole): never kept in part.
            masked = mask(value)
            head = masked[: max(0, min(limit, len(masked)) - CUT_MARGIN)]
            return f"{head}{CUT_MARKER.format(total=len(value))}"

        return dataclasses.replace(
            self,
            method=kept(self.method, text),
            host=kept(self.host, header),
            path=kept(self.path, text),
            query=kept(self.query, text),
            headers=tuple((kept(k, header), kept(v, header)) for k, v in self.headers),
            body=None if self.body is None else kept(self.body, text),
        )

    def size(self) -> int:
        """The characters of text it holds."""
        texts = (self.method, self.host, self.path, self.query, self.body or "")
        return sum(map(len, texts)) + sum(map(len, itertools.chain.from_iterable(self.headers)))


#: What ends a text the request log cut (docs/reference.md).
CUT_MARKER = "...[cut by the request log: {total} characters in all]"
#: What starts a compressed body the log keeps decompressed (docs/reference.md).
DECOMPRESSED_NOTE = "[{coding} body, decompressed by the request log: {sent} bytes sent]\n"
#: What stands for a compressed body the log does not keep (docs/reference.md).
UNKEPT_MARKER = "[a {coding} body the request log did not keep: {why}; {sent} bytes sent]"
#: Gzip's first two bytes: a body that starts so is read as gzip even without a
#: Content-Encoding, so that no compressed secret is kept.
GZIP_MAGIC = b"\x1f\x8b"
#: Most members of a gzip body (each a whole gzip stream) the log decompresses.
GZIP_MEMBERS = 16


class _NotKept(Exception):
    """Why a compressed body is not kept (``str()``)."""


def _inflated(data: bytes, wbits: int, members: int, budget: int) -> bytes:
    """``data`` decompressed (``wbits`` as :func:`zlib.decompressobj` takes it; up to
    ``members`` streams one after the other), or :class:`_NotKept` if that is over
    ``budget`` bytes: a zip bomb is stopped there, never inflated. :class:`zlib.error`
    if it does not decompress whole."""
    out = bytearray()
    rest = data
    for _ in range(members):
        inflater = zlib.decompressobj(wbits)
        out += inflater.decompress(rest, budget + 1 - len(out))
        if len(out) > budget or inflater.unconsumed_tail:
            raise _NotKept(f"it decompresses to over {budget} bytes")
        if not inflater.eof:
            raise zlib.error("the stream ends early")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)
    raise zlib.error(f"data after {members} stream(s)")


def _decompressed(data: bytes, coding: str, budget: int) -> bytes:
    """``data`` with the content coding ``coding`` undone (gzip, with its members one
    after the other; deflate, zlib-wrapped as RFC 9110 says or raw as some clients send
    it), or :class:`_NotKept` saying why not."""
    if coding in ("gzip", "x-gzip"):
        attempts = [(16 + zlib.MAX_WBITS, GZIP_MEMBERS)]
    elif coding == "deflate":
        attempts = [(zlib.MAX_WBITS, 1), (-zlib.MAX_WBITS, 1)]
    else:
        raise _NotKept(f"it cannot decompress {coding!r}")
    for wbits, members in attempts:
        try:
            return _inflated(data, wbits, members, budget)
        except zlib.error:
            continue
    raise _NotKept(f"it does not decompress as {coding}")


def logged_body(body: bytes, headers: Iterable[tuple[str, str]]) -> str:
    """``body`` as the request log keeps it: decoded as UTF-8 (bytes that are not, as
    ``\\xNN``), decompressed first after a note when its Content-Encoding is gzip or
    deflate (or it starts as gzip does), within :data:`REQUEST_LOG_TEXT` bytes; a
    compressed body it cannot read so is not kept, a marker says why (a secret inside
    would be kept unmasked)."""
    if not body:  # most requests: nothing to decode, whatever the headers say
        return ""
    codings = [
        coding.strip().lower()
        for name, value in headers
        if name.lower() == "content-encoding"
        for coding in value.split(",")
        if coding.strip() and coding.strip().lower() != "identity"
    ]
    if not codings and body.startswith(GZIP_MAGIC):
        codings = ["gzip"]
    if not codings:
        return body.decode("utf-8", "backslashreplace")
    shown = ", ".join(codings)
    data = body
    try:
        for coding in reversed(codings):  # the last one applied is undone first
            data = _decompressed(data, coding, REQUEST_LOG_TEXT)
    except _NotKept as exc:
        return UNKEPT_MARKER.format(coding=shown, why=exc, sent=len(body))
    note = DECOMPRESSED_NOTE.format(coding=shown, sent=len(body))
    return note + data.decode("utf-8", "backslashreplace")


class _Kept:
    """An entry of the log as it arrived, and its masked form once read (with the masker's
    generation it was masked at: a secret handed out since is masked on the next read)."""

    __slots__ = ("entry", "masked")

    def __init__(self, entry: RecordedRequest) -> None:
        self.entry = entry
        self.masked: tuple[Hashable, RecordedRequest] | None = None

    def read(self, mask: Callable[[str], str], generation: Hashable) -> RecordedRequest:
        key = (mask, generation)
        cached = self.masked  # one read of the slot: another thread may set it
        if cached is not None and cached[0] == key:
            return cached[1]
        masked = self.entry.masked(mask)
        self.masked = (key, masked)
        return masked


class LoggedRequests(Sequence[RecordedRequest]):
    """What ``mgmt_server.requests`` returns: the requests kept, oldest first (a sequence:
    index, slice, iterate, ``len``, ``==`` a list; ``list(...)`` makes a list), and
    :attr:`dropped`, how many earlier ones the log no longer holds. An entry is masked
    when it is read, once while no secret is added: ``len()`` and ``dropped`` mask
    nothing, and reading a few entries of a full log costs what those few cost."""

    def __init__(
        self,
        entries: list[_Kept],
        dropped: int,
        mask: Callable[[str], str],
        generation: Callable[[], Hashable],
    ) -> None:
        self._kept = entries
        self._mask = mask
        self._generation = generation
        #: Earlier requests dropped to stay within the log's bounds: more than
        #: :data:`REQUEST_LOG_SIZE` requests, or :data:`REQUEST_LOG_BYTES` of text.
        self.dropped = dropped

    def __len__(self) -> int:
        return len(self._kept)

    @overload
    def __getitem__(self, index: int) -> RecordedRequest: ...

    @overload
    def __getitem__(self, index: slice) -> list[RecordedRequest]: ...

    def __getitem__(self, index: int | slice) -> RecordedRequest | list[RecordedRequest]:
        generation = self._generation()
        if isinstance(index, slice):
            return [kept.read(self._mask, generation) for kept in self._kept[index]]
        return self._kept[index].read(self._mask, generation)

    def __iter__(self) -> Iterator[RecordedRequest]:
        for kept in self._kept:
            yield kept.read(self._mask, self._generation())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Sequence, LoggedRequests)) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to a list, unhashable like one

    def __repr__(self) -> str:
        return f"LoggedRequests({list(self)!r}, dropped={self.dropped})"


class RequestLog:
    """The last requests of one test, oldest first: at most ``size`` of them and
    ``total`` characters of text; a header's name or value over ``header`` characters,
    another text over ``text``, is masked with ``mask`` at once and cut."""

    def __init__(
        self,
        mask: Callable[[str], str] = str,
        *,
        size: int = REQUEST_LOG_SIZE,
        total: int = REQUEST_LOG_BYTES,
        header: int = REQUEST_LOG_HEADER,
        text: int = REQUEST_LOG_TEXT,
    ) -> None:
        self._lock = threading.Lock()
        self._entries: collections.deque[_Kept] = collections.deque()
        self._sizes: collections.deque[int] = collections.deque()
        self._mask = mask
        self._limits = (size, total, header, text)
        self._total = 0
        #: Entries dropped so far, the oldest first.
        self.dropped = 0

    def add(self, entry: RecordedRequest) -> None:
        size, total, header, text = self._limits
        entry = entry.cut(self._mask, header, text)
        entry_size = entry.size()
        with self._lock:
            self._entries.append(_Kept(entry))
            self._sizes.append(entry_size)
            self._total += entry_size
            while len(self._entries) > 1 and (len(self._entries) > size or self._total > total):
                self._entries.popleft()
                self._total -= self._sizes.popleft()
                self.dropped += 1

    def entries(
        self, mask: Callable[[str], str], generation: Callable[[], Hashable] | None = None
    ) -> LoggedRequests:
        """Every entry kept, oldest first, each masked with ``mask`` when it is read.
        ``generation`` changes when ``mask`` comes to mask more (the masker's
        generation): an entry masked at one generation is kept masked for the reads
        that follow at the same one. Without it, each read masks again."""
        with self._lock:
            entries, dropped = list(self._entries), self.dropped
        return LoggedRequests(entries, dropped, mask, generation or object)
