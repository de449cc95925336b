"""The messages of the control API: reading a control request and what it answers with.

In: the guard against a web page in the developer's browser (which ``Host`` headers the
API answers, against DNS rebinding, and which POSTs: JSON only, which a page cannot send
without a CORS preflight); the JSON body, checked for size and depth, and its fields and
query parameters one by one, each with an error that names it (:class:`ControlError`,
answered as a 4xx JSON body). Out: events, requests, accounts, OAuth clients, scripted
faults and the server's options (``--json``) as JSON objects."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from werkzeug.datastructures import MultiDict

from .._http.errors import (
    MAX_CONTROL_BODY,
    MAX_CONTROL_DEPTH,
    BodyTooLarge,
    error_response,
    read_limited_body,
)
from .._http.hosts import host_name
from .._service.accounts import fingerprint
from .._service.events import iso_time as _iso
from .._service.limits import shown

if TYPE_CHECKING:
    from collections.abc import Iterable

    from werkzeug import Request, Response

    from .. import OAuthClient
    from .._http.binding import RecordedRequest
    from .._service.accounts import Account
    from .._service.events import Event
    from .._service.faults import ScriptedFault
    from .._service.options import Options

# -- the guard ---------------------------------------------------------------------

_WILDCARDS = ("", "0.0.0.0", "::")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def is_loopback(name: str) -> bool:
    """Whether ``name`` is always this machine: a loopback address, or ``localhost`` and
    the names under it (RFC 6761)."""
    address = _ip(name)
    return (
        name == "localhost" or name.endswith(".localhost") or bool(address and address.is_loopback)
    )


def host_allowed(header: str | None, bound: str, extra: Iterable[str] = ()) -> bool:
    """Whether a control request with this ``Host`` header may be served by a server
    listening on ``bound``: a loopback name or address, the address it was started on,
    or (started on a wildcard address) any IP address, or a name in ``extra``
    (``--allow-host``). A name that only DNS says is this machine (a DNS-rebinding
    page) is refused."""
    if header is None:
        return True  # no Host header: not a browser (HTTP/1.0 tools)
    name = host_name(header)
    if is_loopback(name):
        return True
    if name and (name == host_name(bound) or name in {host_name(h) for h in extra}):
        return True
    return bound in _WILDCARDS and _ip(name) is not None


def refuse_foreign(
    request: Request, endpoint: str, host: str, allowed_hosts: Iterable[str]
) -> Response | None:
    """The answer to a request a web page may have sent, or None to serve it: a
    DNS-rebinding page (its own name in ``Host``) gets 403, and a POST that is not
    ``application/json`` (which a page can only send after a CORS preflight that this
    server never grants) 415. ``host`` is the address the server listens on,
    ``allowed_hosts`` the names ``--allow-host`` adds."""
    sent_host = request.headers.get("Host")
    if not host_allowed(sent_host, host, allowed_hosts):
        shown = sent_host if len(sent_host or "") <= 100 else f"{(sent_host or '')[:100]}..."
        return error_response(
            403,
            403,
            f"{endpoint}: refused the Host {shown!r}: the control API answers only "
            f"to localhost, a loopback address or the address it listens on "
            f"({host}), so that a web page cannot reach it through DNS rebinding; "
            "start mgmtauth-server with --allow-host NAME to allow another name",
        )
    if request.method == "POST" and request.mimetype != "application/json":
        sent = request.headers.get("Content-Type")
        return error_response(
            415,
            415,
            f"{endpoint}: send the body as JSON with 'Content-Type: application/json' "
            f"(got {'no Content-Type' if sent is None else repr(sent[:100])}); control "
            "POSTs take JSON only, so that a web page cannot send them. "
            "curl: -H 'Content-Type: application/json' -d '{}'",
        )
    return None


# -- the body ----------------------------------------------------------------------


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _depth(data: Any) -> int:
    """How deeply arrays and objects nest in ``data`` (iterative: no recursion limit)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            if depth > MAX_CONTROL_DEPTH:
                break
            stack.extend((v, depth + 1) for v in value)
    return deepest


class NotStandardJSON(ValueError):
    """JSON that Python's parser takes but RFC 8259 does not (and Node, Java, Go refuse
    to parse): ``NaN``, ``Infinity``, ``-Infinity``, or a number too large for a double
    (``1e999``). ``str()`` says which."""


def _refuse_constant(name: str) -> Any:
    raise NotStandardJSON(
        f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity; Node, Java and Go "
        "refuse it): send a finite number"
    )


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else f"{text[:12]}...{text[-8:]}"
        raise NotStandardJSON(
            f"the number {shown} is too large for a double (it would read as {value}, which "
            "JSON cannot say; Node, Java and Go refuse it): send a finite number"
        )
    return value


def loads_standard(text: str | bytes) -> Any:
    """``json.loads``, refusing what RFC 8259 does not allow and other languages cannot
    read back: NaN, Infinity and numbers that overflow a double raise
    :class:`NotStandardJSON` (a ValueError); otherwise as ``json.loads``."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


def read_json(request: Request, endpoint: str) -> dict[str, Any]:
    """A control request's body as a JSON object ({} when empty); ControlError (413,
    400) for a body too large, not JSON, nested too deeply, or not an object."""
    try:
        raw = read_limited_body(request, MAX_CONTROL_BODY)
    except BodyTooLarge as exc:
        raise ControlError(413, f"{endpoint}: {exc}") from None
    if not raw.strip():
        return {}
    try:
        data = loads_standard(raw)
        if _depth(data) > MAX_CONTROL_DEPTH:
            raise RecursionError  # answered as json's own nesting limit is
    except NotStandardJSON as exc:
        raise ControlError(400, f"{endpoint}: the body is not standard JSON: {exc}") from None
    except RecursionError:
        raise ControlError(
            400, f"{endpoint}: the body nests deeper than {MAX_CONTROL_DEPTH} levels"
        ) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a 5000-digit int
        raise ControlError(
            400,
            f"{endpoint}: the body is not JSON ({exc}); send a JSON object, e.g. "
            "curl -H 'Content-Type: application/json' -d '{\"seconds\": 1800}'",
        ) from None
    if not isinstance(data, dict):
        raise ControlError(
            400, f"{endpoint}: the body must be a JSON object, got {type(data).__name__}"
        )
    return data


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class Body:
    """A JSON object (a control request's, or an account or client on the command line),
    read field by field with named errors: ``known`` its fields, and ``?name`` for each
    query parameter of ``query`` (a GET's, read with :meth:`flag`)."""

    def __init__(
        self,
        endpoint: str,
        data: dict[str, Any],
        known: tuple[str, ...],
        query: MultiDict[str, str] | None = None,
    ) -> None:
        fields = [k for k in known if not k.startswith("?")]
        unknown = [k for k in data if k not in fields]
        if unknown:
            raise ControlError(
                400,
                f"{endpoint}: unknown field {', '.join(map(shown, unknown[:5]))}; known fields: "
                f"{', '.join(fields) or 'none'}",
            )
        self.endpoint = endpoint
        self.data = data
        self.query = MultiDict() if query is None else query
        params = [k[1:] for k in known if k.startswith("?")]
        if not params:
            return  # endpoints without query parameters ignore any, as they always did
        unknown = [k for k in self.query if k not in params]
        if unknown:
            raise ControlError(
                400,
                f"{endpoint}: unknown query parameter {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(params)}",
            )
        for name in params:
            count = len(self.query.getlist(name))
            if count > 1:
                raise ControlError(
                    400,
                    f"{endpoint}: the query parameter {name!r} appears {count} times; send it once",
                )

    def _get(self, name: str, types: tuple[type, ...], what: str, required: bool) -> Any:
        if name not in self.data or self.data[name] is None:
            if required:
                raise ControlError(400, f"{self.endpoint}: the field {name!r} ({what}) is required")
            return None
        value = self.data[name]
        # JSON's true and false are no numbers, though Python's bool is an int.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            shown = json.dumps(value)
            # A string, also in a list or object, may be a secret in the wrong field (the
            # CLI reads these before any account exists to mask it by): kind and size only.
            if isinstance(value, (str, list, dict)):
                kinds = {str: "string", list: "array", dict: "object"}
                shown = f"a JSON {kinds[type(value)]} of {len(shown)} characters"
            elif str in types and not isinstance(value, bool):
                shown = "a JSON number"  # where a string is wanted: it may be a key
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be {what}, got {shown}"
            )
        return value

    def text(self, name: str) -> str | None:
        return cast("str | None", self._get(name, (str,), "a string", False))

    def required_text(self, name: str) -> str:
        return cast("str", self._get(name, (str,), "a string", True))

    def integer(self, name: str) -> int | None:
        return cast("int | None", self._get(name, (int,), "an integer", False))

    def number(self, name: str, *, required: bool = False) -> float | int | None:
        """A JSON number as parsed: an int stays an int (10**400 has no float), the
        range is for the operation to check."""
        value = self._get(name, (int, float), "a number", required)
        if isinstance(value, float) and not math.isfinite(value):
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be a finite number, got {value}"
            )
        return cast("float | int | None", value)

    def flag(self, name: str, default: bool) -> bool:
        raw = self.query.get(name)
        if raw is None:
            return default
        value = _BOOLEANS.get(raw.strip().lower())
        if value is None:
            raise ControlError(400, f"{self.endpoint}: ?{name}= takes true or false, got {raw!r}")
        return value

    def texts(self, name: str, what: str = "a list of strings") -> tuple[str, ...] | None:
        value = self._get(name, (list,), what, False)
        if value is not None and not all(isinstance(v, str) for v in value):
            raise ControlError(400, f"{self.endpoint}: the field {name!r} must be {what}")
        return None if value is None else tuple(value)


#: The fields of an account object (``POST /_mgmtauth/accounts``, ``--account``).
ACCOUNT_FIELDS = ("username", "api_key", "password", "permissions", "profiles")
#: The fields of an OAuth client object (``POST /_mgmtauth/clients``, ``--client``).
CLIENT_FIELDS = ("scopes", "client_id", "client_secret")


def account_fields(body: Body) -> dict[str, Any]:
    """An account object's fields, checked: the keywords of ``add_account``."""
    return {
        "username": body.text("username"),
        "api_key": body.text("api_key"),
        "password": body.text("password"),
        "permissions": body.texts("permissions"),
        "profiles": body.texts(
            "profiles",
            "a list of 'account/profile' strings ('account/*': every profile of the account)",
        ),
    }


def client_fields(body: Body) -> dict[str, Any]:
    """An OAuth client object's fields, checked: the keywords of ``add_client``."""
    return {
        "scopes": body.texts("scopes"),
        "client_id": body.text("client_id"),
        "client_secret": body.text("client_secret"),
    }


# -- the answers -------------------------------------------------------------------


def fields_json(data: Event | RecordedRequest) -> dict[str, Any]:
    """An event's or a request log entry's fields as JSON values: times in ISO 8601 UTC,
    tuples as arrays (a request's ``headers`` as ``[name, value]`` pairs, in order)."""
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(data):
        value = getattr(data, field.name)
        if isinstance(value, datetime):
            value = _iso(value)
        elif isinstance(value, tuple):
            value = list(value)
        fields[field.name] = value
    return fields


def event_json(event: Event) -> dict[str, Any]:
    """An event as a JSON object: ``type``, ``description``, then its fields."""
    return {"type": type(event).__name__, "description": event.describe(_iso), **fields_json(event)}


def account_json(account: Account) -> dict[str, Any]:
    # A local test tool: the control API hands out the generated credentials on purpose.
    return {
        "username": account.username,
        "api_key": account.api_key,
        "password": account.password,
        "permissions": None if account.permissions is None else sorted(account.permissions),
        "profiles": None
        if account.profiles is None
        else [f"{a}/{p}" for a, p in sorted(account.profiles)],
    }


def client_json(client: OAuthClient, *, secret: bool) -> dict[str, Any]:
    """An OAuth client: its secret whole when it is handed out (on creation, at
    startup), else as its fingerprint (a listing)."""
    return {
        "client_id": client.client_id,
        "client_secret": client.client_secret if secret else fingerprint(client.client_secret),
        "scopes": list(client.scopes),
    }


def fault_json(fault: ScriptedFault) -> dict[str, Any]:
    data = {k: v for k, v in dataclasses.asdict(fault).items() if v is not None}
    data["description"] = fault.describe()
    data["endpoints"] = fault.endpoints
    return data


#: Options of ``@pytest.mark.mgmtauth`` that mean nothing to a standalone server: there
#: is no teardown check for ``strict`` to make fail, ``require_logout`` to widen or
#: ``sunset_check`` to tune (``GET /_mgmtauth/check?require_logout=true`` and
#: ``?deprecated_version=false`` do that), and HTTPS shows in the URL's scheme.
TEST_ONLY_OPTIONS = ("strict", "https", "require_logout", "sunset_check")


def options_json(options: Options) -> dict[str, Any]:
    """The server's options for ``--json``: token_ttl in whole seconds (as the JWT's
    exp claim counts), without the options that only mean something in a test."""
    data = {
        f.name: getattr(options, f.name)
        for f in dataclasses.fields(options)
        if f.init and f.name not in TEST_ONLY_OPTIONS
    }
    data["token_ttl"] = int(options.token_ttl)
    data["oauth_token_ttl"] = int(options.oauth_token_ttl)
    return data
