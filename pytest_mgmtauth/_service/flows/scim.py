"""The SCIM API's long-lived token (docs.tealium.com ``api/v3/scim-api/about`` and its
user and group endpoint pages), written against :mod:`pytest_mgmtauth.flows` only, as a
user's flow is.

``POST https://developer.tealiumapis.com/v2/auth-long-lived/token``, a form with
``account``, ``profile``, ``username`` and ``key`` -> ``{"access_token", "token_type":
"Bearer", "expires_in": 7776000, "scope": "profile email"}`` (90 days), 10 requests a
minute per IP address. ``POST .../v2/auth-long-lived/revoke`` with ``token`` and the same
four fields -> 200 with an empty body, also for a token already invalid; 401 when the
credentials are not those that made the token; 20 a minute. SCIM calls
(``/scim/v2/Users``, ``/Groups``) send the token and ``X-Tealium-Account``: 401
``{"returnCode": 1401, "message": "Authentication failed."}``, and without the header 403
in the SCIM error envelope. The option ``scim_token_version="v1"`` answers as an earlier
version of the page: ``/v1/auth-long-lived/token``, ``expires_in`` 35999.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import TYPE_CHECKING, Any, NoReturn

from pytest_mgmtauth.flows import (
    AUTH_FAILED,
    FORBIDDEN,
    Answer,
    BearerFlow,
    BearerToken,
    Credential,
    CredentialRevoked,
    Endpoint,
    Incoming,
    Options,
    Received,
    Refusal,
    Sets,
    to_datetime,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytest_mgmtauth.flows import Authorization, Call, TokenRecord

#: The SCIM API's host: its token endpoints and its calls.
HOST = "developer.tealiumapis.com"
TOKEN_PATH = "/v2/auth-long-lived/token"
REVOKE_PATH = "/v2/auth-long-lived/revoke"
#: An earlier version of the page (option ``scim_token_version="v1"``).
V1_TOKEN_PATH = "/v1/auth-long-lived/token"
#: 90 days; the earlier page's answer: 35999 s.
LIFETIME, V1_LIFETIME = 7_776_000, 35_999
SCOPE = "profile email"
#: Requests a minute per IP address, by endpoint (the page's limits).
LIMITS = {"token": 10, "revoke": 20}
WINDOW = 60.0
ACCOUNT_HEADER = "X-Tealium-Account"
#: The body of a refused SCIM call, exactly as the page shows it (the diagnosis is in the
#: timeline, the request log and the fake's diagnosis header, as on every refusal).
REFUSED: Mapping[str, object] = {"returnCode": AUTH_FAILED, "message": "Authentication failed."}
_TOKEN_FORM = ("account", "profile", "username", "key")


def scim_error(status: int, detail: str) -> dict[str, object]:
    """The SCIM error envelope (RFC 7644 3.12), as the pages show it."""
    return {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"],
        "status": str(status),
        "scimType": None,
        "detail": detail,
    }


@dataclasses.dataclass(frozen=True)
class ScimCredential(BearerToken):
    """A SCIM call's bearer token and its ``X-Tealium-Account`` header (``None``: none)."""

    account: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LongLivedTokenRevoked(CredentialRevoked):
    """When: a client revoked a long-lived token (``POST /v2/auth-long-lived/revoke``)."""

    def describe(self, when: Any = None) -> str:
        return f"token {self.credential} revoked by POST {REVOKE_PATH}"


class ScimFlow(BearerFlow):
    name = "scim"
    title = TOKEN_PATH
    path_title = "/v2/auth-long-lived"
    grants_phrase = "long-lived SCIM tokens"
    answer_field = "access_token"
    token_word = "access_token"
    route_prefix = "/scim/"
    auth_hosts = (HOST,)
    api_hosts = (HOST,)
    #: The token of the earlier page's example is a JWT; its algorithm is not shown.
    algorithm = "RS256"
    code_keys = ("token_type", "expires_in")
    #: The earlier page's answer (S1): its lifetime and the fields only it has.
    sets = (
        Sets("scim_token_version", "body.expires_in", (("v2", LIFETIME), ("v1", V1_LIFETIME))),
        Sets(
            "scim_token_version",
            "body.access_token.jwt.lifetime",
            (("v2", LIFETIME), ("v1", V1_LIFETIME)),
        ),
        Sets("scim_token_version", "body.refresh_expires_in", (("v2", None), ("v1", "integer"))),
        Sets("scim_token_version", "body.not-before-policy", (("v2", None), ("v1", "integer"))),
    )
    endpoints = (
        Endpoint("token", TOKEN_PATH, form=_TOKEN_FORM),
        Endpoint("revoke", REVOKE_PATH, form=("token", *_TOKEN_FORM), fault_point=False),
    )

    def __init__(self, service: Any) -> None:
        super().__init__(service)
        #: The requests of each endpoint in the last minute: the fake's clients share one
        #: address (loopback), so per IP address is per test.
        self._recent: dict[str, deque[float]] = {name: deque() for name in LIMITS}
        #: The X-Tealium-Account of the call being authorized (under the service's lock),
        #: for check_scope, which the bearer checks call with the token's record only.
        self._account_header: str | None = None

    @classmethod
    def endpoints_for(cls, options: Options) -> tuple[Endpoint, ...]:
        if options.scim_token_version == "v1":
            return (Endpoint("token", V1_TOKEN_PATH, form=_TOKEN_FORM), cls.endpoints[1])
        return cls.endpoints

    @classmethod
    def lifetime(cls, options: Options) -> int:
        return V1_LIFETIME if options.scim_token_version == "v1" else LIFETIME

    @classmethod
    def churn_margin(cls, options: Options) -> float:
        """A sixth of the lifetime, as ``refresh_margin`` is of ``token_ttl``."""
        return cls.lifetime(options) / 6

    @classmethod
    def fix_churn(cls, options: Options) -> str:
        return (
            f"keep the long-lived token from POST {TOKEN_PATH} (it lasts "
            f"{cls.lifetime(options)} s) and send it with every SCIM call; get a new one "
            "only near its end or after a call was answered 401"
        )

    @classmethod
    def fix_refused(cls) -> str:
        return (
            f"'Authorization: Bearer <access_token from POST {TOKEN_PATH}>' and "
            f"'{ACCOUNT_HEADER}: <account>'"
        )

    @classmethod
    def origin(cls, record: TokenRecord) -> str:
        return f"from {TOKEN_PATH} for {record.account}/{record.profile}"

    # -- the endpoints ------------------------------------------------------------------

    def _limit(self, operation: str, now: float) -> None:
        """429 past the endpoint's requests a minute (every request counts, refused too)."""
        recent = self._recent[operation]
        while recent and recent[0] <= now - WINDOW:
            recent.popleft()
        if len(recent) >= LIMITS[operation]:
            retry_after = max(1, math.ceil(recent[0] + WINDOW - now))
            reason = (
                f"{len(recent)} requests to /v2/auth-long-lived/{operation} within "
                f"{WINDOW:g} s: the page allows {LIMITS[operation]} a minute per IP address; "
                f"wait {retry_after} s (Retry-After)"
            )
            self.service.timeline.refuse(
                self.rejected(now, None, 429, reason),
                429,
                reason,
                status=429,
                retry_after=retry_after,
                body={"message": "Too many requests"},
            )
        recent.append(now)

    def issue_token(self, username: str, now: float, **grant: Any) -> tuple[str, TokenRecord]:
        # Its churn margin is the flow's own (churn_margin), which the grant reads.
        grant.update(ttl=self.lifetime(self.service.options), extra={"scope": SCOPE})
        return super().issue_token(username, now, **grant)

    def answer_token(self, incoming: Incoming) -> Answer:
        form = incoming.form
        with self.service.mutex:
            self._limit("token", self.service.timeline.now())
        token, _ = self.grant(
            form["username"],
            form["key"],
            form["account"],
            form["profile"],
            arrived=incoming.arrived,
            client=incoming.client,
        )
        lifetime = self.lifetime(self.service.options)
        if self.service.options.scim_token_version == "v1":  # the earlier page's answer
            return Answer(
                {
                    "access_token": token,
                    "expires_in": lifetime,
                    "refresh_expires_in": 0,
                    "token_type": "Bearer",
                    "not-before-policy": 0,
                    "scope": SCOPE,
                }
            )
        body = {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}
        return Answer({**body, "scope": SCOPE})

    def answer_revoke(self, incoming: Incoming) -> Answer:
        """200 with an empty body whether or not the token was still valid; 401 when the
        credentials are not those that made it. At once, for good."""
        form, service = incoming.form, self.service
        with service.mutex:
            now = service.timeline.now()
            self._limit("revoke", now)
            refuse = self.refuse_auth(now)
            username = form["username"]
            self.check_account(
                username, form["key"], now=now, client=incoming.client, refuse=refuse
            )
            record = service.credentials.by_token.get(form["token"])
            if record is None or record.version != self.name:
                # Not one of ours, or not a token at all: nothing to do.
                return Answer({}, empty=True)
            made_by = (record.username, record.account, record.profile)
            if made_by != (username, form["account"], form["profile"]):
                refuse(
                    username,
                    AUTH_FAILED,
                    f"revoke: token {record.label} was made by other credentials "
                    f"({record.account}/{record.profile}); send the account, profile, "
                    "username and key that made it",
                )
            if record.revoked_at is None:
                record.revoked_at = now
                service.timeline.record(
                    LongLivedTokenRevoked(
                        at=to_datetime(now),
                        username=record.username,
                        credential=record.label,
                        version=self.name,
                    )
                )
        return Answer({}, empty=True)

    # -- SCIM calls ---------------------------------------------------------------------

    def read(self, received: Received) -> ScimCredential:
        bearer = super().read(received)
        accounts = received.header(ACCOUNT_HEADER)
        return ScimCredential(**vars(bearer), account=accounts[0].strip() if accounts else None)

    def check_scope(self, call: Call, record: TokenRecord) -> None:
        """Authenticated: then the ``X-Tealium-Account`` header (403 without it)."""
        account = self._account_header
        if account is None:
            self._forbidden(
                call,
                record,
                "Missing X-Tealium-Account header.",
                f"no {ACCOUNT_HEADER} header: send '{ACCOUNT_HEADER}: {record.account}' with "
                "every SCIM call",
            )
        if account != record.account:
            self._forbidden(
                call,
                record,
                f"X-Tealium-Account {account!r} is not the account of the token.",
                f"{ACCOUNT_HEADER} names {account!r}, but token {record.label} is for account "
                f"{record.account!r}: send '{ACCOUNT_HEADER}: {record.account}', or a token of "
                f"account {account!r}",
            )

    def authorize(
        self, credential: Credential, call: Call, permission: str | None
    ) -> Authorization:
        assert isinstance(credential, ScimCredential)
        with self.service.mutex:  # one call at a time: check_scope reads it
            self._account_header = credential.account
            return super().authorize(credential, call, permission)

    def _forbidden(self, call: Call, record: TokenRecord, detail: str, reason: str) -> NoReturn:
        self.service.credentials.refuse_call(
            call,
            record.username,
            record.label,
            reason,
            wrong=True,
            code=FORBIDDEN,
            status=403,
            body=scim_error(403, detail),
        )

    @classmethod
    def api_error(cls, refusal: Refusal, options: Options) -> Refusal:
        """A refused credential (1401) in the page's 401 body exactly, whatever was
        wrong; why in the timeline and the diagnosis header."""
        if refusal.body is not None or refusal.return_code != AUTH_FAILED:
            return refusal
        return refusal.shaped(REFUSED, refusal.headers)
