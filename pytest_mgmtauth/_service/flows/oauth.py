"""OAuth 2.0 client credentials of the developer portal (RFC 6749 section 4.4): ``POST``
to the token endpoint (option ``oauth_token_path``) with a client's id and secret -> an
RS512 JWT access token that carries scopes, sent as ``Authorization: Bearer <token>``.

A scope is ``{account}:{profile}:{apiFamily}:{apiVersion}:{resource}:{action}``. A route
declared with ``scope=...`` takes a token with a scope that covers it: the same account,
family, version and resource; the same profile or ``*``; the same action, or ``manage``
(which covers ``write`` and ``read``; our choice). Errors have the shapes of RFC 6749
section 5.2 (the token endpoint) and RFC 6750 section 3 (API calls), not the service's.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import difflib
import re
import secrets
from collections import deque
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import parse_qsl, unquote, unquote_plus

from ..accounts import fingerprint, generate_api_key
from ..events import AuthRejected, ClientRevoked, SecretRotated
from ..options import OAUTH_TOKEN_PATH
from ..records import AUTH_FAILED, DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW, FORBIDDEN, Refusal
from ..secret_text import ClientKind, diagnose_secret, paused_diagnosis
from ..timeline import to_datetime
from .base import Answer, Endpoint, Incoming, Presented
from .bearer import BearerFlow
from .oauth_clients import (
    DEFAULT_SCOPE,
    HOST,
    OAuthClient,
    basic_spellings,
    check_scopes,
    covers,
    parse_scope,
    quoted,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..credentials import Call
    from ..options import Options
    from ..records import Authorization, TokenRecord
    from ..service import AuthService

GRANT_TYPE = "client_credentials"

#: The statuses of the token endpoint (RFC 6749 5.1, 5.2; 429 when throttled).
STATUSES = (200, 400, 401, 405, 429)

_NO_STORE = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))

_BASIC = (("WWW-Authenticate", f'Basic realm="{HOST}", charset="UTF-8"'),)

_PARAMS = ("grant_type", "client_id", "client_secret", "scope")

#: How each client form-encodes the id and secret of HTTP Basic (RFC 6749 2.3.1).
_ENCODE_FOR_BASIC = {
    ClientKind.CURL: "curl -u does not form-encode them: send --data-urlencode client_id=... "
    "--data-urlencode client_secret=... instead of -u",
    ClientKind.NODE: "Encode each with new URLSearchParams({v}).toString().slice(2) before "
    "joining them, or send client_id and client_secret in the form",
    ClientKind.JAVA: "Encode each with URLEncoder.encode(value, StandardCharsets.UTF_8) before "
    "joining them, or send client_id and client_secret in the form",
    ClientKind.GO: "Encode each with url.QueryEscape before SetBasicAuth (golang.org/x/oauth2's "
    "clientcredentials does), or send client_id and client_secret in the form",
    ClientKind.OTHER: "Encode them first (Python: auth=(quote_plus(id), quote_plus(secret))), "
    "or send client_id and client_secret in the form",
}

_OTHER_GRANTS = {
    "password": "the password grant takes a user's password",
    "authorization_code": "the authorization code grant needs a user's consent",
    "refresh_token": "client credentials tokens come without refresh tokens (RFC 6749 4.4.3)",
}


def _rfc_text(text: str) -> str:
    """``text`` in the characters RFC 6749 allows in ``error_description``."""
    text = text.replace('"', "'").replace("\\", "/")
    return "".join(c if c.isascii() and c.isprintable() else "?" for c in text)


class OAuthFlow(BearerFlow):
    name = "oauth"
    title = "the OAuth 2.0 token endpoint"
    path_title = "OAuth token endpoint"
    grants_phrase = "OAuth access tokens"
    secret = "client secret"
    answer_field = "access_token"
    #: The gateway host: its token endpoint and its API calls.
    auth_hosts = (HOST,)
    api_hosts = (HOST,)
    takes_scope = True
    principal = "OAuth client"
    endpoints = (Endpoint("token", OAUTH_TOKEN_PATH, statuses=STATUSES),)

    def __init__(self, service: AuthService) -> None:
        super().__init__(service)
        self.clients: dict[str, OAuthClient] = {}
        self._rotated: dict[str, list[tuple[str, float]]] = {}
        self._revoked: dict[str, float] = {}
        self._diagnosed: dict[str, deque[float]] = {}

    @classmethod
    def endpoints_for(cls, options: Options) -> tuple[Endpoint, ...]:
        return (Endpoint("token", options.oauth_token_path, statuses=STATUSES),)

    @classmethod
    def origin(cls, record: TokenRecord) -> str:
        return f"from the token endpoint, for {' '.join(record.scopes) or 'no scope'}"

    @classmethod
    def fix_churn(cls, options: Options) -> str:
        return (
            "keep one OAuth access token per set of scopes and send it with every call; "
            "ask the token endpoint again only within refresh_margin "
            f"({options.oauth_margin():g} s) of its expiry (expires_in, "
            f'{options.oauth_token_ttl:g} s) or after a 401 with error="invalid_token"'
        )

    @classmethod
    def fix_expired(cls, options: Options) -> str:
        return (
            "renew proactively: note when the token was granted plus expires_in, and ask "
            f"for a new one within refresh_margin ({options.oauth_margin():g} s) of that "
            "moment instead of sending it until the API answers 401 invalid_token"
        )

    @classmethod
    def check_route(cls, permission: str | None, scope: str | None) -> None:
        if permission is not None:
            raise ValueError(
                "route(permission=...): OAuth routes take scope=... (the token's scopes "
                "decide, not an account's permissions)"
            )
        if scope is not None:
            if not isinstance(scope, str):
                raise TypeError(f"route(scope=...) takes one scope str, got {scope!r}")
            parse_scope(re.sub(r"\{\w+\}", "x", scope))

    @classmethod
    def style(cls, refusal: Refusal) -> Refusal:
        """A refusal in the service's shape (throttling, a scripted fault, bad input)
        as an RFC 6749 error."""
        if refusal.body is not None:
            return refusal
        status = refusal.status
        # 501 is the client's doing (a transfer coding the fake does not implement).
        error = {401: "invalid_client", 429: "temporarily_unavailable", 500: "server_error"}.get(
            status, "temporarily_unavailable" if status > 501 else "invalid_request"
        )
        return Refusal(
            status,
            refusal.return_code,
            refusal.reason,
            retry_after=refusal.retry_after,
            body={"error": error, "error_description": _rfc_text(refusal.reason)},
            headers=_NO_STORE + (_BASIC if status == 401 else ()),
        )

    def principals(self) -> list[str]:
        return list(self.clients)

    # -- clients -------------------------------------------------------------------

    def add_client(
        self,
        scopes: Iterable[str] | None = None,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> OAuthClient:
        """A new client; its id and secret are generated unless given (the secret with
        the characters API keys have that must be encoded)."""
        scopes = check_scopes([DEFAULT_SCOPE] if scopes is None else scopes, what="add_client")
        for what, value in (("client_id", client_id), ("client_secret", client_secret)):
            if value is not None and (not isinstance(value, str) or not value.isprintable()):
                # A secret is never echoed, not even a wrong one.
                got = repr(value) if what == "client_id" else f"a {type(value).__name__}"
                raise ValueError(f"add_client({what}=...) must be a printable str, got {got}")
            if value == "":
                raise ValueError(f"add_client({what}=...) must not be empty")
        with self.service.mutex:
            if client_id is None:
                client_id = f"client{len(self.clients) + 1}-{secrets.token_hex(4)}"
            if client_id in self.clients:
                raise ValueError(f"add_client: a client {client_id!r} exists already in this test")
            client = OAuthClient(client_id, client_secret or generate_api_key(), scopes)
            self.clients[client_id] = client
            self.service.timeline.hold_secrets(
                client.client_secret, *basic_spellings(client_id, client.client_secret)
            )
            return client

    def known_client(self, client_id: str) -> OAuthClient:
        client = self.clients.get(client_id)
        if client is None:
            raise ValueError(self._unknown_client(client_id))
        return client

    def rotate_client_secret(self, client_id: str, new_secret: str | None = None) -> OAuthClient:
        """A new secret for the client; the old one gets invalid_client from now on.
        Tokens already granted stay valid."""
        with self.service.mutex:
            client = self.known_client(client_id)
            if new_secret is not None and (not isinstance(new_secret, str) or not new_secret):
                raise ValueError(
                    f"the new client secret must be a non-empty str, got {new_secret!r}"
                )
            new_secret = new_secret or generate_api_key()
            if new_secret == client.client_secret:
                raise ValueError("the new client secret is the client's current one")
            rotated = dataclasses.replace(client, client_secret=new_secret)
            self.clients[client_id] = rotated
            self.service.timeline.hold_secrets(new_secret, *basic_spellings(client_id, new_secret))
            now = self.service.now()
            self._rotated.setdefault(client_id, []).append((client.client_secret, now))
            self.service.timeline.record(
                SecretRotated(
                    at=to_datetime(now),
                    username=client_id,
                    secret="client secret",
                    old_fingerprint=fingerprint(client.client_secret),
                    new_fingerprint=fingerprint(new_secret),
                    refused_with="invalid_client",
                )
            )
            return rotated

    def revoke_client(self, client_id: str) -> None:
        """The client gets no more tokens (invalid_grant); its tokens stay valid."""
        with self.service.mutex:
            self.known_client(client_id)
            now = self.service.now()
            self._revoked.setdefault(client_id, now)
            self.service.timeline.record(ClientRevoked(at=to_datetime(now), username=client_id))

    def _unknown_client(self, client_id: str) -> str:
        if not self.clients:
            return (
                f"no OAuth client {quoted(client_id)} exists: this test has no clients; add "
                "one with mgmt_server.add_client(scopes=[...]) or use mgmt_oauth_client"
            )
        close = difflib.get_close_matches(client_id, list(self.clients), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return self.service.redact(f"no OAuth client {quoted(client_id)} exists{hint}")

    # -- the token endpoint ----------------------------------------------------------

    def _reject(self, error: str, reason: str, client_id: str | None = None) -> NoReturn:
        """Refuse a token request with an RFC 6749 5.2 error (invalid_client: 401)."""
        status = 401 if error == "invalid_client" else 400
        timeline = self.service.timeline
        timeline.refuse(
            AuthRejected(
                at=to_datetime(timeline.now()),
                username=client_id if client_id in self.clients else None,
                return_code=status,
                reason=reason,
                version=self.name,
                error=error,
            ),
            status,
            reason,
            status=status,
            body={"error": error, "error_description": _rfc_text(reason)},
            headers=_NO_STORE + (_BASIC if status == 401 else ()),
        )

    def answer_token(self, incoming: Incoming) -> Answer:
        options = self.service.options
        with self.service.mutex:
            form = self._form(incoming)
            client_id, secret, raw = self._credentials(incoming, form)
            client = self._authenticate(client_id, secret, raw, incoming.client)
            now = self.service.now()
            self.check_throttle(client.client_id, now)
            granted = self._granted(client, form.get("scope"))
        token, _ = self.issue_token(  # signs outside the lock
            client.client_id,
            now,
            arrived=incoming.arrived,
            scopes=granted,
            ttl=options.oauth_token_ttl,
            margin=options.oauth_margin(),
            extra={"scope": " ".join(granted), "client_id": client.client_id},
        )
        body: dict[str, object] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": int(options.oauth_token_ttl),
            "scope": " ".join(granted),
        }
        return Answer(body, headers=_NO_STORE)

    def _form(self, incoming: Incoming) -> dict[str, str]:
        """The request's parameters (RFC 6749 4.4.2: a form body, each parameter once;
        unknown ones ignored, RFC 6749 3.1)."""
        in_query = [name for name, _ in incoming.query if name in _PARAMS]
        if "client_secret" in in_query:
            self._reject(
                "invalid_request",
                "the client secret arrived in the URL's query string, which proxies and "
                "logs keep: send it in the form body or by HTTP Basic, and rotate it",
            )
        if in_query:
            self._reject(
                "invalid_request",
                f"{', '.join(in_query)} arrived in the query string: send the parameters "
                "in a form body (RFC 6749 4.4.2)",
            )
        wanted = (
            "the token endpoint takes a form body (Content-Type: application/"
            "x-www-form-urlencoded) with grant_type=client_credentials"
        )
        mimetype = (incoming.content_type or "").split(";", 1)[0].strip().lower()
        text = incoming.body.decode("latin-1")
        if not incoming.body.strip():
            self._reject("invalid_request", f"the body is empty: {wanted}")
        if mimetype != "application/x-www-form-urlencoded" or text.lstrip()[:1] in ("{", "["):
            sent = "JSON" if "json" in mimetype or text.lstrip()[:1] in ("{", "[") else None
            what = sent or f"Content-Type {quoted(incoming.content_type or 'none')}"
            self._reject(
                "invalid_request",
                f"this request sent {what}: {wanted} (requests and httpx: data={{...}}, not "
                "json={...})",
            )
        try:
            pairs = parse_qsl(
                incoming.body.decode("ascii"), keep_blank_values=True, errors="strict"
            )
        except UnicodeError:
            self._reject(
                "invalid_request",
                "the body is not ASCII, or a '%XX' escape in it is not UTF-8: percent-encode "
                "every value of the form (a raw '%' must travel as %25)",
            )
        names = [name for name, _ in pairs]
        for name in _PARAMS:
            if names.count(name) > 1:
                self._reject(
                    "invalid_request",
                    f"{name} appears {names.count(name)} times: send each parameter once "
                    "(RFC 6749 3.2)",
                )
        form = {name: value for name, value in pairs if name in _PARAMS}
        grant = form.get("grant_type")
        if grant is None or grant == "":
            self._reject("invalid_request", f"grant_type is missing or empty: {wanted}")
        if grant != GRANT_TYPE:
            why = _OTHER_GRANTS.get(grant, "this endpoint grants only client credentials")
            self._reject(
                "unsupported_grant_type",
                f"grant_type {quoted(grant)} is not supported ({why}): send "
                "grant_type=client_credentials",
            )
        return form

    def _credentials(self, incoming: Incoming, form: dict[str, str]) -> tuple[str, str, str | None]:
        """``(client_id, secret, raw)``: ``raw`` is the secret as it stood in the Basic
        header before form-decoding (``None`` for credentials in the form)."""
        values = [v.strip() for joined in incoming.authorization for v in joined.split(",")]
        form_id, form_secret = form.get("client_id"), form.get("client_secret")
        if len(values) > 1:
            self._reject("invalid_request", f"{len(values)} Authorization values: send one")
        if not values:
            if form_id is None and form_secret is None:
                self._reject(
                    "invalid_client",
                    "no client authentication: send the client id and secret by HTTP Basic "
                    "(each form-encoded, RFC 6749 2.3.1) or as client_id and client_secret "
                    "in the form",
                )
            if not form_id:
                self._reject("invalid_request", "client_secret without client_id in the form")
            if not form_secret:
                self._reject(
                    "invalid_client",
                    f"client {quoted(form_id)} sent no client_secret: send it in the form, "
                    "or the id and secret by HTTP Basic",
                    form_id,
                )
            return form_id, form_secret, None
        scheme, _, rest = values[0].partition(" ")
        if scheme.lower() != "basic":
            named = len(scheme) <= 20 and scheme.isalpha()  # a scheme, never a secret
            sent = (
                f"the Authorization scheme is {scheme!r}, not Basic"
                if named
                else ("the Authorization header is not 'Basic <credentials>'")
            )
            self._reject(
                "invalid_client",
                f"{sent}: the token endpoint takes the client's id and secret by HTTP Basic "
                "(or in the form), not a token",
            )
        if form_secret is not None:
            self._reject(
                "invalid_request",
                "two client authentication methods: HTTP Basic and client_secret in the form; "
                "RFC 6749 2.3 allows one per request: drop client_secret from the form",
            )
        try:
            decoded = base64.b64decode(rest.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            self._reject(
                "invalid_client",
                "the Basic credentials are not Base64 of UTF-8 text: send "
                "base64(form-encoded id + ':' + form-encoded secret)",
            )
        raw_id, colon, raw = decoded.partition(":")
        if not colon or not raw_id or not raw:
            self._reject(
                "invalid_client",
                "the Basic credentials are not 'id:secret' (a ':' between two non-empty "
                "parts, each form-encoded)",
            )
        client_id, secret = unquote_plus(raw_id), unquote_plus(raw)
        if form_id is not None and form_id != client_id:
            self._reject(
                "invalid_request",
                "client_id in the form names another client than the Basic header",
                client_id,
            )
        return client_id, secret, raw

    def _authenticate(
        self, client_id: str, secret: str, raw: str | None, kind: ClientKind
    ) -> OAuthClient:
        client = self.clients.get(client_id)
        if client is None:
            self._reject("invalid_client", self._unknown_client(client_id))
        problem = self._secret_problem(client, secret, raw, kind)
        if problem:
            self._reject("invalid_client", f"client {client_id!r}: {problem}", client_id)
        revoked = self._revoked.get(client_id)
        if revoked is not None:
            self._reject(
                "invalid_grant",
                f"client {client_id!r} was revoked at {self.service.timeline.offset(revoked)} "
                "(mgmt_server.revoke_client): its credentials grant no more tokens",
                client_id,
            )
        if not client.scopes:
            self._reject(
                "unauthorized_client",
                f"client {client_id!r} has no scopes: it may not use the client credentials "
                "grant (add_client(scopes=[...]))",
                client_id,
            )
        return client

    def _secret_problem(
        self, client: OAuthClient, secret: str, raw: str | None, kind: ClientKind
    ) -> str:
        expected = client.client_secret
        if secret == expected:
            return ""
        for old, when in reversed(self._rotated.get(client.client_id, [])):
            if old in (secret, raw):
                return (
                    f"this is the client's old secret ({fingerprint(old)}), replaced at "
                    f"{self.service.timeline.offset(when)} by rotation: use the current one"
                )
        now = self.service.now()
        recent = self._diagnosed.setdefault(client.client_id, deque())
        while recent and recent[0] <= now - DIAGNOSIS_WINDOW:
            recent.popleft()
        if len(recent) >= DIAGNOSIS_BUDGET:
            return paused_diagnosis("client secret", DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW)
        recent.append(now)
        if raw == expected:
            return (
                "the client secret went into the Basic header without form-encoding: RFC "
                "6749 2.3.1 has the id and secret form-encoded before they are joined with "
                "':' and Base64-encoded, so its '+' arrived as a space and its '%XX' were "
                f"decoded. {_ENCODE_FOR_BASIC.get(kind, _ENCODE_FOR_BASIC[ClientKind.OTHER])}"
            )
        if raw is not None and unquote(secret) == expected:
            return "the client secret was form-encoded twice: encode it once"
        return diagnose_secret("client secret", expected, secret, kind)

    def _granted(self, client: OAuthClient, asked: str | None) -> tuple[str, ...]:
        """The scopes to grant: those asked for (each covered by the client's), else
        all the client's."""
        if asked is None:
            return client.scopes
        wanted = tuple(dict.fromkeys(asked.split(" ")))
        if not asked.strip() or "" in wanted:
            self._reject(
                "invalid_scope",
                "scope is empty or has an extra space: list scopes separated by one space, "
                "or leave scope out to get all the client's",
                client.client_id,
            )
        for scope in wanted:
            try:
                parse_scope(scope)
            except ValueError as exc:
                self._reject("invalid_scope", str(exc), client.client_id)
            if not any(covers(mine, scope) for mine in client.scopes):
                self._reject(
                    "invalid_scope",
                    f"client {client.client_id!r} may not get the scope {scope!r}; its scopes: "
                    f"{' '.join(client.scopes)}",
                    client.client_id,
                )
        return wanted

    # -- API calls -------------------------------------------------------------------

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
        if required is None or any(covers(mine, required) for mine in record.scopes):
            return
        client = self.clients.get(record.username)
        if client is not None and any(covers(mine, required) for mine in client.scopes):
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
        challenge = "Bearer" if error is None else f'Bearer error="{error}"'
        if scope is not None:
            challenge += f', scope="{_rfc_text(scope)}"'
        body: dict[str, object] = {"error_description": _rfc_text(reason)}
        if error is not None:
            body = {"error": error, **body}
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
