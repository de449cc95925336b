"""OAuth 2.0 client credentials of the developer portal (RFC 6749 section 4.4), as its
pages publish them (repository Tealium/docs-site, ``administration/early-access/
developer-portal/``): ``POST /oauth/token`` (option ``oauth_token_path``) at
``api.tealiumapis.com`` with a client's id and secret -> an RS256 JWT access token that
carries scopes, sent as ``Authorization: Bearer <token>``. The scope language is
``oauth_scopes.py``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import difflib
import re
import string
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol
from urllib.parse import parse_qsl, quote_plus, unquote, unquote_plus

from ..accounts import fingerprint, random_choices, random_hex
from ..events import AuthRejected, ClientRevoked, SecretRotated
from ..options import OAUTH_TOKEN_PATH
from ..records import AUTH_FAILED, DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW, FORBIDDEN, Refusal
from ..secret_text import ClientKind, diagnose_secret, paused_diagnosis
from ..timeline import to_datetime
from .base import ACCOUNT_PROFILE_NAMES, Answer, ClientFlow, Endpoint, Incoming, Sets
from .bearer import BearerFlow, BearerToken
from .oauth_scopes import (
    DEFAULT_SCOPE,
    covers,
    default_scope,
    granted_scopes,
    parse_scope,
    quoted,
    required_scope,
)

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable, Iterator, Mapping

    from ..credentials import Call
    from ..options import Options
    from ..records import TokenRecord
    from ..service import AuthService


# -- clients and what they send ------------------------------------------------------

#: The gateway host of the portal's pages: the token endpoint and every API call.
HOST = "api.tealiumapis.com"
#: Generated secrets: letters and digits, like the pages' example (``s3cr3tk3y``), so that
#: raw HTTP Basic (``curl -u``) and RFC 6749 2.3.1's form-encoding send the same bytes.
SECRET_ALPHABET, SECRET_LENGTH = string.ascii_letters + string.digits, 48


def generate_client_secret() -> str:
    return "".join(random_choices(SECRET_ALPHABET, SECRET_LENGTH))


def client_secrets(client_id: str, secret: str) -> tuple[str, ...]:
    """``secret`` and the Basic credentials that carry it (form-encoded first, or not),
    all held as secrets, so that a logged ``Authorization`` header is masked too."""
    pairs = ((quote_plus(client_id), quote_plus(secret)), (client_id, secret))
    return (secret, *(base64.b64encode(f"{i}:{s}".encode()).decode() for i, s in pairs))


@dataclasses.dataclass(frozen=True)
class OAuthClient:
    """An OAuth client of the developer portal (``mgmt_server.add_client``, the
    ``mgmt_oauth_client`` fixture), a frozen dataclass. Its ``repr`` shows the secret's
    fingerprint, never the secret."""

    client_id: str
    """The id the client sends (HTTP Basic user, or ``client_id``). Generated:
    ``client<N>-<8 hex digits>``, ``N`` counting clients in the test."""
    client_secret: str = dataclasses.field(repr=False)
    """The secret it sends. Generated: 48 letters and digits, the alphabet of the
    portal's secrets (``curl -u`` sends it as it is); choose one with ``+ & = % /``
    (``add_client(client_secret=...)``) to check that a client form-encodes it."""
    scopes: tuple[str, ...] = ()
    """The tuple of scopes it may get tokens for. Generated:
    ``("acme:main:tiq:2026-07:profiles:manage",)``."""

    def __repr__(self) -> str:
        # Secrets never appear whole in output users paste into bug reports.
        return (
            f"OAuthClient(client_id={self.client_id!r}, "
            f"client_secret={fingerprint(self.client_secret)}, scopes={list(self.scopes)})"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


# -- the token request -------------------------------------------------------------


class Reject(Protocol):
    """Refuses a token request with an RFC 6749 5.2 error (the flow records it)."""

    def __call__(self, error: str, reason: str, client_id: str | None = None) -> NoReturn: ...


GRANT_TYPE = "client_credentials"

NO_STORE = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))

BASIC_CHALLENGE = (("WWW-Authenticate", f'Basic realm="{HOST}", charset="UTF-8"'),)

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


def rfc_text(text: str) -> str:
    """``text`` in the characters RFC 6749 allows in ``error_description``."""
    text = text.replace('"', "'").replace("\\", "/")
    return "".join(c if c.isascii() and c.isprintable() else "?" for c in text)


def token_form(incoming: Incoming, reject: Reject) -> dict[str, str]:
    """The request's parameters (RFC 6749 4.4.2: a form body, each parameter once;
    unknown ones ignored, RFC 6749 3.1, but kept for a grant type's handler), with a
    ``grant_type`` that has a handler (:data:`GRANTS`)."""
    in_query = [name for name, _ in incoming.query if name in _PARAMS]
    if "client_secret" in in_query:
        reject(
            "invalid_request",
            "the client secret arrived in the URL's query string, which proxies and "
            "logs keep: send it in the form body or by HTTP Basic, and rotate it",
        )
    if in_query:
        reject(
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
        reject("invalid_request", f"the body is empty: {wanted}")
    if mimetype != "application/x-www-form-urlencoded" or text.lstrip()[:1] in ("{", "["):
        sent = "JSON" if "json" in mimetype or text.lstrip()[:1] in ("{", "[") else None
        what = sent or f"Content-Type {quoted(incoming.content_type or 'none')}"
        reject(
            "invalid_request",
            f"this request sent {what}: {wanted} (requests and httpx: data={{...}}, not "
            "json={...})",
        )
    try:
        pairs = parse_qsl(incoming.body.decode("ascii"), keep_blank_values=True, errors="strict")
    except UnicodeError:
        reject(
            "invalid_request",
            "the body is not ASCII, or a '%XX' escape in it is not UTF-8: percent-encode "
            "every value of the form (a raw '%' must travel as %25)",
        )
    names = [name for name, _ in pairs]
    for name in _PARAMS:
        if names.count(name) > 1:
            reject(
                "invalid_request",
                f"{name} appears {names.count(name)} times: send each parameter once "
                "(RFC 6749 3.2)",
            )
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    grant = form.get("grant_type")
    if grant is None or grant == "":
        reject("invalid_request", f"grant_type is missing or empty: {wanted}")
    if grant not in GRANTS:
        why = _OTHER_GRANTS.get(grant, "this endpoint grants only client credentials")
        if len(GRANTS) > 1:
            why = f"this endpoint grants {', '.join(GRANTS)}"
        reject(
            "unsupported_grant_type",
            f"grant_type {quoted(grant)} is not supported ({why}): send "
            "grant_type=client_credentials",
        )
    return form


def client_credentials(
    incoming: Incoming, form: dict[str, str], reject: Reject
) -> tuple[str, str, str | None]:
    """``(client_id, secret, raw)``: ``raw`` is the secret as it stood in the Basic
    header before form-decoding (``None`` for credentials in the form)."""
    values = [v.strip() for joined in incoming.authorization for v in joined.split(",")]
    form_id, form_secret = form.get("client_id"), form.get("client_secret")
    # Another scheme's parameters hold commas (Digest username="a", realm="b"): its
    # scheme is the refusal, not a count of values split at them.
    first = incoming.authorization[0].strip() if incoming.authorization else ""
    if first and first.partition(" ")[0].lower() != "basic":
        values = [first]
    if len(values) > 1:
        reject("invalid_request", f"{len(values)} Authorization values: send one")
    if not values:
        if form_id is None and form_secret is None:
            reject(
                "invalid_client",
                "no client authentication: send the client id and secret by HTTP Basic "
                "(each form-encoded, RFC 6749 2.3.1) or as client_id and client_secret "
                "in the form",
            )
        if not form_id:
            reject("invalid_request", "client_secret without client_id in the form")
        if not form_secret:
            reject(
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
        reject(
            "invalid_client",
            f"{sent}: the token endpoint takes the client's id and secret by HTTP Basic "
            "(or in the form), not a token",
        )
    if form_secret is not None:
        reject(
            "invalid_request",
            "two client authentication methods: HTTP Basic and client_secret in the form; "
            "RFC 6749 2.3 allows one per request: drop client_secret from the form",
        )
    try:
        decoded = base64.b64decode(rest.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        reject(
            "invalid_client",
            "the Basic credentials are not Base64 of UTF-8 text: send "
            "base64(form-encoded id + ':' + form-encoded secret)",
        )
    raw_id, colon, raw = decoded.partition(":")
    if not colon or not raw_id or not raw:
        reject(
            "invalid_client",
            "the Basic credentials are not 'id:secret' (a ':' between two non-empty "
            "parts, each form-encoded)",
        )
    client_id, secret = unquote_plus(raw_id), unquote_plus(raw)
    if form_id is not None and form_id != client_id:
        reject(
            "invalid_request",
            "client_id in the form names another client than the Basic header",
            client_id,
        )
    return client_id, secret, raw


# -- grant types ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TokenRequest:
    """A token request whose client authenticated (the secret, not revoked, not
    throttled), handed to the handler of its ``grant_type``. The handler refuses it with
    :meth:`reject` or answers it, usually with :meth:`access_token`; it runs without the
    service's lock (take :attr:`lock` around a state it reads and changes)."""

    flow: OAuthFlow
    client: OAuthClient
    #: The form's parameters (each first value), ``grant_type`` among them.
    form: Mapping[str, str]
    incoming: Incoming
    #: When it arrived, on the service's clock.
    now: float
    #: What the grant handlers keep in this test: one dict for every grant type (a
    #: refresh token one handler issues, another redeems), empty at the test's start.
    state: dict[str, Any]

    @property
    def grant_type(self) -> str:
        return self.form["grant_type"]

    @property
    def lock(self) -> threading.RLock:
        """The service's lock: hold it while reading and changing ``state``."""
        return self.flow.service.mutex

    def reject(self, error: str, reason: str) -> NoReturn:
        """Refuse with an RFC 6749 5.2 error (``invalid_grant``...; ``invalid_client``
        is a 401), recorded like every refused token request."""
        self.flow.reject(error, reason, self.client.client_id)

    def scopes(self, asked: str | None = None) -> tuple[str, ...]:
        """The scopes the client gets for ``asked`` (the form's ``scope`` by default; none
        named: all the client's), as for client credentials."""
        wanted = self.form.get("scope") if asked is None else asked
        with self.lock:
            return granted_scopes(self.client, wanted, self.flow.reject, self.flow.service.options)

    def hold_secret(self, value: str) -> None:
        """Mask ``value`` (a refresh token) in the timeline, events and request log."""
        self.flow.service.timeline.hold_secrets(value)

    def access_token(
        self, scopes: tuple[str, ...] | None = None, *, extra: Mapping[str, object] | None = None
    ) -> Answer:
        """Issue an access token for ``scopes`` (:meth:`scopes` by default) through the
        grant rule (counted, judged for churn, throttled, masked), and the token
        endpoint's answer: ``access_token``, ``token_type``, ``expires_in``, ``scope``,
        then ``extra``'s fields."""
        granted = self.scopes() if scopes is None else scopes
        options, client_id = self.flow.service.options, self.client.client_id
        token, _ = self.flow.issue_token(  # signs outside the lock
            client_id,
            self.now,
            arrived=self.incoming.arrived,
            scopes=granted,
            ttl=options.oauth_token_ttl,
            extra={"scope": " ".join(granted), "client_id": client_id},
        )
        body: dict[str, object] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": int(options.oauth_token_ttl),
            "scope": " ".join(granted),
            **(extra or {}),
        }
        return Answer(body, headers=NO_STORE)


#: What answers a token request of one grant type.
GrantHandler = Callable[[TokenRequest], Answer]


def client_credentials_grant(request: TokenRequest) -> Answer:
    """The built-in handler of ``grant_type=client_credentials``: an access token for the
    scopes asked (a handler that replaces it may call it and add to its answer)."""
    return request.access_token()


#: The token endpoint's grant types and their handlers (mock-oauth2-server's
#: ``grantHandlers``): client credentials, and what :func:`register_grant` adds.
GRANTS: dict[str, GrantHandler] = {GRANT_TYPE: client_credentials_grant}


def register_grant(grant_type: str, handler: GrantHandler) -> None:
    """The OAuth token endpoint answers ``grant_type`` with ``handler`` from now on;
    ValueError if it has a handler already (replace one for a while with
    :func:`registered_grant`)."""
    if not isinstance(grant_type, str) or not grant_type or not grant_type.isprintable():
        raise ValueError(f"register_grant: a grant_type is a non-empty str, got {grant_type!r}")
    if not callable(handler):
        raise TypeError(f"register_grant({grant_type!r}, ...): the handler must be callable")
    if grant_type in GRANTS:
        raise ValueError(
            f"register_grant: grant_type {grant_type!r} has a handler already; replace it "
            "for a while with registered_grant(...)"
        )
    GRANTS[grant_type] = handler


def unregister_grant(grant_type: str) -> None:
    """Remove a grant type :func:`register_grant` added; ValueError for an unknown one or
    client credentials."""
    if grant_type == GRANT_TYPE or grant_type not in GRANTS:
        raise ValueError(f"unregister_grant: no added grant_type {grant_type!r}")
    del GRANTS[grant_type]


@contextlib.contextmanager
def registered_grant(grant_type: str, handler: GrantHandler) -> Iterator[None]:
    """``handler`` answers ``grant_type`` inside the ``with`` block, in place of the one
    it had if any (``client_credentials``: :func:`client_credentials_grant`), which
    answers it again after."""
    before = GRANTS.pop(grant_type, None)
    try:
        register_grant(grant_type, handler)  # checks it, in place of ``before``
        yield
    finally:
        GRANTS.pop(grant_type, None)
        if before is not None:
            GRANTS[grant_type] = before


# -- the flow -------------------------------------------------------------------------

#: The statuses of the token endpoint (RFC 6749 5.1, 5.2; 429 when throttled).
STATUSES = (200, 400, 401, 405, 429)


#: What each page says a DELETE needs (behaviour choice P1, option ``oauth_delete_action``).
_DELETE_READINGS = {
    "write": 'dev-portal-authentication says "write for POST, PUT, and DELETE requests"',
    "delete": "dev-portal-scopes lists delete as an action of its own",
}


def _delete_readings(
    options: Options, required: str | tuple[str | None, ...], scopes: Iterable[str]
) -> str:
    """The end of a DELETE's 403 reason: the pages disagree on the action it needs; which
    this fake follows, the other reading, and the client's scope it would accept."""
    followed = options.oauth_delete_action
    other = "delete" if followed == "write" else "write"
    granted = ""
    if isinstance(required, tuple) and len(required) in (6, 7):
        wanted = (*required[:-1], other)
        manage = options.oauth_manage_covers
        mine = [s for s in scopes if covers(s, wanted, manage_covers=manage)]
        granted = f", which the client was granted ({mine[0]!r})" if mine else ""
    return (
        f"; the pages disagree on DELETE: {_DELETE_READINGS[followed]}, which this fake "
        f"follows (oauth_delete_action={followed!r}), while {_DELETE_READINGS[other]}"
        f"{granted}: the option oauth_delete_action={other!r} requires {other} instead"
    )


class OAuthFlow(BearerFlow, ClientFlow[OAuthClient]):
    name = "oauth"
    title = "the OAuth 2.0 token endpoint"
    path_title = "OAuth token endpoint"
    grants_phrase = "OAuth access tokens"
    secret = "client secret"
    answer_field = "access_token"
    auth_hosts = (HOST,)
    api_hosts = (HOST,)
    takes_scope = True
    principal = "OAuth client"
    token_word = "access_token"
    algorithm = "RS256"  # dev-portal-authentication: "JWT signed with RS256"
    endpoints = (Endpoint("token", OAUTH_TOKEN_PATH, statuses=STATUSES),)
    #: RFC 6749 5.1's refresh token and OpenID Connect's id token: none is granted here,
    #: but a service that hands one out has it masked and shaped.
    secret_keys = ("refresh_token", "id_token")
    code_keys = ("error", "token_type", "expires_in")
    #: The portal's calendar-versioned API paths: /v{YYYY-MM}/{apiFamily}/...
    path_names = (*ACCOUNT_PROFILE_NAMES, r"/(?P<version>v\d{4}-\d{2})(?=/|$)")
    #: Its versioned API calls, and anything under /oauth (a token path of another
    #: ``oauth_token_path``).
    api_paths = (r"/v\d{4}-\d{2}/", "/oauth")
    sets = (
        Sets("oauth_token_ttl", "body.expires_in"),
        Sets("oauth_token_ttl", "body.access_token.jwt.lifetime"),
        Sets("oauth_token_path", "path"),
    )

    def __init__(self, service: AuthService) -> None:
        super().__init__(service)
        self.clients: dict[str, OAuthClient] = {}
        self._rotated: dict[str, list[tuple[str, float]]] = {}
        self._revoked: dict[str, float] = {}
        self._diagnosed: dict[str, deque[float]] = {}
        #: What the grant handlers keep in this test (:attr:`TokenRequest.state`).
        self._grant_state: dict[str, Any] = {}

    @classmethod
    def endpoints_for(cls, options: Options) -> tuple[Endpoint, ...]:
        return (Endpoint("token", options.oauth_token_path, statuses=STATUSES),)

    @classmethod
    def origin(cls, record: TokenRecord) -> str:
        return f"from the token endpoint, for {' '.join(record.scopes) or 'no scope'}"

    @classmethod
    def churn_margin(cls, options: Options) -> float:
        """Its own margin: a part of ``oauth_token_ttl``, as ``refresh_margin`` is of
        ``token_ttl``."""
        return options.oauth_margin()

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
        """What ``route()`` takes for an OAuth route: a scope (its ``{placeholders}``
        stand for names), never a permission."""
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
        """A refusal in the service's shape (throttling, a scripted fault, bad input) as
        an RFC 6749 error."""
        if refusal.body is not None:
            return refusal
        status = refusal.status
        # 501 is the client's doing (a transfer coding the fake does not implement).
        error = {401: "invalid_client", 429: "temporarily_unavailable", 500: "server_error"}.get(
            status, "temporarily_unavailable" if status > 501 else "invalid_request"
        )
        return refusal.shaped(
            {"error": error, "error_description": rfc_text(refusal.reason)},
            NO_STORE + (BASIC_CHALLENGE if status == 401 else ()),
        )

    def principals(self) -> list[str]:
        return list(self.clients)

    @classmethod
    def check_client_scopes(
        cls, scopes: object, *, what: str, profile_wildcard: bool = True
    ) -> tuple[str, ...]:
        """A list of scopes as given to ``add_client``: checked, duplicates dropped."""
        if isinstance(scopes, str):
            raise TypeError(f"{what} takes a list of scopes, not a str; did you mean [{scopes!r}]?")
        try:
            items = list(scopes)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(f"{what} takes a list of scope strings, got {scopes!r}") from None
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"{what}: a scope is a str like {DEFAULT_SCOPE!r}, got {item!r}")
            try:
                parse_scope(item, profile_wildcard=profile_wildcard)
            except ValueError as exc:
                raise ValueError(f"{what}: {exc}") from None
        return tuple(dict.fromkeys(items))

    # -- clients -------------------------------------------------------------------

    @classmethod
    def live_client(
        cls, client_id: str, client_secret: str, account: str, profile: str
    ) -> OAuthClient:
        return OAuthClient(client_id, client_secret, (default_scope(account, profile),))

    def add_client(
        self,
        scopes: Iterable[str] | None = None,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> OAuthClient:
        """A new client; its id and secret are generated unless given (the secret of
        letters and digits, as the portal's)."""
        scopes = self.check_client_scopes(
            [DEFAULT_SCOPE] if scopes is None else scopes,
            what="add_client",
            profile_wildcard=self.service.options.oauth_profile_wildcard,
        )
        for what, value in (("client_id", client_id), ("client_secret", client_secret)):
            if value is not None and (not isinstance(value, str) or not value.isprintable()):
                # A secret is never echoed, not even a wrong one.
                got = repr(value) if what == "client_id" else f"a {type(value).__name__}"
                raise ValueError(f"add_client({what}=...) must be a printable str, got {got}")
            if value == "":
                raise ValueError(f"add_client({what}=...) must not be empty")
        with self.service.mutex:
            if client_id is None:
                client_id = f"client{len(self.clients) + 1}-{random_hex(4)}"
            if client_id in self.clients:
                raise ValueError(f"add_client: a client {client_id!r} exists already in this test")
            client = OAuthClient(client_id, client_secret or generate_client_secret(), scopes)
            self.clients[client_id] = client
            self.service.timeline.hold_secrets(*client_secrets(client_id, client.client_secret))
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
            new_secret = new_secret or generate_client_secret()
            if new_secret == client.client_secret:
                raise ValueError("the new client secret is the client's current one")
            rotated = dataclasses.replace(client, client_secret=new_secret)
            self.clients[client_id] = rotated
            self.service.timeline.hold_secrets(*client_secrets(client_id, new_secret))
            now = self.service.timeline.now()
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
            now = self.service.timeline.now()
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
        return self.service.timeline.redact(f"no OAuth client {quoted(client_id)} exists{hint}")

    # -- the token endpoint ----------------------------------------------------------

    def reject(self, error: str, reason: str, client_id: str | None = None) -> NoReturn:
        """Refuse a token request with an RFC 6749 5.2 error (invalid_client: 401)."""
        status = 401 if error == "invalid_client" else 400
        timeline = self.service.timeline
        username = client_id if client_id in self.clients else None
        event = self.rejected(timeline.now(), username, status, reason)
        assert isinstance(event, AuthRejected)  # with the RFC 6749 error code
        timeline.refuse(
            dataclasses.replace(event, error=error),
            status,
            reason,
            status=status,
            body={"error": error, "error_description": rfc_text(reason)},
            headers=NO_STORE + (BASIC_CHALLENGE if status == 401 else ()),
        )

    def answer_token(self, incoming: Incoming) -> Answer:
        with self.service.mutex:
            form = token_form(incoming, self.reject)
            client_id, secret, raw = client_credentials(incoming, form, self.reject)
            client = self._authenticate(client_id, secret, raw, incoming.client)
            now = self.service.timeline.now()
            self.service.credentials.check_throttle(self, client.client_id, now)
        request = TokenRequest(self, client, form, incoming, now, self._grant_state)
        return GRANTS[form["grant_type"]](request)

    def _authenticate(
        self, client_id: str, secret: str, raw: str | None, kind: ClientKind
    ) -> OAuthClient:
        client = self.clients.get(client_id)
        if client is None:
            self.reject("invalid_client", self._unknown_client(client_id))
        problem = self._secret_problem(client, secret, raw, kind)
        if problem:
            self.reject("invalid_client", f"client {client_id!r}: {problem}", client_id)
        revoked = self._revoked.get(client_id)
        if revoked is not None:
            self.reject(
                "invalid_grant",
                f"client {client_id!r} was revoked at {self.service.timeline.offset(revoked)} "
                "(mgmt_server.revoke_client): its credentials grant no more tokens",
                client_id,
            )
        if not client.scopes:
            self.reject(
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
        now = self.service.timeline.now()
        recent = self._diagnosed.setdefault(client.client_id, deque())
        while recent and recent[0] <= now - DIAGNOSIS_WINDOW:
            recent.popleft()
        if len(recent) >= DIAGNOSIS_BUDGET:
            return paused_diagnosis("client secret", DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW)
        recent.append(now)
        if raw == expected:  # the fix in the idiom of the client that sent it
            return (
                "the client secret went into the Basic header without form-encoding: RFC "
                "6749 2.3.1 has the id and secret form-encoded before they are joined with "
                "':' and Base64-encoded, so its '+' arrived as a space and its '%XX' were "
                f"decoded. {_ENCODE_FOR_BASIC.get(kind, _ENCODE_FOR_BASIC[ClientKind.OTHER])}"
            )
        if raw is not None and unquote(secret) == expected:
            return "the client secret was form-encoded twice: encode it once"
        return diagnose_secret("client secret", expected, secret, kind)

    # -- API calls, as the developer portal's gateway checks them ----------------------

    @classmethod
    def fix_refused(cls) -> str:
        return "an access token of the token endpoint with the scope the call needs"

    def _refuse_unread(self, call: Call, presented: BearerToken) -> NoReturn:
        if presented.missing:  # no header, or another scheme (RFC 6750 3.1: no error code)
            self.refuse_call(
                call,
                None,
                None,
                presented.problem
                or "no Authorization header: send 'Authorization: Bearer <access_token>' with "
                "the access_token of the token endpoint's answer",
                error=None,
                wrong=True,
            )
        if presented.problem is None:
            super()._refuse_unread(call, presented)
        token = presented.token
        owner, label = self._attribute_token(token) if token else (None, None)
        self.refuse_call(
            call, owner, label, presented.problem, error="invalid_request", status=400, wrong=True
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
            derived = required_scope(call.method, call.normalized, options)
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
        if call.scope is None and call.method.upper() == "DELETE":
            fix += _delete_readings(options, required, client.scopes if client else ())
        self.refuse_call(
            call,
            record.username,
            record.label,
            f"token {record.label} lacks the scope {named} {source}; it has "
            f"{' '.join(record.scopes) or 'none'}: {fix}",
            error="insufficient_scope",
            status=403,
            scope=named,
            # A wrong credential (a finding) only where the client could have asked for
            # one that passes; a scope it may not get is like v2's 1469: the credential
            # was good, the client lacks the right.
            wrong=bool(mine),
            message=f"Token does not contain required scope: {named}",
        )

    def refuse_call(
        self,
        call: Call,
        username: str | None,
        credential: str | None,
        reason: str,
        *,
        expired: bool = False,
        wrong: bool = False,
        error: str | None = "invalid_token",
        status: int = 401,
        scope: str | None = None,
        message: str | None = None,
    ) -> NoReturn:
        """A refusal in the gateway's error envelope, ``{"error", "message"}`` (the
        ``message``, else the ``reason``; dev-portal-authentication), with RFC 6750's
        challenge: no error code without a token, else its error and the scope the call
        needs."""
        challenge = "Bearer" if error is None else f'Bearer error="{error}"'
        if scope is not None:
            challenge += f', scope="{rfc_text(scope)}"'
        body: dict[str, object] = {"message": message or reason}
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
