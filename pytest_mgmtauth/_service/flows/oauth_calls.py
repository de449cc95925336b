"""The API gateway's side of the OAuth flow (``oauth.py``): calls with an access token,
checked against the scope the route needs, refused as RFC 6750 section 3 says."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from ..records import AUTH_FAILED, FORBIDDEN
from .bearer import BearerFlow
from .oauth_clients import bearer_error
from .oauth_scopes import covers

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
        """The route's scope, in place of a permission (after the token was found live)."""
        required = call.scope
        manage = self.service.options.oauth_manage_covers
        if required is None or any(
            covers(mine, required, manage_covers=manage) for mine in record.scopes
        ):
            return
        client = self.clients.get(record.username)
        if client is not None and any(
            covers(mine, required, manage_covers=manage) for mine in client.scopes
        ):
            fix = f"ask the token endpoint for scope={required} (the client may get it)"
        else:
            fix = f"the client may not get it (add_client(scopes=[..., {required!r}]))"
        self._refuse(
            call,
            record.username,
            record.label,
            f"token {record.label} lacks the scope {required} this route needs; it has "
            f"{' '.join(record.scopes) or 'none'}: {fix}",
            error="insufficient_scope",
            status=403,
            scope=required,
            wrong=True,
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
    ) -> NoReturn:
        """An RFC 6750 refusal: no error code without a token, else its error and the
        scope the route needs."""
        body, challenge = bearer_error(reason, error, scope)
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
