"""v3: ``POST /v3/auth/accounts/{account}/profiles/{profile}`` with username and API key
-> a token bound to that account and profile, and the ``host`` to send its calls to.

The calls a token is good for carry the same ``/accounts/{account}/profiles/{profile}``
segments in their paths (``/v3/customers/accounts/acme/profiles/main/...``).
"""

from __future__ import annotations

import http
import re
import uuid
from typing import TYPE_CHECKING
from urllib.parse import unquote

from .base import (
    ACCOUNT_PROFILE_NAMES,
    Answer,
    Endpoint,
    Incoming,
    Sets,
    normalized_path,
    remember_me,
)
from .bearer import BearerFlow

if TYPE_CHECKING:
    from ..credentials import Call
    from ..options import Options
    from ..records import Refusal, TokenRecord
    from .base import Where

AUTH_TEMPLATE = "/v3/auth/accounts/{account}/profiles/{profile}"

#: The ``message`` of v3's error envelope ``{"message": ...}`` where it is not the status's
#: reason phrase (which the Visitor Profile and Visitor Privacy endpoint pages show for 401
#: and 500, and API Gateway's own 403 is): their 429, and the phrases newer Pythons renamed
#: (RFC 9110's), pinned so that the body is the same on every Python the plugin supports.
#: No ``returnCode``: the pages show none on v3 calls.
ENVELOPE_MESSAGES = {
    429: "Too many requests",
    413: "Request Entity Too Large",
    414: "Request-URI Too Long",
    422: "Unprocessable Entity",
}
#: The published v3 answers' gateway headers that the fake's own v3 errors carry.
GATEWAY_HEADERS = frozenset(("x-amzn-requestid", "x-region"))
_REGION = re.compile(r"^([a-z]{2}-[a-z]+-?\d)-platform\.")


def envelope(status: int) -> dict[str, object]:
    """v3's error body for ``status`` (:data:`ENVELOPE_MESSAGES`)."""
    message = ENVELOPE_MESSAGES.get(status)
    if message is None:
        try:
            message = http.HTTPStatus(status).phrase
        except ValueError:
            message = "Error"
    return {"message": message}


def gateway_headers(region_host: str) -> tuple[tuple[str, str], ...]:
    """The headers of the gateway in front of the v3 API, as its published answers carry
    them: a request id, and the region of ``region_host`` where its name says one
    (``us-east-1-platform.tealiumapis.com``: ``us-east-1``)."""
    headers = [("x-amzn-requestid", str(uuid.uuid4()))]
    region = _REGION.match(region_host)
    if region:
        headers.append(("x-region", region[1]))
    return tuple(headers)


#: The status codes v3 auth's public documentation lists (and 5xx).
STATUSES = (200, 400, 401, 404, 429)
_SCOPE = re.compile(r"/accounts/(?P<account>[^/]+)(?:/profiles/(?P<profile>[^/]+))?")


def named_scopes(path: str) -> list[tuple[str, str | None]]:
    """Every ``/accounts/{account}[/profiles/{profile}]`` pair a path names, in the path
    as it arrived, percent-decoded (``acme%2Fprofiles%2Fmain`` names a pair too) and with
    as a server that normalizes it reads it (``main/x/../../..`` names what it lands on,
    ``acme//profiles/x`` names ``acme/x``): a token is good for a call only when every one
    of them is its own."""
    forms = [path]
    text = path
    for _ in range(3):  # %252F is %2F after one decoding, '/' after two
        decoded = unquote(text)
        if decoded == text:
            break
        forms.append(decoded)
        text = decoded
    forms += [normalized_path(form) for form in list(forms)]
    found: list[tuple[str, str | None]] = []
    for form in forms:
        for match in _SCOPE.finditer(form):
            pair = (match["account"], match["profile"])
            if pair not in found:
                found.append(pair)
    return found


class V3Flow(BearerFlow):
    name = "v3"
    title = "v3 auth"
    path_title = "/v3/auth"
    grants_phrase = "v3 tokens"
    route_prefix = "/v3/"
    auth_hosts = ("platform.tealiumapis.com",)
    #: "The host value must be used in subsequent API calls that are region-specific."
    api_on_region_host = True
    #: Where the iQ Profile API pages' examples send v3 calls (option ``v3_global_host``).
    global_host = "platform.tealiumapis.com"
    endpoints = (Endpoint("grant", AUTH_TEMPLATE, form=("username", "key"), statuses=STATUSES),)
    host_keys = ("host",)
    path_names = ACCOUNT_PROFILE_NAMES
    sets = (Sets("token_ttl", "body.token.jwt.lifetime"), Sets("v3_host", "body.host"))
    #: The published 401 ``{"message": "Unauthorized"}`` (its body from :meth:`api_error`).
    refused_error = "Unauthorized"

    @classmethod
    def origin(cls, record: TokenRecord) -> str:
        return f"for {record.scope}"

    @classmethod
    def fix_churn(cls, options: Options) -> str:
        return (
            "keep one v3 token per account and profile (from POST /v3/auth/accounts/"
            "{account}/profiles/{profile}) and send it with every call for that profile; "
            f"authenticate again only within refresh_margin ({options.refresh_margin:g} s) "
            'of its expiry or after a 401 {"message": "Unauthorized"}'
        )

    @classmethod
    def fix_refused(cls) -> str:
        return "the v3 token of the account and profile the path names"

    @classmethod
    def token_source(cls) -> str:
        return f"the 'token' field of the answer of POST {AUTH_TEMPLATE}"

    @classmethod
    def api_error(cls, refusal: Refusal, options: Options) -> Refusal:
        """v3's envelope ``{"message": ...}`` (no ``returnCode``) with the gateway's
        headers; the diagnosis stays in the timeline and the fake's diagnosis header."""
        body = refusal.body if refusal.body is not None else envelope(refusal.status)
        kept = tuple(h for h in refusal.headers if h[0].lower() not in GATEWAY_HEADERS)
        return refusal.shaped(body, kept + gateway_headers(options.v3_host))

    def check_permission(self, call: Call, record: TokenRecord, permission: str | None) -> None:
        """A missing permission is final on v3: 403 ``{"message": "Forbidden"}`` (the iQ
        Publish API page: 403 "Insufficient publish permission"), not v1 and v2's 401."""
        self.service.credentials.check_permission(
            call, record.username, record.label, permission, status=403, error="Forbidden"
        )

    @classmethod
    def wrong_path(cls, path: str) -> str:
        return (
            f"{path} is not a v3 auth endpoint: v3 authenticates at POST "
            f"{AUTH_TEMPLATE} (both names non-empty, no further segments)"
        )

    def answer_grant(self, incoming: Incoming) -> Answer:
        token, _ = self.grant(
            incoming.form["username"],
            incoming.form["key"],
            incoming.params["account"],
            incoming.params["profile"],
            arrived=incoming.arrived,
            client=incoming.client,
        )
        # The published v3 answer carries v2's rememberMe deletion too.
        cookie = remember_me(self.service.timeline.now())
        return Answer({"token": token, "host": incoming.host}, cookies=(cookie,))

    @classmethod
    def api_host_names(cls, options: Options) -> tuple[str, ...]:
        """The region host; with ``v3_global_host`` the global host too, as the iQ
        Profile API pages' examples call it."""
        region = super().api_host_names(options)
        return (*region, cls.global_host) if options.v3_global_host else region

    @classmethod
    def wrong_host_reason(cls, where: Where, expected: str, *, api: bool) -> str:
        if api and (where.host is None or where.host in cls.auth_hosts):
            return (
                "this call went to the v3 auth host; send v3 API calls to the `host` of "
                f'the auth answer ({expected}): the auth page says it "must be used", '
                f"though the iQ Profile API pages' examples call https://{cls.global_host}"
                "/v3/tiq/...; the option v3_global_host=True accepts that host too"
            )
        if api:
            return (
                f"this call went to {where.shown}, which does not serve v3 API calls; send "
                f"v3 API calls to the `host` of the auth answer ({expected})"
            )
        return super().wrong_host_reason(where, expected, api=api)

    def wrong_flow_reason(self, record: TokenRecord) -> str:
        return (
            f"token {record.label} is a {record.version} token ({self.origin_of(record)}): "
            f"v3 routes take a token from POST {AUTH_TEMPLATE}"
        )

    def check_scope(self, call: Call, record: TokenRecord) -> None:
        """Refuse a token used for another account or profile than its own (naming
        both); only the account counts with the ``v3_scope="account"`` option."""
        wrong = ""
        account: str | None = None
        profile: str | None = None
        scopes = named_scopes(call.path)
        for account, profile in scopes:
            if account != record.account:
                wrong = f"account {account!r}"
            elif (
                self.service.options.v3_scope == "profile"
                and profile is not None
                and profile != record.profile
            ):
                wrong = f"profile {account}/{profile}"
            if wrong:
                break
        if not wrong:
            return
        assert account is not None
        want = f"{account}/{profile or '{profile}'}"
        relax = (
            " (or set the option v3_scope='account' to accept any profile of the account)"
            if account == record.account
            else ""
        )
        self.refuse_call(
            call,
            record.username,
            record.label,
            f"token {record.label} is for {record.scope}, but this call "
            f"{'is for' if (account, profile) == scopes[0] else 'also names'} {wrong}: "
            f"authenticate at POST /v3/auth/accounts/{want.replace('/', '/profiles/', 1)} "
            f"and send that token with {want}'s calls{relax}",
            wrong=True,
        )
