"""What the hostile-input tests share: a raw HTTP client that can send anything, the
"world" (accounts, live credentials and routes on one mgmt_server) and the checks every
hostile request and every hostile run must pass.

Raw sockets on purpose: http.client and requests refuse to send much of what a broken
or malicious client sends (bad header names, lying Content-Length, bare LF, NUL bytes).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import re
import socket
import weakref
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from pytest_mgmtauth import (
    AccountLocked,
    ApiCall,
    AuthRejected,
    BadRequest,
    LoggedIn,
    LoggedOut,
    LoginRejected,
    LogoutRejected,
    SessionExpired,
    Throttled,
    TokenIssued,
    UnknownRoute,
)

if TYPE_CHECKING:
    from pytest_mgmtauth import Account, Event, MgmtServer, RouteHandler

#: Events a request causes (one at most per request). AccountLocked rides along with
#: the LoginRejected that triggered it; SessionExpired is caused by time, not requests.
REQUEST_EVENTS = (
    TokenIssued,
    AuthRejected,
    LoggedIn,
    LoginRejected,
    LoggedOut,
    LogoutRejected,
    Throttled,
    ApiCall,
    BadRequest,
    UnknownRoute,
)
SIDE_EVENTS = (AccountLocked, SessionExpired)

#: Inputs carrying a secret tried by test_hostile_secrets in this process, by test
#: (printed in the terminal summary: see conftest.py).
SECRET_INPUTS_TRIED: dict[str, int] = {}

#: Statuses the HTTP layer (http.server under Werkzeug) answers on its own, before the
#: fake sees the request: a malformed request line or headers, lines or headers too long.
PROTOCOL_STATUSES = frozenset({400, 408, 413, 414, 431})


@dataclasses.dataclass
class RawResponse:
    status: int | None  # None: not an HTTP/1.x status line (e.g. an HTTP/0.9 answer)
    headers: list[tuple[str, str]]
    body: bytes
    raw: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def json(self) -> Any:
        return json.loads(self.body)


def parse_response(raw: bytes) -> RawResponse:
    # Skip interim answers ("100 Continue" to "Expect: 100-continue").
    while re.match(rb"HTTP/1\.[01] 1\d\d ", raw):
        raw = raw.partition(b"\r\n\r\n")[2]
    if not raw.startswith(b"HTTP/"):
        return RawResponse(None, [], raw, raw)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    response = RawResponse(status, headers, body, raw)
    if (response.header("Transfer-Encoding") or "").lower() == "chunked":
        response.body = _dechunk(body)
    return response


def _dechunk(body: bytes) -> bytes:
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2 :]
    return b"".join(out)


def exchange(address: tuple[str, int], raw: bytes, *, timeout: float = 10.0) -> RawResponse:
    """Send ``raw`` as it is, half-close, read the answer to EOF.

    Half-closing means a body shorter than its Content-Length ends in EOF instead of a
    stall (stalls have their own tests). When the server answers early and closes while
    we are still sending (a 431 for a huge header), the answer may be lost to a reset:
    then the response is empty and ``status`` is None.
    """
    with socket.create_connection(address, timeout=timeout) as sock:
        try:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        chunks = []
        while True:
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                break
            if not data:
                break
            chunks.append(data)
    return parse_response(b"".join(chunks))


def build_request(
    method: str | bytes,
    target: str | bytes,
    headers: list[tuple[str | bytes, str | bytes]],
    body: bytes = b"",
    *,
    version: str | bytes = "HTTP/1.1",
    content_length: str | bytes | None = "auto",
    eol: bytes = b"\r\n",
) -> bytes:
    def b(x: str | bytes) -> bytes:
        return x if isinstance(x, bytes) else x.encode("utf-8", "surrogateescape")

    lines = [b(method) + b" " + b(target) + b" " + b(version)]
    lines += [b(name) + b": " + b(value) for name, value in headers]
    if content_length == "auto":
        if body:
            lines.append(b"Content-Length: " + str(len(body)).encode())
    elif content_length is not None:
        lines.append(b"Content-Length: " + b(content_length))
    return eol.join(lines) + eol + eol + body


@dataclasses.dataclass
class World:
    """One mgmt_server with accounts, live credentials and routes, shared by every
    example of one hypothesis run, and the bookkeeping of the checks."""

    fake: MgmtServer
    address: tuple[str, int]
    full: Account
    limited: Account
    token: str
    limited_token: str
    session_id: str
    utk: str
    routes: dict[str, RouteHandler]
    #: Every secret the fake holds or handed out; none may appear whole in an answer
    #: that did not grant it.
    secrets: set[str] = dataclasses.field(default_factory=set)
    requests_sent: int = 0
    #: Requests a test made outside send() (stalled, vanished, slow clients): each may
    #: have made one event, or none if it never arrived whole.
    side_requests: int = 0
    request_events_seen: int = 0
    statuses: dict[int | None, int] = dataclasses.field(default_factory=dict)
    #: The hypothesis strategies of this world, built once (see test_hostile_fuzz).
    strategies: dict[str, Any] = dataclasses.field(default_factory=dict)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints dataclasses field by field, bypassing __repr__.
        printer.text(repr(self))

    def __repr__(self) -> str:
        # Hypothesis prints the fixture in a failure report: no secrets there either.
        return (
            f"<World {self.requests_sent} requests, {self.request_events_seen} events, "
            f"statuses {dict(sorted(self.statuses.items(), key=str))}>"
        )

    # -- the internals the checks look at (the plugin's own tests may) -------------

    @property
    def raw_events(self) -> list[Event]:
        return list(self.fake._service.timeline._events)

    @property
    def errors(self) -> list[BaseException]:
        return self.fake._binding.errors

    # -- requests ------------------------------------------------------------------

    def send(self, raw: bytes, *, timeout: float = 10.0) -> RawResponse:
        """Send one hostile request and check what every answer must satisfy."""
        before = len(self.raw_events)
        response = exchange(self.address, raw, timeout=timeout)
        self.requests_sent += 1
        self.statuses[response.status] = self.statuses.get(response.status, 0) + 1
        new = self.raw_events[before:]
        self.check_answer(raw, response, new)
        return response

    def check_answer(self, raw: bytes, response: RawResponse, new: list[Event]) -> None:
        assert not self.errors, f"the fake raised inside: {self.errors!r}\nrequest: {raw[:500]!r}"
        status = response.status
        # 501 is the one 5xx a client's request earns: a transfer coding the fake does
        # not implement (RFC 9112 6.1).
        not_implemented = status == 501 and b"transfer coding" in response.body
        assert status is None or status < 500 or not_implemented, (
            f"{status} answered to a hostile request\nrequest: {raw[:500]!r}\n"
            f"response: {response.raw[:800]!r}"
        )
        if status is None:  # an HTTP/0.9-style answer: http.server's error page, no 5xx
            assert not re.search(rb"Error code: 5\d\d", response.body), response.raw[:800]
        caused = [e for e in new if isinstance(e, REQUEST_EVENTS)]
        others = [e for e in new if not isinstance(e, (*REQUEST_EVENTS, *SIDE_EVENTS))]
        assert not others, f"unexpected event kinds: {others!r}"
        assert len(caused) <= 1, f"one request made {len(caused)} events: {caused!r}"
        self.request_events_seen += len(caused)
        if caused:
            event = caused[0]
            assert status == _status_of(event), (
                f"the answer was {status} but the event says {event!r}\nrequest: {raw[:500]!r}"
            )
            if isinstance(event, (TokenIssued, LoggedIn)):
                self.harvest(response)
        else:
            # Nothing recorded: only the HTTP layer may have answered, before the fake.
            assert status is None or status in PROTOCOL_STATUSES, (
                f"{status} answered without an event\nrequest: {raw[:500]!r}\n"
                f"response: {response.raw[:800]!r}"
            )
        if any(isinstance(e, AccountLocked) for e in new):
            assert any(isinstance(e, LoginRejected) for e in caused)
        self.check_no_secret(response, granted=caused[0] if caused else None)
        if caused and status is not None and status >= 400 and response.body:
            # The fake's own refusals and errors are JSON with returnCode and message.
            body = response.json()
            assert set(body) >= {"returnCode", "message"}, body

    def harvest(self, response: RawResponse) -> None:
        """A hostile request that happened to be right got a real credential: it is a
        secret from now on."""
        body = response.json()
        for field in ("token", "utk"):
            if field in body:
                self.secrets.add(body[field])
        for name, value in response.headers:
            if name.lower() == "set-cookie" and value.startswith("JSESSIONID="):
                self.secrets.add(value.split(";", 1)[0].split("=", 1)[1])

    def check_no_secret(self, response: RawResponse, granted: Event | None) -> None:
        text = response.raw.decode("latin-1")
        allowed: set[str] = set()
        if isinstance(granted, (TokenIssued, LoggedIn)) and response.status == 200:
            body = response.json()
            allowed = {body.get("token", ""), body.get("utk", "")}
            for name, value in response.headers:
                if name.lower() == "set-cookie" and value.startswith("JSESSIONID="):
                    allowed.add(value.split(";", 1)[0].split("=", 1)[1])
        leaked = [s for s in self.secrets if s not in allowed and s in text]
        assert not leaked, (
            f"a secret appears whole in the answer: {[s[:12] + '...' for s in leaked]}\n"
            f"response: {response.raw[:800]!r}"
        )

    # -- the end of a run ----------------------------------------------------------

    def check_run(self) -> None:
        """After a hostile run: no exception inside, timeline consistent, still serving."""
        assert not self.errors, f"the fake raised inside: {self.errors!r}"
        raw_events = self.raw_events
        caused = [e for e in raw_events if isinstance(e, REQUEST_EVENTS)]
        # Setup made 3 request events (two tokens, one login); every later one was
        # seen, one at most per request, by send(), or came from a side request.
        seen = SETUP_REQUESTS + self.request_events_seen
        assert seen <= len(caused) <= seen + self.side_requests, (len(caused), seen)
        assert self.request_events_seen <= self.requests_sent
        timeline = self.fake.events
        assert timeline == sorted(timeline, key=lambda e: e.at), "events not sorted by time"
        assert sorted(map(id, timeline)) == sorted(map(id, self.raw_events)), (
            "the public timeline and the recorded events differ"
        )
        service = self.fake._service
        issued = [e for e in timeline if isinstance(e, TokenIssued)]
        logins = [e for e in timeline if isinstance(e, LoggedIn)]
        assert len(issued) == len(service.credentials.tokens)
        assert len(logins) == len(service.credentials.sessions)
        assert self.fake.auth_count() == len(issued) + len(logins)
        assert self.fake.auth_count(version="v2") == len(issued)
        # Read together: a handler that answers now (a stalled call whose client went
        # away) adds its ApiCall and its call_count under this lock (issue 43, item 18).
        with self.fake._binding.lock:
            answered = [e for e in self.fake.events if isinstance(e, ApiCall)]
            counted = sum(r.call_count for r in self.routes.values())
        reached = [e for e in answered if e.authenticated]
        assert len(reached) == counted, "calls that reached a handler and ApiCall events disagree"
        self.check_still_serving()

    def check_still_serving(self) -> None:
        """A plain, correct client still gets its token and its answer."""
        self.side_requests += 2
        conn = http.client.HTTPConnection(*self.address, timeout=10)
        try:
            form = urlencode({"username": self.limited.username, "key": self.limited.api_key})
            conn.request(
                "POST",
                "/v2/auth",
                body=form,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            answer = conn.getresponse()
            body = answer.read()
            # 429 is a right answer too, if the hostile run churned this account's tokens.
            assert answer.status in (200, 429), (answer.status, body)
        finally:
            conn.close()
        conn = http.client.HTTPConnection(*self.address, timeout=10)
        try:
            conn.request("GET", "/api/items", headers={"Authorization": f"Bearer {self.token}"})
            answer = conn.getresponse()
            assert (answer.status, json.loads(answer.read())) == (200, {"items": [1, 2, 3]})
        finally:
            conn.close()
        assert not self.errors


SETUP_REQUESTS = 3


def _status_of(event: Event) -> int:
    if isinstance(event, (ApiCall, BadRequest, UnknownRoute)):
        return event.status
    if isinstance(event, (TokenIssued, LoggedIn, LoggedOut)):
        return 200
    if isinstance(event, Throttled):
        return 429
    return 401  # AuthRejected, LoginRejected, LogoutRejected


def setup_world(fake: MgmtServer) -> World:
    """Accounts, credentials and routes for a hostile run, made with a correct client."""
    host, port = fake.url.removeprefix("http://").split(":")
    address = (host, int(port))
    full = fake.add_account()
    limited = fake.add_account(permissions=[])
    routes = {
        "items": fake.route("GET", "/api/items"),
        "write": fake.route("POST", "/api/items", permission="items:write"),
        "thing": fake.route("GET", re.compile(r"^/api/things/\d+$")),
        "v1items": fake.route("GET", "/v1/items"),
        "echo": fake.route("PUT", "/api/echo"),
    }
    routes["items"].respond_with_json({"items": [1, 2, 3]})
    routes["write"].respond_with_json({"written": True}, status=201)
    routes["thing"].respond_with_json({"thing": True})
    routes["v1items"].respond_with_json({"v1": True})
    routes["echo"].respond_with_handler(_echo_length)

    def post(path: str, fields: dict[str, str]) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request(
            "POST",
            path,
            body=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        response = conn.getresponse()
        weakref.finalize(response, conn.close)  # kept alive: close it with the answer
        return response

    tokens = []
    for account in (full, limited):
        answer = post("/v2/auth", {"username": account.username, "key": account.api_key})
        assert answer.status == 200
        tokens.append(json.loads(answer.read())["token"])
    answer = post("/v1/login", {"username": full.username, "password": full.password})
    assert answer.status == 200
    utk = json.loads(answer.read())["utk"]
    cookie = next(v for k, v in answer.getheaders() if v.startswith("JSESSIONID="))
    session_id = cookie.split(";", 1)[0].split("=", 1)[1]
    world = World(
        fake=fake,
        address=address,
        full=full,
        limited=limited,
        token=tokens[0],
        limited_token=tokens[1],
        session_id=session_id,
        utk=utk,
        routes=routes,
    )
    world.secrets |= {
        full.api_key,
        full.password,
        limited.api_key,
        limited.password,
        *tokens,
        utk,
        session_id,
    }
    return world


def _echo_length(request: Any) -> Any:
    from werkzeug import Response

    return Response(json.dumps({"length": len(request.get_data())}), 200)
