"""The flows on the wire: their own endpoints, served from their declarations (the
service's refusals and bad input are answered by ``FakeApp``), the scripted faults of
those, and what a protected call brings its flow (a :class:`Received`, read once)."""

from __future__ import annotations

import socket
import struct
from typing import TYPE_CHECKING, NoReturn

from werkzeug import Response

from .._service.flows.base import Incoming, Received
from .._service.flows.registry import form_hint
from .._service.records import SERVICE_MESSAGES, Refusal
from .errors import BadInput, json_response, refusal_response
from .parsing import client_kind, read_body, read_form

if TYPE_CHECKING:
    from werkzeug import Request

    from .._service.faults import FiredFault
    from .._service.flows.base import Endpoint, Flow, Where
    from .._service.service import AuthService
    from .binding import Binding

#: The success headers of a flow endpoint, as the interface document lists them (a
#: flow may answer with its own: ``Answer.headers``).
SUCCESS_HEADERS: tuple[tuple[str, str], ...] = (
    ("Cache-Control", "no-cache,no-store,must-revalidate"),
    ("Pragma", "no-cache"),
    ("Expires", "0"),
    ("X-XSS-Protection", "1;mode=block"),
    ("X-NodeId", "mgmtauth-node-1"),
    ("X-Version", "pytest-mgmtauth"),
)


def answer(
    service: AuthService,
    flow: type[Flow],
    endpoint: Endpoint,
    params: dict[str, str],
    request: Request,
    *,
    arrived: int,
    host: str,
) -> Response:
    """Serve a flow's endpoint: its form in, its answer out. ``arrived``: the tick at
    which the request arrived (``Credentials.request_arrived``, taken before its body
    was read); ``host``: where the calls of what it grants go (v3's ``host``)."""
    body = b""
    if endpoint.form:
        form = read_form(
            request,
            request.path,
            endpoint.form,
            hint=lambda missing, names: form_hint(flow, endpoint, missing, names),
        )
    else:
        body = read_body(request)  # the size limit holds here too
        form = {}
    # Its one environ value, repeated lines joined (headers.getlist would find the same
    # by walking every header).
    authorization = request.environ.get("HTTP_AUTHORIZATION")
    incoming = Incoming(
        path=request.path,
        form=form,
        params=params,
        cookies=dict(request.cookies),
        arrived=arrived,
        client=client_kind(request),
        host=host,
        body=body,
        content_type=request.headers.get("Content-Type"),
        authorization=() if authorization is None else (str(authorization),),
        query=tuple(request.args.items(multi=True)),
    )
    result = service.flow(flow.name).answer(endpoint.operation, incoming)
    cookies = tuple(("Set-Cookie", cookie) for cookie in result.cookies)
    headers = SUCCESS_HEADERS if result.headers is None else result.headers
    if result.empty:  # no body (SCIM's revoke)
        empty = Response(b"", status=200)
        del empty.headers["Content-Type"]  # no body, no type
        for name, value in (*cookies, *headers):
            empty.headers.add(name, value)
        return empty
    return json_response(200, result.body, (*cookies, *headers))


# -- scripted faults --------------------------------------------------------------

#: How often a hang on the simulated clock looks at the clock, in real seconds.
_SIMULATED_HANG_POLL = 0.01


class ConnectionResetOnCue(ConnectionAbortedError):
    """Raised through Werkzeug so that it drops the connection without an answer; the
    socket was set to close with a TCP reset (SO_LINGER 0)."""


def username_of(request: Request, endpoint: Endpoint) -> str | None:
    """The form's username, to attribute a fault in the timeline; None if unreadable."""
    try:
        return read_form(request, request.path, endpoint.form).get("username")
    except BadInput:
        return None


def carry_out(
    fired: FiredFault,
    binding: Binding,
    request: Request,
    flow: type[Flow],
) -> Response | None:
    """The answer a scripted fault gives, or None to go on answering normally (after a
    hang). A reset raises :class:`ConnectionResetOnCue`."""
    fault = fired.fault
    if fault.kind == "fail":
        assert fault.status is not None
        assert fault.return_code is not None
        base = SERVICE_MESSAGES.get(fault.return_code, f"Service error {fault.return_code}")
        refusal = Refusal(
            fault.status,
            fault.return_code,
            fired.reason or "scripted fault: the test told the fake to fail this call",
            message=base,
            retry_after=fault.retry_after,
        )
        return refusal_response(flow.style(refusal))
    if fault.kind == "hang":
        assert fault.seconds is not None
        if fault.clock == "real":
            if binding.closed.wait(fault.seconds):
                reset_connection(request)
        else:
            service = binding.service
            until = service.timeline.now() + fault.seconds
            while service.timeline.now() < until:
                if binding.closed.wait(_SIMULATED_HANG_POLL):
                    reset_connection(request)
        return None
    if fault.kind == "reset":
        reset_connection(request)
    # "malformed": a 200 whose JSON stops in the middle, as if cut off on the way.
    field = flow.answer_field
    body = f'{{"{field}": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9.eyJzdWIiOi'
    return Response(body, status=200, content_type="application/json")


def reset_connection(request: Request) -> NoReturn:
    sock = request.environ.get("werkzeug.socket")
    if sock is not None:
        # Linger on, timeout 0: closing the socket sends RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raise ConnectionResetOnCue(
        "connection reset on cue (drop_connection_next, or a scheduled reset)"
    )


# -- a protected call, as its flow reads it -----------------------------------------


def received(request: Request, here: Where, normalized: str) -> Received:
    """What a protected call brings its flow, read once (the body is read already;
    ``normalized``: its path normalised)."""
    return Received(
        method=request.method,
        path=request.path,
        where=here,
        headers=tuple(request.headers.items()),
        # Parsed only when sent: most calls carry a bearer token and none of these.
        cookies=dict(request.cookies) if request.environ.get("HTTP_COOKIE") else {},
        query=tuple(request.args.items(multi=True)) if request.query_string else (),
        scheme=request.scheme,
        mimetype=request.mimetype if request.environ.get("CONTENT_TYPE") else "",
        body=request.get_data(cache=True),
        normalized=normalized,
    )
