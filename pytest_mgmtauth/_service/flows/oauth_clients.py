"""The clients of the OAuth flow (``oauth.py``) and what they send: what a client is, the
token request (its form and the client's authentication, RFC 6749 2.3 and 4.4.2) and the
error shapes of RFC 6749 section 5.2 and RFC 6750 section 3. Scopes: ``oauth_scopes.py``."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import secrets
import string
from typing import TYPE_CHECKING, Any, NoReturn, Protocol
from urllib.parse import parse_qsl, quote_plus, unquote_plus

from ..accounts import fingerprint
from ..records import Refusal
from ..secret_text import ClientKind
from .oauth_scopes import DEFAULT_SCOPE, parse_scope, quoted

if TYPE_CHECKING:
    from .base import Incoming

#: The gateway host of the portal's pages: the token endpoint and every API call.
HOST = "api.tealiumapis.com"
#: Generated secrets: letters and digits, like the pages' example (``s3cr3tk3y``), so that
#: raw HTTP Basic (``curl -u``) and RFC 6749 2.3.1's form-encoding send the same bytes.
SECRET_ALPHABET, SECRET_LENGTH = string.ascii_letters + string.digits, 48


def generate_client_secret() -> str:
    return "".join(secrets.choice(SECRET_ALPHABET) for _ in range(SECRET_LENGTH))


def basic_spellings(client_id: str, secret: str) -> tuple[str, ...]:
    """The Basic credentials that carry ``secret`` (form-encoded first, or not): held
    as secrets, so that a logged ``Authorization`` header is masked too."""
    pairs = ((quote_plus(client_id), quote_plus(secret)), (client_id, secret))
    return tuple(base64.b64encode(f"{i}:{s}".encode()).decode() for i, s in pairs)


def check_scopes(scopes: object, *, what: str, profile_wildcard: bool = True) -> tuple[str, ...]:
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


def check_route_scope(permission: str | None, scope: str | None) -> None:
    """What ``route()`` takes for an OAuth route: a scope (its ``{placeholders}`` stand
    for names), never a permission."""
    if permission is not None:
        raise ValueError(
            "route(permission=...): OAuth routes take scope=... (the token's scopes "
            "decide, not an account's permissions)"
        )
    if scope is not None:
        if not isinstance(scope, str):
            raise TypeError(f"route(scope=...) takes one scope str, got {scope!r}")
        parse_scope(re.sub(r"\{\w+\}", "x", scope))


@dataclasses.dataclass(frozen=True)
class OAuthClient:
    """An OAuth client of the developer portal (``mgmt_server.add_client``)."""

    client_id: str
    client_secret: str = dataclasses.field(repr=False)
    scopes: tuple[str, ...] = ()

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


def unencoded_basic(kind: ClientKind) -> str:
    """Why a secret that went into the Basic header without form-encoding is wrong, and
    the fix in the idiom of the client that sent it."""
    return (
        "the client secret went into the Basic header without form-encoding: RFC "
        "6749 2.3.1 has the id and secret form-encoded before they are joined with "
        "':' and Base64-encoded, so its '+' arrived as a space and its '%XX' were "
        f"decoded. {_ENCODE_FOR_BASIC.get(kind, _ENCODE_FOR_BASIC[ClientKind.OTHER])}"
    )


def token_form(incoming: Incoming, reject: Reject) -> dict[str, str]:
    """The request's parameters (RFC 6749 4.4.2: a form body, each parameter once;
    unknown ones ignored, RFC 6749 3.1)."""
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
    form = {name: value for name, value in pairs if name in _PARAMS}
    grant = form.get("grant_type")
    if grant is None or grant == "":
        reject("invalid_request", f"grant_type is missing or empty: {wanted}")
    if grant != GRANT_TYPE:
        why = _OTHER_GRANTS.get(grant, "this endpoint grants only client credentials")
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


def as_rfc6749(refusal: Refusal) -> Refusal:
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
        body={"error": error, "error_description": rfc_text(refusal.reason)},
        headers=NO_STORE + (BASIC_CHALLENGE if status == 401 else ()),
    )


def bearer_error(
    message: str, error: str | None, scope: str | None
) -> tuple[dict[str, object], str]:
    """The body and ``WWW-Authenticate`` challenge of a refused API call: the gateway's
    envelope ``{"error", "message"}`` (dev-portal-authentication) and RFC 6750's
    challenge, no error code without a token, else its error and the scope needed."""
    challenge = "Bearer" if error is None else f'Bearer error="{error}"'
    if scope is not None:
        challenge += f', scope="{rfc_text(scope)}"'
    body: dict[str, object] = {"message": message}
    if error is not None:
        body = {"error": error, **body}
    return body, challenge
