"""The flows' own endpoints (``/v2/auth``, ``/v3/auth/...``, ``/v1/login``,
``/v1/logout``: whatever the registry lists), served from their declarations: read the
form the endpoint names, hand it to the flow, and answer as the interface document shows
(the JSON, the cookies, the success headers). The service's refusals and bad input are
answered by the caller (``FakeApp``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.flows.base import Incoming
from .errors import json_response
from .parsing import client_kind, read_body, read_form

if TYPE_CHECKING:
    from werkzeug import Request, Response

    from .._service.flows.base import Endpoint, Flow
    from .._service.service import AuthService

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
