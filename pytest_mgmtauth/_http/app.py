"""Requests in, domain calls, JSON out: the front door of the fake service.

The HTTP server is shared by a whole test session; each test binds its own state (a
:class:`~.binding.Binding`) for its duration; a request that arrives while none is bound
gets 503. :class:`FakeApp` finds the test a request belongs to, decides once what it is
for (``destination.py``), serves it (a mounted app, a flow's endpoint after its scripted
faults, a declared route, or the service in a live run) and answers whatever goes wrong
in the fake's JSON error shape.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from werkzeug import Response
from werkzeug.exceptions import ClientDisconnected, HTTPException

from .._service.api_versions import version_call
from .._service.flows.base import MalformedCall
from .._service.flows.registry import endpoint_for
from .._service.records import Refusal
from .._service.timeline import to_datetime
from .arrival import Arrival, FakeRequest
from .binding import Binding, RecordedRequest, RouteHandler, logged_body
from .destination import Destination, destination
from .errors import (
    DIAGNOSIS_HEADER,
    BadInput,
    error_response,
    masked_error,
    refusal_response,
    with_headers,
)
from .flows import (
    ConnectionResetOnCue,
    answer,
    carry_out,
    received,
    reset_connection,
    username_of,
)
from .forward import ended_message, forward
from .hosts import fake_host, foreign_target, region_host, shown
from .parsing import read_body

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from werkzeug import Request

    from .._service.options import Options
    from .._service.records import Authorization

#: Where mgmtauth-server mounts its control API (reserved: no user route under it).
CONTROL_PREFIX = "/_mgmtauth"


class FakeApp:
    def __init__(self) -> None:
        #: The binding requests are answered for now (the server reads it on accept).
        self.current: Binding | None = None
        #: Apps mounted under a path prefix (:meth:`mount`); none under pytest.
        self._mounts: list[tuple[str, Callable[[Request], Response]]] = []
        #: Set once connections may be accepted (:meth:`open`): the server's accept loop
        #: waits for it, and the listening socket's backlog holds connections until then.
        self.opened = threading.Event()
        self._on_open: list[Callable[[], None]] = []
        self._open_lock = threading.Lock()
        self._open_on_bind = True
        #: The answer a user's route handler made for the request this thread is
        #: answering (left as it made it, not masked): a request is answered on one thread.
        self._this_thread = threading.local()

    def mount(self, prefix: str, app: Callable[[Request], Response]) -> None:
        """Answer requests whose path starts with ``prefix`` by ``app`` (the standalone
        server's control API under :data:`CONTROL_PREFIX`), secrets masked as usual."""
        self._mounts.append((prefix, app))

    def when_open(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once :meth:`open` is called (at once if it was)."""
        with self._open_lock:
            if not self.opened.is_set():
                self._on_open.append(callback)
                return
        callback()

    def defer_opening(self) -> None:
        """Have :meth:`bind` not open the app: the caller sets up more (mounts,
        accounts, routes) and calls :meth:`open` when all of it is in place."""
        self._open_on_bind = False

    def open(self) -> None:
        """Accept connections from now on. The first :meth:`bind` does it (unless
        :meth:`defer_opening`): a connection accepted before any state is bound could
        only be refused (503), and one accepted before the mounted apps are in place
        would reach the fake as an unknown route. Serving with nothing bound (every
        request a 503) needs this call."""
        with self._open_lock:
            self.opened.set()
            callbacks, self._on_open = self._on_open, []
        for callback in callbacks:
            callback()

    def bind(self, binding: Binding) -> None:
        self.current = binding
        if self._open_on_bind and not self.opened.is_set():
            self.open()

    def unbind(self, binding: Binding) -> None:
        if self.current is binding:
            self.current = None

    def __call__(self, request: Request) -> Response:
        # A request belongs to the test during which its connection was accepted (the
        # server records it), not to whichever test is bound when its headers finally
        # get parsed: a slow or stalled client must not leak events into the next test.
        # Driven without the server (a plain Request): the test bound now.
        arrival = request.arrival if isinstance(request, FakeRequest) else Arrival(self.current)
        binding = arrival.binding
        while binding is not None and binding.successor is not None and binding.closed.is_set():
            binding = binding.successor  # mgmtauth-server's state after a reset
        if binding is None or binding.closed.is_set():  # in no test's log
            framing = arrival.framing_problem
            if framing is not None:
                return error_response(framing[0], framing[0], framing[1])
            if binding is None:
                reason = (
                    "no test is using the fake service right now: a request arrived outside "
                    "the test that owns the mgmt_server fixture"
                )
            elif binding.live is not None:
                reason = ended_message(binding.owner)
            else:
                reason = (
                    "this connection was opened during a test that has ended; its request "
                    "is not counted in any test (open a new connection)"
                )
            return error_response(503, 503, reason)
        for prefix, app in self._mounts:
            if request.path.startswith(prefix):
                return masked_error(app(request), binding.service.timeline.redact)
        arrived = to_datetime(binding.service.timeline.now())
        # What the request is for, decided once: every step below reads it.
        to = destination(binding, request, arrival)
        response: Response | None = None
        try:
            response = self._for_test(binding, request, arrival, to)
            return response
        finally:
            _exchanged(binding, request, arrival, to, arrived, response)

    def _for_test(
        self, binding: Binding, request: Request, arrival: Arrival, to: Destination
    ) -> Response:
        framing = arrival.framing_problem
        if framing is not None:
            # Before anything else reads the request: its body's length is unknown.
            status, reason = framing
            binding.service.timeline.record_bad_request(
                request.method, request.path, status, reason
            )
            return _transport_error(binding, to, status, reason)
        self._this_thread.handler_answer = None
        response = self._answer(binding, request, arrival, to)
        made_by_handler: object = self._this_thread.handler_answer
        if response is made_by_handler:
            return response  # the user's route handler's answer, as it made it
        return masked_error(response, binding.service.timeline.redact)

    def _answer(
        self, binding: Binding, request: Request, arrival: Arrival, to: Destination
    ) -> Response:
        try:
            return self._dispatch(binding, request, arrival, to)
        except ConnectionResetOnCue:
            raise  # Werkzeug drops the connection; see _server.ConnectionHandler
        except HTTPException as exc:
            # Werkzeug's own 4xx (a chunked body over the size limit, a malformed
            # header): the client's mistake, answered in the fake's JSON shape.
            status = exc.code or 400
            reason = exc.description or exc.name
            chunked = arrival.chunked_problem
            if chunked is not None:
                status, reason = 400, f"the chunked request body is malformed: {chunked}"
            elif isinstance(exc, ClientDisconnected):
                reason = (
                    "the request body could not be read: the client disconnected, or sent "
                    "a malformed chunked body"
                )
            binding.service.timeline.record_bad_request(
                request.method, request.path, status, reason
            )
            return _transport_error(binding, to, status, reason)
        except BaseException as exc:  # the fake's own bug: never lose it
            binding.add_error(exc, "pytest-mgmtauth itself")
            return error_response(
                500,
                500,
                f"pytest-mgmtauth failed internally ({type(exc).__name__}: {exc}); the "
                "error is re-raised in the test",
            )

    def _dispatch(
        self, binding: Binding, request: Request, arrival: Arrival, to: Destination
    ) -> Response:
        service = binding.service
        path, method = request.path, request.method
        foreign = foreign_target(binding, to.raw)
        if foreign is not None:  # never forwarded (docs/hosts.md)
            service.timeline.record_bad_request(method, path, 403, foreign)
            return error_response(403, 403, foreign)
        if binding.live is not None:  # a live run: the service answers
            response = forward(binding, request, to)
            self._this_thread.handler_answer = response  # as the service made it
            return response
        endpoint, flow = to.endpoint, to.flow
        arrived = 0
        if endpoint is not None:
            # Before anything reads the body: grants issued from here on were made while
            # this request was in flight (thundering-herd detection).
            arrived = service.credentials.request_arrived()
        try:
            if endpoint is None:
                return self._protected(binding, request, arrival, to)
            if method != endpoint.method:
                if endpoint.wrong_method_status == 404:
                    # No 405 among the endpoint's published statuses: a 404, as for any
                    # path the service does not serve with that method.
                    raise BadInput(
                        404,
                        f"{flow.title} takes {endpoint.method}, not {method}: "
                        f"{endpoint.method} {path}",
                    )
                raise BadInput(405, f"{path} takes {endpoint.method}, not {method}")
            if to.params is None:
                raise BadInput(404, flow.wrong_path(path))
            if not to.answers:  # a flow's own endpoint, at a host it does not answer on
                service.refuse_wrong_host(
                    flow.name,
                    to.where,
                    shown(binding, request, arrival, flow.auth_hosts),
                    method=method,
                    path=path,
                    api=False,
                )
            if endpoint.fault_point:
                fault = service.fault_runner.auth_call(
                    flow.name, method, path, lambda: username_of(request, endpoint)
                )
                if fault is not None:
                    fault_answer = carry_out(fault, binding, request, flow)
                    if fault_answer is not None:
                        return fault_answer
            return answer(
                service,
                flow,
                endpoint,
                to.params,
                request,
                arrived=arrived,
                host=region_host(binding, request)
                if flow.api_on_region_host
                else fake_host(request),
            )
        except (BadInput, MalformedCall) as exc:
            status = exc.status
            if endpoint is not None and endpoint.statuses and status not in endpoint.statuses:
                status = 400  # not among the endpoint's published statuses (v3: 413, 415)
            service.timeline.record_bad_request(method, path, status, exc.reason)
            response = _transport_error(binding, to, status, exc.reason)
            if status == 405 and endpoint is not None:
                response.headers["Allow"] = endpoint.method
            return response
        except Refusal as refusal:
            return refusal_response(flow.style(refusal))

    def _protected(
        self, binding: Binding, request: Request, arrival: Arrival, to: Destination
    ) -> Response:
        service, path, route = binding.service, request.path, to.route
        if route is None:
            same_path = [r for r in binding.routes if r.matcher.match_uri(request)]
            status = 405 if same_path else 404
            service.timeline.record_unknown_route(request.method, request.path, status)
            declared = ", ".join(f"{r.method} {r.path}" for r in binding.routes) or "none"
            allowed = ", ".join(sorted({r.method for r in same_path})) if same_path else None
            reason = (
                f"no route declares {request.method} {request.path}; declared routes: "
                f"{declared}. Declare it with mgmt_server.route({request.method!r}, "
                f"{request.path!r}).respond_with_json(...)"
            )
            slashed = _trailing_slash(path, service.options)
            response = _transport_error(binding, to, status, slashed or reason)
            if allowed is not None:
                response.headers["Allow"] = allowed
            return response
        body = read_body(request)  # enforce the size limit before any handler reads it
        # A /v{YYYY-MM}/ version past Active: End of Support headers on any answer, or 410.
        paths = (r.path for r in binding.routes if isinstance(r.path, str))  # read if needed
        extra = version_call(
            service.timeline, service.options, request.method, path, paths, to.raw_path
        )
        try:
            fault = service.fault_runner.protected_call_arrived()
            if fault is None:
                response = self._call_route(binding, route, request, arrival, to, body=body)
            elif fault.kind == "reset":  # a scheduled reset or 503 of this call
                reset_connection(request)
            else:
                response = error_response(
                    503, 503, f"service unavailable (scheduled fault {fault})"
                )
        except Refusal as refusal:
            # In the envelope of the route's flow (v3: {"message": "Unauthorized"}).
            response = refusal_response(to.flow.api_error(refusal, service.options))
        finally:
            # Answered (or refused, or reset): a scheduled expire/revoke due before the
            # next protected call fires now.
            service.fault_runner.protected_call_answered()
        return with_headers(response, extra)

    def _call_route(
        self,
        binding: Binding,
        route: RouteHandler,
        request: Request,
        arrival: Arrival,
        to: Destination,
        *,
        body: bytes = b"",
    ) -> Response:
        service = binding.service
        scope = route.required_scope(to.normalized)
        # The one door: the credential read and authorized, the host refused there.
        auth, host = service.admit(
            route.auth,
            received(request, to.where, to.normalized),
            permission=route.permission,
            scope=scope,
            wrong_host=None if to.answers else shown(binding, request, arrival, to.hosts),
        )
        # Within the call's rate (the route's own, or its family's with rate_limits).
        declared = route.path if isinstance(route.path, str) else route.path.pattern
        service.rate_limits.admit(
            username=auth.username,
            version=route.auth,
            method=request.method,
            path=request.path,
            body=body,
            own=route.rate,
            route=f"{route.method} {declared}",
            credential=auth.credential,
        )
        binding.late.started(binding.owner, route)
        try:
            try:
                # Typed as a Response, but a user's handler may return anything.
                response: object = route.respond(request)
            finally:
                binding.late.returned(binding.owner, route)
        except Exception as exc:
            binding.add_error(exc, f"the handler of {route!r}")
            _answered(binding, route, auth, request, 500, host)
            return _transport_error(
                binding,
                to,
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
            binding.add_error(error, f"the handler of {route!r}")
            _answered(binding, route, auth, request, 500, host)
            return _transport_error(binding, to, 500, f"{error} (re-raised in the test)")
        _answered(binding, route, auth, request, response.status_code, host)
        self._this_thread.handler_answer = response
        return response


def _trailing_slash(path: str, options: Options) -> str | None:
    """Why ``path``, an endpoint's path with a slash at its end, is no endpoint: the
    login page warns that a slash at the end "may cause authentication to fail"; the
    fake answers it as a path it does not serve."""
    if not path.endswith("/") or len(path) < 2:
        return None
    found = endpoint_for(path.rstrip("/"), options)
    if found is None or not found[1].exact:
        return None
    return (
        f"{path} ends with a slash: send {found[1].method} {found[1].path} (the service's "
        'login page warns that a slash at the end of the URL "may cause authentication to '
        'fail"; the fake serves no path with it)'
    )


def _answered(
    binding: Binding,
    route: RouteHandler,
    auth: Authorization,
    request: Request,
    status: int,
    host: str | None,
) -> None:
    """Its handler answered a call: one ApiCall in the timeline and one in the route's
    ``call_count``, counted together so that the two always agree (a call that stalls
    before its handler answers is in neither)."""
    with binding.lock:
        binding.service.timeline.record_call(auth, request.method, request.path, status, host=host)
        route.call_count += 1


def _exchanged(
    binding: Binding,
    request: Request,
    arrival: Arrival,
    to: Destination,
    arrived: datetime,
    response: Response | None,
) -> None:
    """The one place where an exchange of a test is complete: the request and its answer
    (``None``: no answer, the connection was reset on cue), every request of a bound test
    whatever answered it (an endpoint, a route, a refusal, a fault). What watches
    exchanges hooks here: the request log, and the drift check's record (kept only for a
    test that has a snapshot)."""
    status = None if response is None else response.status_code
    diagnosis = None
    if response is not None and status is not None and status >= 400:
        diagnosis = response.headers.get(DIAGNOSIS_HEADER)
    # The request log's entry, as the request arrived (masked when read).
    headers = arrival.headers
    if headers is None:  # the app driven without the server
        headers = tuple(request.headers.items())
    host = ""
    for name, value in headers:
        if name.lower() == "host":
            host = value
            break
    path, _, query = to.target.partition("?")
    body = arrival.body
    entry = RecordedRequest(
        method=request.method,
        host=host,
        path=path,
        query=query,
        headers=tuple(headers),
        body=logged_body(body, headers) if isinstance(body, bytes) else None,
        status=status,
        at=arrived,
        test=binding.test_id,
        diagnosis=diagnosis,
    )
    binding.requests.add(entry)
    if binding.live is not None:  # the service's answer was kept as it came
        binding.live.answered(request, response, binding.service.timeline.redact)
    elif response is not None:
        binding.keep_exchange(request, response, protected=to.route is not None)


def _transport_error(binding: Binding, to: Destination, status: int, reason: str) -> Response:
    """The fake's own error answer (bad input, framing, Werkzeug's own 4xx, a failed
    route handler): in the error shape of the flow whose endpoint the path is (OAuth's
    RFC 6749 errors), or of the flow of the API call (v3's ``{"message": ...}``)."""
    refusal = Refusal(status, status, reason)
    if to.endpoint is not None:
        styled = to.flow.style(refusal)
    else:
        styled = to.flow.api_error(refusal, binding.service.options)
    return refusal_response(styled)
