"""The fake's own endpoints: ``/v2/auth``, ``/v3/auth/accounts/{account}/profiles/{profile}``,
``/v1/login`` and ``/v1/logout``. Each reads its form, calls the service and answers as
the interface document shows (the JSON, the cookies, the success headers); the service's
refusals and bad input are answered by the caller (``FakeApp``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.v3 import auth_path_scope
from .errors import json_response
from .parsing import client_kind, read_body, read_form

if TYPE_CHECKING:
    from collections.abc import Callable

    from werkzeug import Request, Response

    from .._service.service import AuthService

AUTH_PATH = "/v2/auth"
LOGIN_PATH = "/v1/login"
LOGOUT_PATH = "/v1/logout"
BUILTIN_PATHS = (AUTH_PATH, LOGIN_PATH, LOGOUT_PATH)
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

#: WSGI environ key: the tick at which the request arrived (set by ``FakeApp``).
ARRIVED = "mgmtauth.arrived"


def arrival(service: AuthService, request: Request) -> int:
    """The tick at which the request arrived (see FakeApp._dispatch)."""
    tick = request.environ.get(ARRIVED)
    return tick if isinstance(tick, int) else service.request_arrived()


def _auth(service: AuthService, request: Request) -> Response:
    arrived = arrival(service, request)
    form = read_form(request, AUTH_PATH, ("username", "key"))
    token, _ = service.grant_token(
        form["username"], form["key"], arrived=arrived, client=client_kind(request)
    )
    return json_response(200, {"token": token}, (*SUCCESS_HEADERS, ("Set-Cookie", REMEMBER_ME)))


def auth_v3(service: AuthService, request: Request) -> Response:
    """``POST /v3/auth/accounts/{account}/profiles/{profile}``: a token for that pair
    and the host to send its calls to (the fake's own ``host:port``)."""
    arrived = arrival(service, request)
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
    arrived = arrival(service, request)
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


BUILTIN: dict[str, Callable[[AuthService, Request], Response]] = {
    AUTH_PATH: _auth,
    LOGIN_PATH: _login,
    LOGOUT_PATH: _logout,
}
