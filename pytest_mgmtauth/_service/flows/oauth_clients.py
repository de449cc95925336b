"""The clients and scopes of the OAuth flow (``oauth.py``): what a client is, the shape
of a scope, and which scope covers which."""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import Any
from urllib.parse import quote_plus

from ..accounts import fingerprint

#: The account and profile of ``mgmt_oauth_client``'s scope (our choice, as in v3's docs).
DEFAULT_ACCOUNT = "acme"

DEFAULT_PROFILE = "main"

DEFAULT_SCOPE = f"{DEFAULT_ACCOUNT}:{DEFAULT_PROFILE}:tiq:2026-07:profiles:manage"

#: The gateway host public code calls (our choice for interception: not published).
HOST = "developer.tealiumapis.com"

SCOPE_SHAPE = "{account}:{profile}:{apiFamily}:{apiVersion}:{resource}:{action}"

#: What each action covers.
ACTIONS = {"read": ("read",), "write": ("write",), "manage": ("manage", "write", "read")}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

_API_VERSION = re.compile(r"\d{4}-(0[1-9]|1[0-2])")


def quoted(text: str) -> str:
    """A value from the client in a message: whole if short and plain, else its size."""
    if len(text) <= 80 and text.isascii() and text.isprintable():
        return repr(text)
    return f"a {len(text)}-character value"


def basic_spellings(client_id: str, secret: str) -> tuple[str, ...]:
    """The Basic credentials that carry ``secret`` (form-encoded first, or not): held
    as secrets, so that a logged ``Authorization`` header is masked too."""
    pairs = ((quote_plus(client_id), quote_plus(secret)), (client_id, secret))
    return tuple(base64.b64encode(f"{i}:{s}".encode()).decode() for i, s in pairs)


def parse_scope(scope: str) -> tuple[str, ...]:
    """The six parts of a scope; ValueError saying what is wrong with it."""
    parts = scope.split(":")
    if len(parts) != 6:
        raise ValueError(
            f"the scope {quoted(scope)} has {len(parts)} part(s); a scope has 6: "
            f"{SCOPE_SHAPE} (e.g. {DEFAULT_SCOPE!r})"
        )
    account, profile, family, version, resource, action = parts
    for what, value in (("account", account), ("apiFamily", family), ("resource", resource)):
        if not _NAME.fullmatch(value):
            raise ValueError(
                f"the scope {quoted(scope)}: its {what} {quoted(value)} is not a name "
                "(letters, digits, '.', '_', '-')"
            )
    if profile != "*" and not _NAME.fullmatch(profile):
        raise ValueError(
            f"the scope {quoted(scope)}: its profile {quoted(profile)} is not a name or '*'"
        )
    if not _API_VERSION.fullmatch(version):
        raise ValueError(
            f"the scope {quoted(scope)}: its apiVersion {quoted(version)} is not a version "
            "like '2026-07'"
        )
    if action not in ACTIONS:
        raise ValueError(
            f"the scope {quoted(scope)}: its action {quoted(action)} is not read, write or manage"
        )
    return tuple(parts)


def covers(granted: str, required: str) -> bool:
    """Whether a token with the scope ``granted`` may do what ``required`` names."""
    g, r = granted.split(":"), required.split(":")
    if len(g) != 6 or len(r) != 6:
        return False
    same = (g[0], g[2], g[3], g[4]) == (r[0], r[2], r[3], r[4])
    return same and g[1] in ("*", r[1]) and r[5] in ACTIONS.get(g[5], ())


def check_scopes(scopes: object, *, what: str) -> tuple[str, ...]:
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
            parse_scope(item)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    return tuple(dict.fromkeys(items))


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
