"""Requests in, domain calls, JSON out: the endpoints of the fake service.

The HTTP server is shared by a whole test session; each test binds its own state
(an :class:`~pytest_mgmtauth._domain._service.AuthService` and its routes) for its
duration. A request that arrives while no test is bound gets 503.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import TYPE_CHECKING, Any

from pytest_httpserver import RequestHandler, RequestMatcher
from werkzeug import Request, Response
from werkzeug.exceptions import ClientDisconnected, HTTPException

from .._domain._service import SERVICE_MESSAGES, Authorization, AuthService, Refusal
from .._domain._v3 import V3_AUTH_PREFIX, auth_path_scope, wrong_auth_path
from ._errors import error_response, json_response, masked_error
from ._parsing import (
    BadInput,
    bearer_token,
    client_kind,
    read_body,
    read_form,
    session_credentials,
)

if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterator, Mapping

    from pytest_httpserver.httpserver import HEADERS_T

    from .._domain._faults import ScriptedFault

AUTH_PATH = "/v2/auth"
LOGIN_PATH = "/v1/login"
LOGOUT_PATH = "/v1/logout"
BUILTIN_PATHS = (AUTH_PATH, LOGIN_PATH, LOGOUT_PATH)
#: Where mgmtauth-server mounts its control API (reserved: no user route under it).
CONTROL_PREFIX = "/_mgmtauth"
#: The status codes v3 auth's public documentation lists (and 5xx).
V3_STATUSES = (200, 400, 401, 404, 429)

#: Cookie attributes of the interface document; the path is the real service's.
COOKIE_PATH = "/urest_service"
REMEMBER_ME = (
    f"rememberMe=deleteMe; Path={COOKIE_PATH}; Max-Age=0; Expires=Sat, 01-Jan-2000 00:00:00 GMT"
)
#: Success headers of /v2/auth and /v1/login, as the interface document lists them.
SUCCESS_HEADERS: tuple[tuple[str, str], ...] = (
    ("Cache-Control", "no-cache,no-store,must-revalidate"),
    ("Pragma", "no-cache"),
    ("Expires", "0"),
    ("X-XSS-Protection", "1;mode=block"),
    ("X-NodeId", "mgmtauth-node-1"),
    ("X-Version", "pytest-mgmtauth"),
)


def refusal_response(refusal: Refusal) -> Response:
    extra: dict[str, Any] = {}
    if refusal.retry_after is not None:
        extra["retryAfter"] = refusal.retry_after
    response = error_response(refusal.status, refusal.return_code, refusal.message, **extra)
    if refusal.retry_after is not None:
        response.headers["Retry-After"] = str(refusal.retry_after)
    return response


class RouteHandler(RequestHandler):
    """What ``mgmt_server.route()`` returns: a pytest-httpserver handler (so
    ``respond_with_json``/``_data``/``_handler`` work as there) that the fake
    authenticates every call to before it answers."""

    def __init__(
        self, method: str, path: str | re.Pattern[str], *, permission: str | None, auth: str
    ) -> None:
        super().__init__(RequestMatcher(path, method=method))
        self.method = method
        self.path = path
        self.permission = permission
        self.auth = auth
        #: Calls that passed authentication and reached this handler.
        self.call_count = 0

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
        """Answer with ``response_json`` serialized; returns this handler."""
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
        """Answer with ``response_data`` as it is; returns this handler."""
        super().respond_with_data(response_data, status, headers, mimetype, content_type)
        return self

    def respond_with_response(self, response: Response) -> RouteHandler:  # type: ignore[override]
        """Answer with this werkzeug ``Response``; returns this handler."""
        super().respond_with_response(response)
        return self

    def respond_with_handler(  # type: ignore[override]
        self, func: Callable[[Request], Response]
    ) -> RouteHandler:
        """Answer with what ``func(request)`` returns; returns this handler."""
        super().respond_with_handler(func)
        return self

    def __repr__(self) -> str:
        perm = f", permission={self.permission!r}" if self.permission else ""
        return f"<route {self.method} {self.path} auth={self.auth}{perm}>"


#: WSGI environ key: the :class:`Binding` current when the request's connection was
#: accepted (set by the server; absent when the app is driven without it).
ACCEPTED_BINDING = "mgmtauth.binding"
#: WSGI environ key: why the request's Host or Content-Length headers make it invalid
#: (set by the server, see _parsing.framing_problem); the answer is a 400.
FRAMING_PROBLEM = "mgmtauth.framing_problem"
#: WSGI environ key: a callable the server sets, called once the answer is decided.
AFTER_ANSWER = "mgmtauth.after_answer"


class LateErrors:
    """Errors raised while answering a request of a test that had already ended (its
    client gave up waiting, its handler went on), kept for the end of the session: no
    test is left to re-raise them in, and they must not be lost.

    Also counts the route handlers running now, so that the session's end can wait a
    little for one that is still at work before it reports."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        #: (test id, where, exception), in the order they were raised.
        self.errors: list[tuple[str, str, BaseException]] = []
        self._running: dict[tuple[str, str], int] = {}

    def add(self, owner: str, where: str, error: BaseException) -> None:
        with self._changed:
            self.errors.append((owner, where, error))

    @contextlib.contextmanager
    def running(self, owner: str, where: str) -> Iterator[None]:
        key = (owner, where)
        with self._changed:
            self._running[key] = self._running.get(key, 0) + 1
        try:
            yield
        finally:
            with self._changed:
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]
                self._changed.notify_all()

    def wait_idle(self, timeout: float) -> list[tuple[str, str]]:
        """Wait up to ``timeout`` seconds for every running handler to return; the
        (test id, handler) of those still running then."""
        with self._changed:
            self._changed.wait_for(lambda: not self._running, timeout)
            return sorted(self._running)


class Binding:
    """One test's state, as the HTTP side sees it."""

    def __init__(
        self, service: AuthService, *, owner: str = "", late: LateErrors | None = None
    ) -> None:
        self.service = service
        #: The test this state belongs to (its node id), named in late errors.
        self.owner = owner or "the test"
        self.routes: list[RouteHandler] = []
        #: Exceptions raised while answering (the fake's own, or a route handler's):
        #: re-raised in the test at teardown, never lost; those raised after the test
        #: ended go to ``late`` (reported at the end of the session).
        self.errors: list[BaseException] = []
        self.late = late if late is not None else LateErrors()
        self.lock = threading.Lock()
        #: Set when the test ends: requests held by a scripted hang give up at once.
        self.closed = threading.Event()

    def add_error(self, error: BaseException, where: str) -> None:
        with self.lock:
            if not self.closed.is_set():
                self.errors.append(error)
                return
        self.late.add(self.owner, where, error)

    def close(self) -> None:
        with self.lock:
            self.closed.set()
            # Raised after the test re-raised its errors, before it ended: late too.
            leftover, self.errors = self.errors, []
        for error in leftover:
            self.late.add(self.owner, "answering a request", error)


class FakeApp:
    def __init__(self) -> None:
        self._binding: Binding | None = None
        #: Apps mounted under a path prefix (:meth:`mount`); none under pytest.
        self._mounts: list[tuple[str, Callable[[Request], Response]]] = []

    def mount(self, prefix: str, app: Callable[[Request], Response]) -> None:
        """Answer requests whose path starts with ``prefix`` by ``app`` (the standalone
        server's control API under :data:`CONTROL_PREFIX`), secrets masked as usual."""
        self._mounts.append((prefix, app))

    def bind(self, binding: Binding) -> None:
        self._binding = binding

    @property
    def current(self) -> Binding | None:
        """The binding requests are answered for now (the server reads it on accept)."""
        return self._binding

    def unbind(self, binding: Binding) -> None:
        if self._binding is binding:
            self._binding = None

    def __call__(self, request: Request) -> Response:
        # A request belongs to the test during which its connection was accepted (the
        # server records it), not to whichever test is bound when its headers finally
        # get parsed: a slow or stalled client must not leak events into the next test.
        binding = request.environ.get(ACCEPTED_BINDING, self._binding)
        framing = request.environ.get(FRAMING_PROBLEM)
        if framing is not None:
            # Before anything else reads the request: its body's length is unknown.
            if binding is not None and not binding.closed.is_set():
                binding.service.record_bad_request(request.method, request.path, 400, framing)
            return error_response(400, 400, framing)
        if binding is not None and binding.closed.is_set():
            return error_response(
                503,
                503,
                "this connection was opened during a test that has ended; its request "
                "is not counted in any test (open a new connection)",
            )
        if binding is None:
            return error_response(
                503,
                503,
                "no test is using the fake service right now: a request arrived outside "
                "the test that owns the mgmt_server fixture",
            )
        for prefix, app in self._mounts:
            if request.path.startswith(prefix):
                return masked_error(app(request), binding.service.redact)
        response = self._answer(binding, request)
        if request.environ.get(_HANDLER_ANSWERED):
            return response  # the user's route handler's answer, as it made it
        return masked_error(response, binding.service.redact)

    def _answer(self, binding: Binding, request: Request) -> Response:
        try:
            return self._dispatch(binding, request)
        except ConnectionResetOnCue:
            raise  # Werkzeug drops the connection; see _server._RequestHandler
        except HTTPException as exc:
            # Werkzeug's own 4xx (a chunked body over the size limit, a malformed
            # header): the client's mistake, answered in the fake's JSON shape.
            status = exc.code or 400
            reason = exc.description or exc.name
            if isinstance(exc, ClientDisconnected):
                reason = (
                    "the request body could not be read: the client disconnected, or sent "
                    "a malformed chunked body"
                )
            binding.service.record_bad_request(request.method, request.path, status, reason)
            return error_response(status, status, reason)
        except BaseException as exc:  # the fake's own bug: never lose it
            binding.add_error(exc, "pytest-mgmtauth itself")
            return error_response(
                500,
                500,
                f"pytest-mgmtauth failed internally ({type(exc).__name__}: {exc}); the "
                "error is re-raised in the test",
            )

    def _dispatch(self, binding: Binding, request: Request) -> Response:
        service = binding.service
        path, method = request.path, request.method
        endpoint = _BUILTIN.get(path)
        if endpoint is None and path.startswith(V3_AUTH_PREFIX):
            endpoint = _auth_v3
        if endpoint is not None:
            # Before anything reads the body: grants issued from here on were made while
            # this request was in flight (thundering-herd detection).
            request.environ[_ARRIVED] = service.request_arrived()
        try:
            if endpoint is not None:
                if method != "POST":
                    if endpoint is _auth_v3:
                        # v3's published status codes have no 405: a 404, as for any
                        # path the service does not serve with that method.
                        raise BadInput(404, f"v3 auth takes POST, not {method}: POST {path}")
                    raise BadInput(405, f"{path} takes POST, not {method}")
                if endpoint is _auth_v3 and auth_path_scope(path) is None:
                    raise BadInput(404, wrong_auth_path(path))
                fault = _scripted_fault(binding, request)
                if fault is not None:
                    answer = _carry_out(fault, binding, request)
                    if answer is not None:
                        return answer
                return endpoint(service, request)
            return self._protected(binding, request)
        except BadInput as exc:
            status = exc.status
            if endpoint is _auth_v3 and status not in V3_STATUSES:
                status = 400  # v3's published codes: a 415 or 413 is a 400 there
            service.record_bad_request(method, path, status, exc.reason)
            allow = "POST" if status == 405 and endpoint is not None else None
            return error_response(status, status, exc.reason, allow=allow)
        except Refusal as refusal:
            return refusal_response(refusal)

    def _protected(self, binding: Binding, request: Request) -> Response:
        service = binding.service
        route = next((r for r in binding.routes if r.matcher.match(request)), None)
        if route is None:
            same_path = [r for r in binding.routes if r.matcher.match_uri(request)]
            status = 405 if same_path else 404
            service.record_unknown_route(request.method, request.path, status)
            declared = ", ".join(f"{r.method} {r.path}" for r in binding.routes) or "none"
            allowed = ", ".join(sorted({r.method for r in same_path})) if same_path else None
            return error_response(
                status,
                status,
                f"no route declares {request.method} {request.path}; declared routes: "
                f"{declared}. Declare it with mgmt_server.route({request.method!r}, "
                f"{request.path!r}).respond_with_json(...)",
                allow=allowed,
            )
        read_body(request)  # enforce the size limit before any handler reads it
        try:
            return self._call_route(binding, route, request)
        finally:
            # Answered (or refused, or reset): a scheduled expire/revoke due before the
            # next protected call fires now.
            service.protected_call_answered()

    def _call_route(self, binding: Binding, route: RouteHandler, request: Request) -> Response:
        service = binding.service
        if service.protected_call_arrived() is not None:
            _reset_connection(request)  # a scheduled reset of this call
        auth = self._authorize(service, route, request)
        with binding.lock:
            route.call_count += 1
        where = f"the handler of {route!r}"
        try:
            # Typed as a Response, but a user's handler may return anything.
            with binding.late.running(binding.owner, where):
                response: object = route.respond(request)
        except Exception as exc:
            binding.add_error(exc, where)
            service.record_call(auth, request.method, request.path, 500)
            return error_response(
                500,
                500,
                f"the handler of {route!r} raised {type(exc).__name__}: {exc} "
                "(re-raised in the test)",
            )
        if isinstance(response, str):
            response = Response(response)
        if not isinstance(response, Response):
            # The user's handler is at fault, not the fake: say so, and what to return.
            error = TypeError(
                f"the handler of {route!r} returned {type(response).__name__}, not a "
                "werkzeug Response or str: return Response(...), or use "
                ".respond_with_json(...) instead of .respond_with_handler(...)"
            )
            binding.add_error(error, where)
            service.record_call(auth, request.method, request.path, 500)
            return error_response(500, 500, f"{error} (re-raised in the test)")
        service.record_call(auth, request.method, request.path, response.status_code)
        request.environ[_HANDLER_ANSWERED] = True
        return response

    @staticmethod
    def _authorize(service: AuthService, route: RouteHandler, request: Request) -> Authorization:
        if route.auth == "v1":
            session_id, utk, problem = session_credentials(request)
            return service.authorize_v1(
                session_id,
                utk,
                problem=problem,
                method=request.method,
                path=request.path,
                permission=route.permission,
            )
        token, problem = bearer_token(request)
        authorize = service.authorize_v3 if route.auth == "v3" else service.authorize_v2
        return authorize(
            token,
            problem=problem,
            method=request.method,
            path=request.path,
            permission=route.permission,
        )


_ARRIVED = "mgmtauth.arrived"
#: WSGI environ key: set when a route's handler made the answer (not the fake).
_HANDLER_ANSWERED = "mgmtauth.handler_answered"


def _arrival(service: AuthService, request: Request) -> int:
    """The tick at which the request arrived (see FakeApp._dispatch)."""
    tick = request.environ.get(_ARRIVED)
    return tick if isinstance(tick, int) else service.request_arrived()


def _auth(service: AuthService, request: Request) -> Response:
    arrived = _arrival(service, request)
    form = read_form(request, AUTH_PATH, ("username", "key"))
    token, _ = service.grant_token(
        form["username"], form["key"], arrived=arrived, client=client_kind(request)
    )
    return json_response(200, {"token": token}, (*SUCCESS_HEADERS, ("Set-Cookie", REMEMBER_ME)))


def _auth_v3(service: AuthService, request: Request) -> Response:
    """``POST /v3/auth/accounts/{account}/profiles/{profile}``: a token for that pair
    and the host to send its calls to (the fake's own ``host:port``)."""
    arrived = _arrival(service, request)
    scope = auth_path_scope(request.path)
    assert scope is not None  # checked by FakeApp._dispatch
    form = read_form(request, request.path, ("username", "key"))
    token, _ = service.grant_token_v3(
        form["username"],
        form["key"],
        scope[0],
        scope[1],
        arrived=arrived,
        client=client_kind(request),
    )
    return json_response(200, {"token": token, "host": fake_host(request)}, SUCCESS_HEADERS)


def fake_host(request: Request) -> str:
    """The fake's own ``host:port`` (where it listens), for v3's ``host`` field. A
    wildcard listening address (the standalone ``--host 0.0.0.0``) names no host a
    client can use: then the host the client reached it by (its ``Host`` header)."""
    environ = request.environ
    name = str(environ.get("SERVER_NAME") or "")
    if name in ("", "0.0.0.0", "::"):
        return request.host
    if ":" in name:
        name = f"[{name}]"  # an IPv6 address
    return f"{name}:{environ.get('SERVER_PORT', '80')}"


def _login(service: AuthService, request: Request) -> Response:
    arrived = _arrival(service, request)
    form = read_form(request, LOGIN_PATH, ("username", "password"))
    session = service.login(
        form["username"], form["password"], arrived=arrived, client=client_kind(request)
    )
    # JSESSIONID first and on its own header line: working clients of the real service
    # match '^JSESSIONID=([^;]*);' over the Set-Cookie lines.
    cookie = f"JSESSIONID={session.session_id}; Path={COOKIE_PATH}; Secure; HttpOnly"
    return json_response(
        200,
        {"utk": session.utk},
        (("Set-Cookie", cookie), ("Set-Cookie", REMEMBER_ME), *SUCCESS_HEADERS),
    )


def _logout(service: AuthService, request: Request) -> Response:
    read_body(request)
    session_id = request.cookies.get("JSESSIONID")
    problem = (
        None
        if session_id
        else (
            "no JSESSIONID cookie was sent to /v1/logout: send 'Cookie: JSESSIONID=<id>' "
            "with the id from /v1/login's Set-Cookie (a cookie jar will not, because of "
            f"Path={COOKIE_PATH})"
        )
    )
    service.logout(session_id, problem=problem)
    return json_response(200, {}, SUCCESS_HEADERS)


_BUILTIN: dict[str, Callable[[AuthService, Request], Response]] = {
    AUTH_PATH: _auth,
    LOGIN_PATH: _login,
    LOGOUT_PATH: _logout,
}


# -- scripted faults (mgmt_server.fail_next, hang_next, drop_connection_next, malformed_next) -----

_FAULT_VERSIONS = {AUTH_PATH: "v2", LOGIN_PATH: "v1"}


def _fault_version(path: str) -> str | None:
    if path.startswith(V3_AUTH_PREFIX):
        return "v3"
    return _FAULT_VERSIONS.get(path)


#: How often a hang on the simulated clock looks at the clock, in real seconds.
_SIMULATED_HANG_POLL = 0.01


class ConnectionResetOnCue(ConnectionAbortedError):
    """Raised through Werkzeug so that it drops the connection without an answer; the
    socket was set to close with a TCP reset (SO_LINGER 0)."""


def _scripted_fault(binding: Binding, request: Request) -> ScriptedFault | None:
    version = _fault_version(request.path)
    if version is None:
        return None
    service = binding.service
    due = service.auth_call_arrived()  # counted for scheduled faults (auth2...)
    if due is None and not service.faults.any_for(version):
        return None  # the common case: no form parsing for the fault's attribution
    fired = service.take_fault(
        version, request.method, request.path, _username_of(request), scheduled=due
    )
    return fired.fault if fired is not None else None


def _username_of(request: Request) -> str | None:
    """The form's username, to attribute a fault in the timeline; None if unreadable."""
    fields = ("username", "password") if request.path == LOGIN_PATH else ("username", "key")
    try:
        return read_form(request, request.path, fields)["username"]
    except BadInput:
        return None


def _carry_out(fault: ScriptedFault, binding: Binding, request: Request) -> Response | None:
    """The answer a scripted fault gives, or None to go on answering normally (after a
    hang). A reset raises :class:`ConnectionResetOnCue`."""
    if fault.kind == "fail":
        assert fault.status is not None
        assert fault.return_code is not None
        base = SERVICE_MESSAGES.get(fault.return_code, f"Service error {fault.return_code}")
        refusal = Refusal(
            fault.status,
            fault.return_code,
            "scripted fault: the test told the fake to fail this call",
            message=base,
            retry_after=fault.retry_after,
        )
        return refusal_response(refusal)
    if fault.kind == "hang":
        assert fault.seconds is not None
        if fault.clock == "real":
            if binding.closed.wait(fault.seconds):
                _reset_connection(request)
        else:
            service = binding.service
            until = service.now() + fault.seconds
            while service.now() < until:
                if binding.closed.wait(_SIMULATED_HANG_POLL):
                    _reset_connection(request)
        return None
    if fault.kind == "reset":
        _reset_connection(request)
    # "malformed": a 200 whose JSON stops in the middle, as if cut off on the way.
    field = "utk" if request.path == LOGIN_PATH else "token"
    body = f'{{"{field}": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9.eyJzdWIiOi'
    return Response(body, status=200, content_type="application/json")


def _reset_connection(request: Request) -> None:
    sock = request.environ.get("werkzeug.socket")
    if sock is not None:
        # Linger on, timeout 0: closing the socket sends RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raise ConnectionResetOnCue(
        "connection reset on cue (drop_connection_next, or a scheduled reset)"
    )
