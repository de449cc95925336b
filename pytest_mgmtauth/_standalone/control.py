"""The standalone server's control API: JSON over HTTP under ``/_mgmtauth/``.

A client in any language (or curl) reads the timeline, advances the simulated clock,
adds accounts and routes, scripts faults and resets the fake through it. Every answer
is JSON; bad input gets a 4xx JSON body ``{"returnCode": status, "message": ...}`` that
says what to send instead, and never stops the server. See docs/standalone.md.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from werkzeug import Response

from .._domain._clock import to_datetime
from .._domain._events import iso_time as _iso
from .._domain._options import _shown, check_advance
from .._transport._app import CONTROL_PREFIX as PREFIX
from .._transport._errors import (
    MAX_CONTROL_BODY,
    MAX_CONTROL_DEPTH,
    BodyTooLarge,
    error_response,
    json_response,
    read_limited_body,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from werkzeug import Request

    from .._domain._accounts import Account
    from .._domain._events import Event
    from .._domain._faults import ScriptedFault
    from .._fake import MgmtServer

#: Hosts that are always loopback (RFC 6761: ``localhost`` and names under it).
_LOOPBACK_NAMES = ("localhost",)
_WILDCARDS = ("", "0.0.0.0", "::")


def _host_name(header: str) -> str:
    """The host part of a ``Host`` header (no port, no brackets), lower case."""
    header = header.strip()
    if header.startswith("["):
        return header[1 : header.find("]")].lower() if "]" in header else header.lower()
    if header.count(":") == 1:
        header = header.rsplit(":", 1)[0]
    return header.lower().rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def host_allowed(header: str | None, bound: str, extra: Iterable[str] = ()) -> bool:
    """Whether a control request with this ``Host`` header may be served by a server
    listening on ``bound``: a loopback name or address, the address it was started on,
    or (started on a wildcard address) any IP address, or a name in ``extra``
    (``--allow-host``). A name that only DNS says is this machine (a DNS-rebinding
    page) is refused."""
    if header is None:
        return True  # no Host header: not a browser (HTTP/1.0 tools)
    name = _host_name(header)
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    if name and (name == _host_name(bound) or name in {_host_name(h) for h in extra}):
        return True
    address = _ip(name)
    if address is None:
        return False
    return address.is_loopback or bound in _WILDCARDS


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


class Verdicts(Protocol):
    """``GET /_mgmtauth/check``: the findings since the last reset as a JSON object,
    ``{"ok", "findings", "counts"}``; the switches say which kinds count."""

    def __call__(
        self, *, require_logout: bool, churn: bool, expired_use: bool
    ) -> dict[str, Any]: ...


class WholeTimeline(Protocol):
    """``GET /_mgmtauth/timeline``: every line of the timeline text (of one account)."""

    def __call__(self, username: str | None) -> str: ...


class AdvanceableClock(Protocol):
    def __call__(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json(status: int, body: Any) -> Response:
    return json_response(status, body)


def _error(status: int, message: str) -> Response:
    return error_response(status, status, message)


def event_json(event: Event) -> dict[str, Any]:
    """An event as a JSON object: ``type``, ``description``, then its fields."""
    data: dict[str, Any] = {"type": type(event).__name__}
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if isinstance(value, datetime):
            value = _iso(value)
        elif isinstance(value, tuple):
            value = list(value)
        fields[field.name] = value
    data["description"] = event.describe(_iso)
    data.update(fields)
    return data


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


def fault_json(fault: ScriptedFault) -> dict[str, Any]:
    data = {k: v for k, v in dataclasses.asdict(fault).items() if v is not None}
    data["description"] = fault.describe()
    data["endpoints"] = fault.endpoints
    return data


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class _Body:
    """A control request's JSON object, read field by field with named errors.

    ``query`` holds the query string of a GET (read with :meth:`flag` and checked
    against the endpoint's known parameters by :meth:`only_params`)."""

    query: Mapping[str, str] = MappingProxyType({})

    def __init__(self, endpoint: str, data: dict[str, Any], known: tuple[str, ...]) -> None:
        unknown = [k for k in data if k not in known]
        if unknown:
            raise ControlError(
                400,
                f"{endpoint}: unknown field {', '.join(map(_shown, unknown[:5]))}; known fields: "
                f"{', '.join(known) or 'none'}",
            )
        self.endpoint = endpoint
        self.data = data

    def _get(self, name: str, types: tuple[type, ...], what: str, required: bool) -> Any:
        if name not in self.data or self.data[name] is None:
            if required:
                raise ControlError(400, f"{self.endpoint}: the field {name!r} ({what}) is required")
            return None
        value = self.data[name]
        if isinstance(value, bool) and bool not in types:
            value_ok = False
        else:
            value_ok = isinstance(value, types)
        if not value_ok:
            shown = json.dumps(value)
            if len(shown) > 60:  # its kind and size only: no part of a string
                shown = f"a JSON {type(value).__name__} of {len(shown)} characters"
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be {what}, got {shown}"
            )
        return value

    def text(self, name: str, *, required: bool = False) -> str | None:
        value = self._get(name, (str,), "a string", required)
        assert value is None or isinstance(value, str)
        return value

    def integer(self, name: str, *, required: bool = False) -> int | None:
        value = self._get(name, (int,), "an integer", required)
        assert value is None or isinstance(value, int)
        return value

    def number(self, name: str, *, required: bool = False) -> float | int | None:
        """A JSON number as parsed: an int stays an int (10**400 has no float), the
        range is for the operation to check."""
        value = self._get(name, (int, float), "a number", required)
        if isinstance(value, float) and not math.isfinite(value):
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be a finite number, got {value}"
            )
        assert value is None or isinstance(value, (int, float))
        return value

    def only_params(self, known: tuple[str, ...]) -> None:
        unknown = [k for k in self.query if k not in known]
        if unknown:
            raise ControlError(
                400,
                f"{self.endpoint}: unknown query parameter {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(known) or 'none'}",
            )

    def flag(self, name: str, default: bool) -> bool:
        raw = self.query.get(name)
        if raw is None:
            return default
        value = _BOOLEANS.get(raw.strip().lower())
        if value is None:
            raise ControlError(400, f"{self.endpoint}: ?{name}= takes true or false, got {raw!r}")
        return value

    def texts(self, name: str) -> list[str] | None:
        value = self._get(name, (list,), "a list of strings", False)
        if value is not None and not all(isinstance(v, str) for v in value):
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be a list of strings"
            )
        return value  # type: ignore[no-any-return]


class ControlAPI:
    """Answers requests under :data:`PREFIX`; ``fake()`` is the current fake (it changes
    on reset), ``reset()`` replaces it with a fresh one."""

    prefix = PREFIX

    def __init__(
        self,
        *,
        fake: Callable[[], MgmtServer],
        clock: AdvanceableClock,
        reset: Callable[[], None],
        check: Verdicts | None = None,
        timeline: WholeTimeline | None = None,
        host: str = "127.0.0.1",
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        #: The address the server listens on (the DNS-rebinding guard allows it).
        self.host = host
        #: More names the guard allows (``--allow-host``).
        self.allowed_hosts = tuple(allowed_hosts)
        self._fake = fake
        self._clock = clock
        self._reset = reset
        self._check = check
        self._whole_timeline = timeline
        # (method, path below the prefix) -> (handler, known body fields, what it does)
        self._endpoints: dict[
            tuple[str, str], tuple[Callable[[_Body], tuple[int, Any]], tuple[str, ...], str]
        ] = {
            ("GET", ""): (self._index, (), "this list"),
            ("GET", "/events"): (self._events, (), "the timeline, oldest first"),
            ("GET", "/timeline"): (
                self._timeline,
                ("?username",),
                "the timeline as text, as Python failure messages show it (text/plain)",
            ),
            ("GET", "/check"): (
                self._verdicts,
                ("?require_logout", "?churn", "?expired_use"),
                "the verdicts since the last reset: ok, findings (churn, expired_use, "
                "open_session) with the assertions' messages, counts",
            ),
            ("GET", "/clock"): (self._now, (), "the simulated time"),
            ("POST", "/clock/advance"): (
                self._advance,
                ("seconds", "minutes", "hours"),
                "move the simulated clock forward",
            ),
            ("GET", "/accounts"): (self._accounts, (), "accounts with their credentials"),
            ("POST", "/accounts"): (
                self._add_account,
                ("username", "api_key", "password", "permissions", "profiles"),
                "add an account (anything left out is generated)",
            ),
            ("POST", "/routes"): (
                self._add_route,
                ("method", "path", "status", "json", "permission", "auth"),
                "declare a protected API route and its JSON answer",
            ),
            ("GET", "/faults"): (self._faults, (), "scripted faults not fired yet"),
            ("POST", "/faults"): (
                self._add_fault,
                ("kind", "count", "version", "error", "retry_after", "seconds", "clock"),
                "script a fault for the next auth/login calls",
            ),
            ("DELETE", "/faults"): (self._clear_faults, (), "drop pending faults"),
            ("POST", "/expire"): (self._expire, ("credential",), "expire a token or session"),
            ("POST", "/revoke"): (self._revoke, ("credential",), "revoke a token or session"),
            ("POST", "/lock"): (self._lock, ("username", "seconds"), "lock an account (1402)"),
            ("POST", "/unlock"): (self._unlock, ("username",), "unlock an account"),
            ("POST", "/rotate-key"): (
                self._rotate_key,
                ("username", "api_key"),
                "give an account a new API key",
            ),
            ("POST", "/rotate-password"): (
                self._rotate_password,
                ("username", "password"),
                "give an account a new password",
            ),
            ("POST", "/connections/drop"): (
                self._drop_connections,
                (),
                "close the kept-alive connections idle now (clients must reconnect)",
            ),
            ("POST", "/reset"): (
                self._reset_all,
                (),
                "fresh state: the startup accounts and routes again, nothing else",
            ),
        }

    def __call__(self, request: Request) -> Response:
        sub = request.path[len(PREFIX) :].rstrip("/")
        endpoint = f"{request.method} {PREFIX}{sub}"
        entry = self._endpoints.get((request.method, sub))
        if entry is None:
            methods = sorted(m for m, p in self._endpoints if p == sub)
            if methods:
                return _error(
                    405, f"{PREFIX}{sub} takes {' or '.join(methods)}, not {request.method}"
                )
            return _error(
                404,
                f"no control endpoint {endpoint}; see GET {PREFIX}/ for the list: "
                + ", ".join(f"{m} {PREFIX}{p}" for m, p in self._endpoints),
            )
        handler, known, _ = entry
        refused = self._refuse_foreign(request, endpoint)
        if refused is not None:
            return refused
        params = tuple(k[1:] for k in known if k.startswith("?"))
        known = tuple(k for k in known if not k.startswith("?"))
        try:
            body = _Body(endpoint, self._read_json(request, endpoint), known)
            body.query = request.args
            if params:  # endpoints without query parameters ignore any, as they always did
                body.only_params(params)
            status, payload = handler(body)
        except ControlError as exc:
            return _error(exc.status, exc.message)
        except (TypeError, ValueError) as exc:
            # The fake's own validation (an unknown account, a bad fault option...).
            return _error(400, f"{endpoint}: {exc}")
        except Exception as exc:  # a bug of ours: answer it, keep serving
            return _error(
                500, f"{endpoint}: mgmtauth-server failed internally ({type(exc).__name__}: {exc})"
            )
        if isinstance(payload, Response):
            payload.status_code = status
            return payload
        return _json(status, payload)

    def _refuse_foreign(self, request: Request, endpoint: str) -> Response | None:
        """The guard against a web page in the developer's browser: a DNS-rebinding page
        (its own name in ``Host``) gets 403, and so does a POST that is not
        ``application/json`` (which a page can only send after a CORS preflight that this
        server never grants) 415."""
        host = request.headers.get("Host")
        if not host_allowed(host, self.host, self.allowed_hosts):
            shown = host if len(host or "") <= 100 else f"{(host or '')[:100]}..."
            return _error(
                403,
                f"{endpoint}: refused the Host {shown!r}: the control API answers only "
                f"to localhost, a loopback address or the address it listens on "
                f"({self.host}), so that a web page cannot reach it through DNS rebinding; "
                "start mgmtauth-server with --allow-host NAME to allow another name",
            )
        if request.method == "POST" and request.mimetype != "application/json":
            sent = request.headers.get("Content-Type")
            return _error(
                415,
                f"{endpoint}: send the body as JSON with 'Content-Type: application/json' "
                f"(got {'no Content-Type' if sent is None else repr(sent[:100])}); control "
                "POSTs take JSON only, so that a web page cannot send them. "
                "curl: -H 'Content-Type: application/json' -d '{}'",
            )
        return None

    @staticmethod
    def _read_json(request: Request, endpoint: str) -> dict[str, Any]:
        try:
            raw = read_limited_body(request, MAX_CONTROL_BODY)
        except BodyTooLarge as exc:
            raise ControlError(413, f"{endpoint}: {exc}") from None
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
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
        if _depth(data) > MAX_CONTROL_DEPTH:
            raise ControlError(
                400, f"{endpoint}: the body nests deeper than {MAX_CONTROL_DEPTH} levels"
            )
        if not isinstance(data, dict):
            raise ControlError(
                400, f"{endpoint}: the body must be a JSON object, got {type(data).__name__}"
            )
        return data

    # -- endpoints -------------------------------------------------------------------

    def describe(self) -> list[dict[str, Any]]:
        """The endpoints: method, path, the body fields each takes, what it does."""
        return [
            {
                "method": m,
                "path": f"{PREFIX}{p}",
                "fields": [k for k in known if not k.startswith("?")],
                **(
                    {"query": [k[1:] for k in known if k.startswith("?")]}
                    if any(k.startswith("?") for k in known)
                    else {}
                ),
                "does": does,
            }
            for (m, p), (_, known, does) in self._endpoints.items()
        ]

    def _index(self, body: _Body) -> tuple[int, Any]:
        return 200, {"endpoints": self.describe()}

    def _events(self, body: _Body) -> tuple[int, Any]:
        return 200, {"events": [event_json(e) for e in self._fake().events]}

    def _timeline(self, body: _Body) -> tuple[int, Any]:
        username = body.query.get("username") or None
        # Both raise ValueError (a 400) for an account the fake does not know.
        if self._whole_timeline is not None:
            text = self._whole_timeline(username)
        else:
            text = self._fake().timeline(username)
        return 200, Response(text + "\n", content_type="text/plain; charset=utf-8")

    def _verdicts(self, body: _Body) -> tuple[int, Any]:
        if self._check is None:
            raise ControlError(404, f"{body.endpoint}: this server has no verdicts")
        return 200, self._check(
            require_logout=body.flag("require_logout", False),
            churn=body.flag("churn", True),
            expired_use=body.flag("expired_use", True),
        )

    def _now(self, body: _Body) -> tuple[int, Any]:
        return 200, {"now": _iso(to_datetime(self._clock()))}

    def _advance(self, body: _Body) -> tuple[int, Any]:
        # Every check before the clock moves: a refused advance changes nothing.
        parts = [body.number(name) for name in ("seconds", "minutes", "hours")]
        seconds, minutes, hours = (0 if part is None else part for part in parts)
        seconds = check_advance(
            self._clock(), seconds=seconds, minutes=minutes, hours=hours, what=""
        )
        if seconds == 0:
            raise ControlError(
                400, f'{body.endpoint}: say how far: {{"seconds": 1800}} (or minutes, hours)'
            )
        self._clock.advance(seconds)
        return self._now(body)

    def _accounts(self, body: _Body) -> tuple[int, Any]:
        return 200, {"accounts": [account_json(a) for a in self._fake().accounts]}

    def _add_account(self, body: _Body) -> tuple[int, Any]:
        account = self._fake().add_account(
            body.text("username"),
            api_key=body.text("api_key"),
            password=body.text("password"),
            permissions=body.texts("permissions"),
            profiles=body.texts("profiles"),
        )
        return 201, account_json(account)

    def _add_route(self, body: _Body) -> tuple[int, Any]:
        method = body.text("method") or "GET"
        path = body.text("path", required=True)
        assert path is not None
        status = body.integer("status")
        status = 200 if status is None else status
        if not 200 <= status <= 599:
            shown = status if abs(status) < 10**9 else "a huge number"
            raise ControlError(400, f"{body.endpoint}: status must be 200-599, got {shown}")
        answer = body.data.get("json", {})
        route = self._fake().route(
            method, path, permission=body.text("permission"), auth=body.text("auth")
        )
        route.respond_with_json(answer, status=status)
        return 201, {"method": route.method, "path": path, "auth": route.auth}

    def _faults(self, body: _Body) -> tuple[int, Any]:
        return 200, {"pending": [fault_json(f) for f in self._fake().pending_faults]}

    def _add_fault(self, body: _Body) -> tuple[int, Any]:
        kind = body.text("kind", required=True)
        count = body.integer("count")
        count = 1 if count is None else count  # 0 is refused by the fault, not made 1
        version = body.text("version")
        allowed = {
            "fail": ("error", "retry_after"),
            "hang": ("seconds", "clock"),
            "reset": (),
            "malformed": (),
        }
        if kind not in allowed:
            raise ControlError(
                400,
                f"{body.endpoint}: kind must be one of {', '.join(allowed)}, got {_shown(kind)}",
            )
        extra = [
            k
            for k in ("error", "retry_after", "seconds", "clock")
            if k in body.data and k not in allowed[kind]
        ]
        if extra:
            raise ControlError(
                400,
                f"{body.endpoint}: {', '.join(map(repr, extra))} do not apply to kind "
                f"{kind!r}; it takes: {', '.join(('count', 'version', *allowed[kind]))}",
            )
        fake = self._fake()
        if kind == "fail":
            error = body.integer("error")
            fake.fail_next(
                count,
                error=503 if error is None else error,
                version=version,
                retry_after=body.integer("retry_after"),
            )
        elif kind == "hang":
            seconds = body.number("seconds", required=True)
            assert seconds is not None
            fake.hang_next(
                count, seconds=seconds, clock=body.text("clock") or "real", version=version
            )
        elif kind == "reset":
            fake.drop_connection_next(count, version=version)
        else:
            fake.malformed_next(count, version=version)
        return 201, {"pending": [fault_json(f) for f in fake.pending_faults]}

    def _clear_faults(self, body: _Body) -> tuple[int, Any]:
        self._fake().clear_faults()
        return 200, {"pending": []}

    def _credential(self, body: _Body) -> str:
        credential = body.text("credential", required=True)
        assert credential is not None
        return credential

    def _expire(self, body: _Body) -> tuple[int, Any]:
        return 200, {"expired": self._fake().expire(self._credential(body))}

    def _revoke(self, body: _Body) -> tuple[int, Any]:
        return 200, {"revoked": self._fake().revoke(self._credential(body))}

    def _username(self, body: _Body) -> str:
        username = body.text("username", required=True)
        assert username is not None
        return username

    def _lock(self, body: _Body) -> tuple[int, Any]:
        username = self._username(body)
        self._fake().lock(username, seconds=body.number("seconds"))
        return 200, {"locked": username}

    def _unlock(self, body: _Body) -> tuple[int, Any]:
        username = self._username(body)
        self._fake().unlock(username)
        return 200, {"unlocked": username}

    def _rotate_key(self, body: _Body) -> tuple[int, Any]:
        account = self._fake().rotate_key(self._username(body), body.text("api_key"))
        return 200, account_json(account)

    def _rotate_password(self, body: _Body) -> tuple[int, Any]:
        account = self._fake().rotate_password(self._username(body), body.text("password"))
        return 200, account_json(account)

    def _drop_connections(self, body: _Body) -> tuple[int, Any]:
        return 200, {"dropped": self._fake().drop_idle_connections()}

    def _reset_all(self, body: _Body) -> tuple[int, Any]:
        self._reset()
        return 200, {"accounts": [account_json(a) for a in self._fake().accounts]}
