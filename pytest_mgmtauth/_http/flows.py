"""The flows on the wire: their own endpoints, the scripted faults of those, and the
credentials a protected call presents.

The endpoints (``/v2/auth``, ``/v3/auth/...``, ``/v1/login``, ``/v1/logout``: whatever the
registry lists) are served from their declarations: read the form the endpoint names,
hand it to the flow, and answer as the interface document shows (the JSON, the cookies,
the success headers). The service's refusals and bad input are answered by the caller
(``FakeApp``).

Before that, a scripted fault may take the call (``mgmt_server.fail_next``,
``hang_next``, ``drop_connection_next``, ``malformed_next``, or a scheduled one): which
fault a call takes, and the answer it gives instead (a failure, a hang, a cut-off body
or a reset connection).

A protected call (a declared route) presents what its flow grants (``READERS``, by the
flow's ``presents``): the bearer token of a v2/v3/OAuth call (``Authorization: Bearer
<token>``) or the JSESSIONID cookie and utk of a v1 call, each with why it is missing or
malformed, in terms of what the client did.
"""

from __future__ import annotations

import re
import socket
import struct
from typing import TYPE_CHECKING

from werkzeug import Response

from .._service.flows.base import Incoming, Presented
from .._service.service import SERVICE_MESSAGES, Refusal
from .errors import HTTP_WHITESPACE, json_response, odd_char, refusal_response
from .parsing import FORM_TYPE, BadInput, client_kind, read_body, read_form

if TYPE_CHECKING:
    from collections.abc import Callable

    from werkzeug import Request

    from .._service.faults import ScriptedFault
    from .._service.flows.base import Endpoint, Flow
    from .._service.service import AuthService
    from .binding import Binding

#: Success headers of /v2/auth and /v1/login, as the interface document lists them.
SUCCESS_HEADERS: tuple[tuple[str, str], ...] = (
    ("Cache-Control", "no-cache,no-store,must-revalidate"),
    ("Pragma", "no-cache"),
    ("Expires", "0"),
    ("X-XSS-Protection", "1;mode=block"),
    ("X-NodeId", "mgmtauth-node-1"),
    ("X-Version", "pytest-mgmtauth"),
)

#: WSGI environ key: the tick at which the request arrived (set by ``FakeApp``).
ARRIVED = "mgmtauth.arrived"


def arrival(service: AuthService, request: Request) -> int:
    """The tick at which the request arrived (see FakeApp._dispatch)."""
    tick = request.environ.get(ARRIVED)
    return tick if isinstance(tick, int) else service.request_arrived()


def answer(
    service: AuthService,
    flow: type[Flow],
    endpoint: Endpoint,
    params: dict[str, str],
    request: Request,
    *,
    host: str | None = None,
) -> Response:
    """Serve a flow's endpoint: its form in, its answer out. ``host``: where the calls
    of what it grants go (v3's ``host``), by default the fake's own address."""
    arrived = arrival(service, request)
    body = b""
    if endpoint.form:
        form = read_form(request, request.path, endpoint.form)
    else:
        body = read_body(request)  # the size limit holds here too
        form = {}
    incoming = Incoming(
        path=request.path,
        form=form,
        params=params,
        cookies=dict(request.cookies),
        arrived=arrived,
        client=client_kind(request),
        host=host if host is not None else fake_host(request),
        body=body,
        content_type=request.headers.get("Content-Type"),
        authorization=tuple(request.headers.getlist("Authorization")),
        query=tuple(request.args.items(multi=True)),
    )
    result = service.flow(flow.name).answer(endpoint.operation, incoming)
    cookies = tuple(("Set-Cookie", cookie) for cookie in result.cookies)
    headers = SUCCESS_HEADERS if result.headers is None else result.headers
    return json_response(200, result.body, (*cookies, *headers))


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


# -- scripted faults --------------------------------------------------------------

#: How often a hang on the simulated clock looks at the clock, in real seconds.
_SIMULATED_HANG_POLL = 0.01


class ConnectionResetOnCue(ConnectionAbortedError):
    """Raised through Werkzeug so that it drops the connection without an answer; the
    socket was set to close with a TCP reset (SO_LINGER 0)."""


def scripted_fault(
    binding: Binding, request: Request, flow: type[Flow], endpoint: Endpoint
) -> ScriptedFault | None:
    """The fault this call of a flow's endpoint gets (already recorded), or ``None``."""
    version = flow.name
    service = binding.service
    due = service.auth_call_arrived()  # counted for scheduled faults (auth2...)
    if due is None and not service.faults.any_for(version):
        return None  # the common case: no form parsing for the fault's attribution
    fired = service.take_fault(
        version, request.method, request.path, _username_of(request, endpoint), scheduled=due
    )
    return fired.fault if fired is not None else None


def _username_of(request: Request, endpoint: Endpoint) -> str | None:
    """The form's username, to attribute a fault in the timeline; None if unreadable."""
    try:
        return read_form(request, request.path, endpoint.form).get("username")
    except BadInput:
        return None


def carry_out(
    fault: ScriptedFault, binding: Binding, request: Request, flow: type[Flow]
) -> Response | None:
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
        return refusal_response(flow.style(refusal))
    if fault.kind == "hang":
        assert fault.seconds is not None
        if fault.clock == "real":
            if binding.closed.wait(fault.seconds):
                reset_connection(request)
        else:
            service = binding.service
            until = service.now() + fault.seconds
            while service.now() < until:
                if binding.closed.wait(_SIMULATED_HANG_POLL):
                    reset_connection(request)
        return None
    if fault.kind == "reset":
        reset_connection(request)
    # "malformed": a 200 whose JSON stops in the middle, as if cut off on the way.
    field = "utk" if flow.credential == "session" else flow.answer_field
    body = f'{{"{field}": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9.eyJzdWIiOi'
    return Response(body, status=200, content_type="application/json")


def reset_connection(request: Request) -> None:
    sock = request.environ.get("werkzeug.socket")
    if sock is not None:
        # Linger on, timeout 0: closing the socket sends RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raise ConnectionResetOnCue(
        "connection reset on cue (drop_connection_next, or a scheduled reset)"
    )


# -- credentials of a protected call ---------------------------------------------


def bearer_token(request: Request) -> tuple[str | None, str | None]:
    """``(token, None)``, or ``(token or None, why not)`` for a missing or malformed
    header; with a problem, the token is the JWT found in the header anyway (it lets
    the service attribute the refusal to an account)."""
    values = request.headers.getlist("Authorization")
    if not values:
        hint = ""
        if "JSESSIONID" in request.cookies:
            hint = (
                " (this request carries a JSESSIONID cookie: v1 sessions work on /v1/ routes only)"
            )
        return None, (
            "no Authorization header: send 'Authorization: Bearer <token>' with the token "
            f"from /v2/auth{hint}"
        )
    # The WSGI server joins repeated headers into one with ", " (a JWT has no comma).
    values = [part for joined in values for part in joined.split(",")]
    if len(values) > 1:
        return None, (
            f"{len(values)} Authorization values (repeated headers, or commas in one); "
            "send exactly one 'Authorization: Bearer <token>'"
        )
    value = values[0].strip(HTTP_WHITESPACE)
    odd = odd_char(value)
    if odd is not None:
        index, char = odd
        # The token found anyway, without the odd characters, attributes the refusal.
        dropped = "".join(c for c in value if c.isascii() and (c.isprintable() or c == "\t"))
        words = [re.sub(r"(?i)^bearer", "", word) for word in dropped.split()]
        found = next((w for w in words if w.count(".") == 2), None)
        where = _where(value, index)
        rule = (
            "a JWT holds only letters, digits, '-', '_' and '.'"
            if where.startswith("inside")
            else "HTTP allows only spaces and tabs there"
        )
        return found, (
            f"the Authorization header contains {char} {where}; {rule}: send "
            "'Authorization: Bearer <token>' with the token exactly as /v2/auth returned it"
        )
    scheme, _, rest = value.partition(" ")
    rest = rest.strip(HTTP_WHITESPACE)
    if not rest:
        if value.count(".") == 2:
            return value, (
                "the Authorization header holds the token without the 'Bearer' scheme: "
                "send 'Authorization: Bearer <token>'"
            )
        if scheme.lower() == "bearer":
            return None, "the Authorization header says 'Bearer' but no token follows it"
        return None, "the Authorization header is not 'Bearer <token>'"
    if scheme.lower() != "bearer":
        # The scheme is named, never a secret; the value after it is.
        shown = scheme if len(scheme) <= 20 and scheme.isascii() else f"{scheme[:8]}..."
        return (rest if rest.count(".") == 2 else None), (
            f"the Authorization scheme is {shown!r}, not 'Bearer': v2 calls take "
            "'Authorization: Bearer <token>'"
        )
    if " " in rest or "\t" in rest:
        return (
            None,
            "the bearer token contains a space or a tab; send the token exactly as /v2/auth "
            "returned it",
        )
    return rest, None


def _where(value: str, index: int) -> str:
    """Where in 'Bearer <token>' the character at ``index`` is."""

    def visible(text: str) -> str:
        return "".join(c for c in text if c.isascii() and c.isprintable() and c != " ")

    before = visible(value[:index])
    if not before:
        return "at its start, before the scheme"
    if not visible(value[index + 1 :]):
        return "at its end, after the token"
    if before.lower() == "bearer":
        return "between 'Bearer' and the token"
    return f"inside the value (character {index + 1})"


def session_credentials(request: Request) -> tuple[str | None, str | None, str | None]:
    """``(JSESSIONID, utk, problem)`` of a v1 call."""
    session_id = request.cookies.get("JSESSIONID")
    utks = request.args.getlist("utk")
    if len(utks) > 1:
        # Werkzeug's args.get() takes the first: which one the real service reads is not
        # published, so neither is guessed.
        raise BadInput(
            400,
            f"the query parameter 'utk' appears {len(utks)} times; send it once "
            "(?utk=<the utk of /v1/login's answer>)",
        )
    utk = utks[0] if utks else None
    if session_id:
        if not utk:
            misplaced = _misplaced_utk(request)
            if misplaced:
                return (
                    session_id,
                    None,
                    (
                        f"utk arrived {misplaced}, not in the query string: v1 calls take it as "
                        "the query parameter ?utk=<the utk of /v1/login's answer>"
                    ),
                )
        return session_id, utk, None
    if request.headers.get("Authorization", "").lower().startswith("bearer "):
        return (
            None,
            utk,
            (
                "this is a v1 route: it takes the JSESSIONID cookie and utk of /v1/login, "
                "not a bearer token"
            ),
        )
    return None, utk, missing_session_cookie(request)


def missing_session_cookie(request: Request) -> str:
    """Why a client's cookie jar did not send JSESSIONID back, for this very request."""
    causes = []
    if not request.path.startswith("/urest_service/"):
        causes.append(f"its Path=/urest_service does not cover {request.path}")
    if request.scheme != "https":
        causes.append("it is Secure and this request came over http://")
    why = (
        f"a cookie jar does not send it back here: {' and '.join(causes)}"
        if causes
        else "this client does not keep cookies between calls"
    )
    others = sorted(name for name in request.cookies if name != "JSESSIONID")
    sent = f" (cookies sent: {', '.join(others)})" if others else ""
    return (
        f"no JSESSIONID cookie was sent{sent}. /v1/login sets it with Path=/urest_service; "
        f"Secure; HttpOnly, so {why}. Take JSESSIONID from /v1/login's Set-Cookie header "
        "and send 'Cookie: JSESSIONID=<id>' yourself, with utk as a query parameter"
    )


def _misplaced_utk(request: Request) -> str | None:
    """Where a utk that is not in the query string arrived instead, if anywhere."""
    for name in request.headers.keys():  # noqa: SIM118 (werkzeug Headers)
        if "utk" in name.lower():
            return f"in the header {name!r}"
    if request.mimetype == FORM_TYPE and b"utk=" in request.get_data(cache=True):
        return "in the form body"
    return None


def _bearer(request: Request) -> Presented:
    token, problem = bearer_token(request)
    missing = not request.headers.getlist("Authorization")
    return Presented(token=token, problem=problem, missing=missing)


def _session(request: Request) -> Presented:
    session_id, utk, problem = session_credentials(request)
    return Presented(session_id=session_id, utk=utk, problem=problem)


#: How a protected call presents its credential, by a flow's ``presents``.
READERS: dict[str, Callable[[Request], Presented]] = {"bearer": _bearer, "session": _session}
