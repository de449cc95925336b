"""The control API's endpoints that change the fake's state: accounts, OAuth clients,
routes, scripted faults, credentials and accounts on cue, idle connections and the reset.
A base of :class:`~.control.ControlAPI`, which lists them and answers for them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._http.parsing import unreachable_path
from .._service.limits import shown
from .messages import ControlError, account_json, client_json, fault_json

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._fake.server import MgmtServer
    from .messages import Body


class ControlActions:
    """``ControlAPI``'s handlers that act on the current fake (``_fake()``) or replace it
    (``_reset()``); each takes the request's :class:`~.messages.Body` and returns the
    status and the JSON payload."""

    _fake: Callable[[], MgmtServer]
    _reset: Callable[[], None]

    def _accounts(self, body: Body) -> tuple[int, Any]:
        return 200, {"accounts": [account_json(a) for a in self._fake().accounts]}

    def _add_account(self, body: Body) -> tuple[int, Any]:
        account = self._fake().add_account(
            body.text("username"),
            api_key=body.text("api_key"),
            password=body.text("password"),
            permissions=body.texts("permissions"),
            profiles=body.texts("profiles"),
        )
        return 201, account_json(account)

    def _add_route(self, body: Body) -> tuple[int, Any]:
        method = body.text("method") or "GET"
        path = body.text("path", required=True)
        assert path is not None
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
        )
        route.respond_with_json(answer, status=status)
        created: dict[str, Any] = {"method": route.method, "path": path, "auth": route.auth}
        if route.scope is not None:
            created["scope"] = route.scope
        return 201, created

    def _clients(self, body: Body) -> tuple[int, Any]:
        return 200, {"clients": [client_json(c, secret=False) for c in self._fake().clients]}

    def _add_client(self, body: Body) -> tuple[int, Any]:
        client = self._fake().add_client(
            body.texts("scopes"),
            client_id=body.text("client_id"),
            client_secret=body.text("client_secret"),
        )
        return 201, client_json(client, secret=True)

    def _client_id(self, body: Body) -> str:
        client_id = body.text("client_id", required=True)
        assert client_id is not None
        return client_id

    def _rotate_client_secret(self, body: Body) -> tuple[int, Any]:
        client = self._fake().rotate_client_secret(
            self._client_id(body), body.text("client_secret")
        )
        return 200, client_json(client, secret=True)

    def _revoke_client(self, body: Body) -> tuple[int, Any]:
        client_id = self._client_id(body)
        self._fake().revoke_client(client_id)
        return 200, {"revoked": client_id}

    def _faults(self, body: Body) -> tuple[int, Any]:
        return 200, {"pending": [fault_json(f) for f in self._fake().pending_faults]}

    def _add_fault(self, body: Body) -> tuple[int, Any]:
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

    def _credential(self, body: Body) -> str:
        credential = body.text("credential", required=True)
        assert credential is not None
        return credential

    def _expire(self, body: Body) -> tuple[int, Any]:
        return 200, {"expired": self._fake().expire(self._credential(body))}

    def _revoke(self, body: Body) -> tuple[int, Any]:
        return 200, {"revoked": self._fake().revoke(self._credential(body))}

    def _username(self, body: Body) -> str:
        username = body.text("username", required=True)
        assert username is not None
        return username

    def _lock(self, body: Body) -> tuple[int, Any]:
        username = self._username(body)
        self._fake().lock(username, seconds=body.number("seconds"))
        return 200, {"locked": username}

    def _unlock(self, body: Body) -> tuple[int, Any]:
        username = self._username(body)
        self._fake().unlock(username)
        return 200, {"unlocked": username}

    def _rotate_key(self, body: Body) -> tuple[int, Any]:
        account = self._fake().rotate_key(self._username(body), body.text("api_key"))
        return 200, account_json(account)

    def _rotate_password(self, body: Body) -> tuple[int, Any]:
        account = self._fake().rotate_password(self._username(body), body.text("password"))
        return 200, account_json(account)

    def _drop_connections(self, body: Body) -> tuple[int, Any]:
        return 200, {"dropped": self._fake().drop_idle_connections()}

    def _reset_all(self, body: Body) -> tuple[int, Any]:
        self._reset()
        return 200, {"accounts": [account_json(a) for a in self._fake().accounts]}
