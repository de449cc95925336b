"""The API gateway's side of the OAuth flow (``oauth.py``): calls with an access token,
checked against the scope the route declares or the call's path and method say
(``oauth_scopes.required_scope``), refused with RFC 6750's challenges in the error
envelope of dev-portal-authentication (``{"error": "insufficient_scope", "message":
"Token does not contain required scope: <scope>"}``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from ..records import AUTH_FAILED, FORBIDDEN
from .bearer import BearerFlow
from .oauth_clients import bearer_error
from .oauth_scopes import covers, required_scope

if TYPE_CHECKING:
    from ..credentials import Call
    from ..records import Authorization, TokenRecord
    from .base import Presented
    from .oauth_clients import OAuthClient


class GatewayFlow(BearerFlow):
    """The calls of a bearer flow whose tokens carry scopes (``OAuthFlow``)."""

    #: The flow's clients, by id (``OAuthFlow`` fills it).
    clients: dict[str, OAuthClient]

    def authorize(self, presented: Presented, call: Call, permission: str | None) -> Authorization:
        if presented.missing:
            self._refuse(
                call,
                None,
                None,
                "no Authorization header: send 'Authorization: Bearer <access_token>' with the "
                "access_token of the token endpoint's answer",
                error=None,
                wrong=True,
            )
        if presented.problem is not None:
            owner, label = (
                self._attribute_token(presented.token) if presented.token else (None, None)
            )
            self._refuse(
                call,
                owner,
                label,
                presented.problem,
                error="invalid_request",
                status=400,
                wrong=True,
            )
        return super().authorize(presented, call, permission)

    def refuse_call(
        self,
        call: Call,
        username: str | None,
        credential: str | None,
        reason: str,
        *,
        expired: bool = False,
        wrong: bool = False,
    ) -> NoReturn:
        self._refuse(
            call, username, credential, reason, error="invalid_token", expired=expired, wrong=wrong
        )

    def check_permission(self, call: Call, record: TokenRecord, permission: str | None) -> None:
        """The scope the call needs, in place of a permission (after the token was found
        live): the route's ``scope=``, else the one its path and method say (the
        gateway "matches the request context (account, profile, resource, and action)
        against the token's scopes"); a call of no such route or path needs none."""
        options = self.service.options
        required: str | tuple[str | None, ...]
        if call.scope is not None:
            required = named = call.scope
            source = "this route needs"
        else:
            derived = required_scope(call.method, call.path, options)
            if derived is None:
                return
            required, named = derived.parts, derived.named
            source = f"this call needs ({derived.source})"
        manage = options.oauth_manage_covers
        if any(covers(mine, required, manage_covers=manage) for mine in record.scopes):
            return
        client = self.clients.get(record.username)
        mine = [
            scope
            for scope in (client.scopes if client is not None else ())
            if covers(scope, required, manage_covers=manage)
        ]
        if mine:
            fix = f"ask the token endpoint for scope={mine[0]} (the client may get it)"
        else:
            fix = f"the client may not get it (add_client(scopes=[..., {named!r}]))"
        if len(named.split(":")) in (5, 7):
            fix += (
                "; account and profile access alone is not sufficient for an "
                "engine-enforced API: the engine must be granted too"
            )
        self._refuse(
            call,
            record.username,
            record.label,
            f"token {record.label} lacks the scope {named} {source}; it has "
            f"{' '.join(record.scopes) or 'none'}: {fix}",
            error="insufficient_scope",
            status=403,
            scope=named,
            wrong=True,
            message=f"Token does not contain required scope: {named}",
        )

    def _refuse(
        self,
        call: Call,
        username: str | None,
        credential: str | None,
        reason: str,
        *,
        error: str | None,
        status: int = 401,
        expired: bool = False,
        wrong: bool = False,
        scope: str | None = None,
        message: str | None = None,
    ) -> NoReturn:
        """A refusal in the gateway's error envelope, ``{"error", "message"}`` (the
        ``message``, else the ``reason``), with RFC 6750's challenge: no error code without
        a token, else its error and the scope the call needs."""
        body, challenge = bearer_error(message or reason, error, scope)
        self.service.credentials.refuse_call(
            call,
            username,
            credential,
            reason,
            expired=expired,
            wrong=wrong,
            code=FORBIDDEN if status == 403 else AUTH_FAILED,
            status=status,
            error=error or "no token",
            body=body,
            headers=(("WWW-Authenticate", challenge),),
        )

    def wrong_flow_reason(self, record: TokenRecord) -> str:
        return (
            f"token {record.label} is a {record.version} token ({self.origin_of(record)}): "
            "this route takes an OAuth access token from the token endpoint"
        )
