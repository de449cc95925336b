"""The standalone server's control API: JSON over HTTP under ``/_mgmtauth/``.

A client in any language (or curl) reads the timeline, advances the simulated clock,
adds accounts and routes, scripts faults and resets the fake through it. Every answer
is JSON; bad input gets a 4xx JSON body ``{"returnCode": status, "message": ...}`` that
says what to send instead, and never stops the server. See docs/standalone.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from werkzeug import Response

from .._http.app import CONTROL_PREFIX as PREFIX
from .._http.errors import error_response, json_response
from .._http.parsing import unreachable_path
from .._service.events import iso_time as _iso
from .._service.limits import check_advance, shown
from .._service.timeline import to_datetime
from .messages import (
    ACCOUNT_FIELDS,
    CLIENT_FIELDS,
    Body,
    ControlError,
    account_fields,
    account_json,
    client_fields,
    client_json,
    event_json,
    fault_json,
    fields_json,
    read_json,
    refuse_foreign,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from werkzeug import Request

    from .._fake.server import MgmtServer
    from .._service.timeline import ManualClock, OffsetClock


#: ``GET /_mgmtauth/check``'s switches: query parameter -> the kind of finding it
#: counts, and whether that kind counts when the parameter is not given.
CHECK_SWITCHES = {
    "require_logout": ("open_session", False),
    "churn": ("churn", True),
    "expired_use": ("expired_use", True),
    "refused_call": ("refused_call", True),
    "wrong_host": ("wrong_host", True),
    "deprecated_version": ("deprecated_version", True),
}


def _error(status: int, message: str) -> Response:
    return error_response(status, status, message)


class ControlAPI:
    """Answers requests under :data:`PREFIX`; ``fake()`` is the current fake (it changes
    on reset), ``reset()`` replaces it with a fresh one."""

    prefix = PREFIX

    def __init__(
        self,
        *,
        fake: Callable[[], MgmtServer],
        clock: ManualClock | OffsetClock,
        reset: Callable[[], None],
        check: Callable[[dict[str, bool]], dict[str, Any]],
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
        # (method, path below the prefix) -> (handler, known body fields, what it does)
        self._endpoints: dict[
            tuple[str, str], tuple[Callable[[Body], tuple[int, Any]], tuple[str, ...], str]
        ] = {
            ("GET", ""): (self._index, (), "this list"),
            ("GET", "/events"): (self._events, (), "the timeline, oldest first"),
            ("GET", "/requests"): (
                self._requests,
                (),
                "the requests the fake answered since the last reset, oldest first, as they "
                "arrived (secrets masked); not the control API's own; 'dropped': how many "
                "earlier ones the log no longer holds",
            ),
            ("GET", "/timeline"): (
                self._timeline,
                ("?username",),
                "the timeline as text, as Python failure messages show it (text/plain)",
            ),
            ("GET", "/check"): (
                self._verdicts,
                tuple(f"?{name}" for name in CHECK_SWITCHES),
                "the verdicts since the last reset: ok, findings (churn, expired_use, "
                "refused_call, open_session, wrong_host, deprecated_version) with the "
                "assertions' messages, counts",
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
                ACCOUNT_FIELDS,
                "add an account (anything left out is generated)",
            ),
            ("GET", "/clients"): (
                self._clients,
                (),
                "OAuth clients, their secrets masked (fingerprints)",
            ),
            ("POST", "/clients"): (
                self._add_client,
                CLIENT_FIELDS,
                "add an OAuth client (id and secret generated unless given); answers it "
                "with its secret",
            ),
            ("POST", "/rotate-client-secret"): (
                self._rotate_client_secret,
                ("client_id", "client_secret"),
                "give an OAuth client a new secret",
            ),
            ("POST", "/revoke-client"): (
                self._revoke_client,
                ("client_id",),
                "revoke an OAuth client: no more tokens (invalid_grant)",
            ),
            ("POST", "/routes"): (
                self._add_route,
                ("method", "path", "status", "json", "permission", "auth", "scope", "rate_limit"),
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
        refused = refuse_foreign(request, endpoint, self.host, self.allowed_hosts)
        if refused is not None:
            return refused
        try:
            status, payload = handler(
                Body(endpoint, read_json(request, endpoint), known, request.args)
            )
        except ControlError as exc:
            return _error(exc.status, exc.message)
        except (TypeError, ValueError) as exc:
            # The fake's own validation (an unknown account, a bad fault option...).
            return _error(400, f"{endpoint}: {exc}")
        except Exception as exc:  # a bug of ours: answer it, keep serving
            return _error(
                500, f"{endpoint}: mgmtauth-server failed internally ({type(exc).__name__}: {exc})"
            )
        # A Response: the text of GET /timeline, answered 200.
        return payload if isinstance(payload, Response) else json_response(status, payload)

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

    def _index(self, body: Body) -> tuple[int, Any]:
        return 200, {"endpoints": self.describe()}

    def _events(self, body: Body) -> tuple[int, Any]:
        return 200, {"events": [event_json(e) for e in self._fake().events]}

    def _requests(self, body: Body) -> tuple[int, Any]:
        logged = self._fake().requests
        return 200, {"requests": [fields_json(r) for r in logged], "dropped": logged.dropped}

    def _timeline(self, body: Body) -> tuple[int, Any]:
        # Every line, not cut around one event; ValueError (a 400) for an unknown account.
        text = self._fake().timeline(body.query.get("username") or None)
        return 200, Response(text + "\n", content_type="text/plain; charset=utf-8")

    def _verdicts(self, body: Body) -> tuple[int, Any]:
        counted = {kind: body.flag(name, on) for name, (kind, on) in CHECK_SWITCHES.items()}
        return 200, self._check(counted)

    def _now(self, body: Body) -> tuple[int, Any]:
        return 200, {"now": _iso(to_datetime(self._clock()))}

    def _advance(self, body: Body) -> tuple[int, Any]:
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

    # -- the endpoints that change the fake's state: accounts, OAuth clients, routes,
    # scripted faults, credentials and accounts on cue, idle connections, the reset ----

    def _accounts(self, body: Body) -> tuple[int, Any]:
        return 200, {"accounts": [account_json(a) for a in self._fake().accounts]}

    def _add_account(self, body: Body) -> tuple[int, Any]:
        return 201, account_json(self._fake().add_account(**account_fields(body)))

    def _add_route(self, body: Body) -> tuple[int, Any]:
        method = body.text("method") or "GET"
        path = body.required_text("path")
        unreachable = unreachable_path(path)
        if unreachable is not None:
            raise ControlError(400, f"{body.endpoint}: {unreachable}")
        status = body.integer("status")
        status = 200 if status is None else status
        if not 200 <= status <= 599:
            shown = status if abs(status) < 10**9 else "a huge number"
            raise ControlError(400, f"{body.endpoint}: status must be 200-599, got {shown}")
        answer = body.data.get("json", {})
        route = self._fake().route(
            method,
            path,
            permission=body.text("permission"),
            auth=body.text("auth"),
            scope=body.text("scope"),
            rate_limit=body.text("rate_limit"),
        )
        route.respond_with_json(answer, status=status)
        created: dict[str, str | None] = {"method": route.method, "path": path, "auth": route.auth}
        created |= {"scope": route.scope, "rate_limit": route.rate_limit}
        return 201, {name: value for name, value in created.items() if value is not None}

    def _clients(self, body: Body) -> tuple[int, Any]:
        return 200, {"clients": [client_json(c, secret=False) for c in self._fake().clients]}

    def _add_client(self, body: Body) -> tuple[int, Any]:
        return 201, client_json(self._fake().add_client(**client_fields(body)), secret=True)

    def _rotate_client_secret(self, body: Body) -> tuple[int, Any]:
        client = self._fake().rotate_client_secret(
            body.required_text("client_id"), body.text("client_secret")
        )
        return 200, client_json(client, secret=True)

    def _revoke_client(self, body: Body) -> tuple[int, Any]:
        client_id = body.required_text("client_id")
        self._fake().revoke_client(client_id)
        return 200, {"revoked": client_id}

    def _faults(self, body: Body) -> tuple[int, Any]:
        return 200, {"pending": [fault_json(f) for f in self._fake().pending_faults]}

    def _add_fault(self, body: Body) -> tuple[int, Any]:
        kind = body.required_text("kind")
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
                f"{body.endpoint}: kind must be one of {', '.join(allowed)}, got {shown(kind)}",
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

    def _clear_faults(self, body: Body) -> tuple[int, Any]:
        self._fake().clear_faults()
        return 200, {"pending": []}

    def _expire(self, body: Body) -> tuple[int, Any]:
        return 200, {"expired": self._fake().expire(body.required_text("credential"))}

    def _revoke(self, body: Body) -> tuple[int, Any]:
        return 200, {"revoked": self._fake().revoke(body.required_text("credential"))}

    def _lock(self, body: Body) -> tuple[int, Any]:
        username = body.required_text("username")
        self._fake().lock(username, seconds=body.number("seconds"))
        return 200, {"locked": username}

    def _unlock(self, body: Body) -> tuple[int, Any]:
        username = body.required_text("username")
        self._fake().unlock(username)
        return 200, {"unlocked": username}

    def _rotate_key(self, body: Body) -> tuple[int, Any]:
        account = self._fake().rotate_key(body.required_text("username"), body.text("api_key"))
        return 200, account_json(account)

    def _rotate_password(self, body: Body) -> tuple[int, Any]:
        account = self._fake().rotate_password(
            body.required_text("username"), body.text("password")
        )
        return 200, account_json(account)

    def _drop_connections(self, body: Body) -> tuple[int, Any]:
        return 200, {"dropped": self._fake().drop_idle_connections()}

    def _reset_all(self, body: Body) -> tuple[int, Any]:
        self._reset()
        return 200, {"accounts": [account_json(a) for a in self._fake().accounts]}
