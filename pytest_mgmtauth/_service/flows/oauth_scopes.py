"""The scopes of the OAuth flow, as the developer portal's pages publish them (repository
Tealium/docs-site, ``administration/early-access/developer-portal/``: dev-portal-scopes
and dev-portal-authentication): their forms, which granted scope covers which required
one, and which scopes a token request may name and the token then carries.

The forms (``*`` in any position matches every value of that position):

- ``{account}:{profile}:{apiFamily}:{apiVersion}:{resource}:{action}``, a resource scope;
- ``{account}:{profile}:{apiFamily}:{apiVersion}:{engineId}``, an engine scope (a single
  trailing ``*``: every engine of the profile);
- ``{account}:{profile}:{apiFamily}:{apiVersion}:{engineId}:{resource}:{action}``, both
  combined;
- ``{account}:*:*``, the authentication page's profile wildcard of the engine check
  (option ``oauth_profile_wildcard``).

And the scope an API call needs when its route declares none, derived from its path and
method as the gateway does ("It matches the request context (account, profile, resource,
and action) against the token's scopes"). Where the pages disagree the options choose
(docs/oauth.md, behaviour choices).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from ..accounts import TEST_PROFILE

if TYPE_CHECKING:
    from ..options import Options
    from .oauth import OAuthClient, Reject

#: The account and profile of ``mgmt_oauth_client``'s scope: the test's.
DEFAULT_ACCOUNT, DEFAULT_PROFILE = TEST_PROFILE


def default_scope(account: str, profile: str) -> str:
    """The scope of ``mgmt_oauth_client`` for ``account`` and ``profile``."""
    return f"{account}:{profile}:tiq:2026-07:profiles:manage"


DEFAULT_SCOPE = default_scope(DEFAULT_ACCOUNT, DEFAULT_PROFILE)

SCOPE_SHAPE = "{account}:{profile}:{apiFamily}:{apiVersion}:{resource}:{action}"
ENGINE_SHAPE = "{account}:{profile}:{apiFamily}:{apiVersion}:{engineId}"
COMBINED_SHAPE = ENGINE_SHAPE + ":{resource}:{action}"
PROFILE_WILDCARD = "{account}:*:*"

#: The actions of dev-portal-scopes ("read, write, delete, manage").
ACTIONS = ("read", "write", "delete", "manage")
WILD = "*"

#: The positions of each form, by its number of parts.
POSITIONS: dict[int, tuple[str, ...]] = {
    3: ("account", "profile", "apiFamily"),
    5: ("account", "profile", "apiFamily", "apiVersion", "engineId"),
    6: ("account", "profile", "apiFamily", "apiVersion", "resource", "action"),
    7: ("account", "profile", "apiFamily", "apiVersion", "engineId", "resource", "action"),
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_API_VERSION = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")


def quoted(text: str) -> str:
    """A value from the client in a message: whole if short and plain, else its size."""
    if len(text) <= 80 and text.isascii() and text.isprintable():
        return repr(text)
    return f"a {len(text)}-character value"


def parse_scope(scope: str, *, profile_wildcard: bool = True) -> tuple[str, ...]:
    """The parts of a scope of one of the forms; ValueError saying what is wrong with
    it. ``profile_wildcard``: whether ``{account}:*:*`` is one (the option)."""
    if "," in scope:  # a list joined the way many APIs join them
        raise ValueError(
            f"the scope {quoted(scope)} holds a comma: scopes are separated by one space "
            "(scope=a b in a token request, RFC 6749 section 3.3), never by commas; "
            "add_client takes them as a list"
        )
    parts = tuple(scope.split(":"))
    names = POSITIONS.get(len(parts))
    if names is None or (len(parts) == 3 and parts[1:] != (WILD, WILD)):
        only = "; the only scope of 3 parts is " + PROFILE_WILDCARD if len(parts) == 3 else ""
        raise ValueError(
            f"the scope {quoted(scope)} has {len(parts)} part(s){only}; a scope has 6: "
            f"{SCOPE_SHAPE} (e.g. {DEFAULT_SCOPE!r}), 5 for an engine ({ENGINE_SHAPE}), 7 "
            f"for both ({COMBINED_SHAPE}), or is {PROFILE_WILDCARD}"
        )
    if len(parts) == 3 and not profile_wildcard:
        raise ValueError(
            f"the scope {quoted(scope)} is the authentication page's profile wildcard "
            f"{PROFILE_WILDCARD}, which the option oauth_profile_wildcard=False refuses "
            "(the scopes page has no form of 3 parts: its single trailing '*' is the "
            "engine wildcard)"
        )
    for what, value in zip(names, parts, strict=True):
        if value == WILD:
            continue
        if what == "apiVersion" and not _API_VERSION.fullmatch(value):
            raise ValueError(
                f"the scope {quoted(scope)}: its apiVersion {quoted(value)} is not a version "
                "like '2026-07' (no 'v', unlike the URL) or '*'"
            )
        if what == "action" and value not in ACTIONS:
            raise ValueError(
                f"the scope {quoted(scope)}: its action {quoted(value)} is not "
                f"{', '.join(ACTIONS[:-1])} or {ACTIONS[-1]} (or '*')"
            )
        if what not in ("apiVersion", "action") and not _NAME.fullmatch(value):
            raise ValueError(
                f"the scope {quoted(scope)}: its {what} {quoted(value)} is not a name "
                "(letters, digits, '.', '_', '-') or '*'"
            )
    return parts


def is_engine_scope(scope: str) -> bool:
    """An engine scope, combined or not, or the profile wildcard: what dev-portal-scopes
    says is "added to your tokens automatically" once engine access is granted."""
    return len(scope.split(":")) in (3, 5, 7)


def covers(
    granted: str, required: str | tuple[str | None, ...], *, manage_covers: bool = True
) -> bool:
    """Whether a token with the scope ``granted`` may do what ``required`` names (its
    parts: ``None`` where the call does not say, which any value matches).

    Position by position the same value or ``*``; ``manage`` covers the other actions
    with ``manage_covers`` (the option ``oauth_manage_covers``). An engine scope covers
    every resource of its engine (the combined form); ``{account}:*:*`` every engine
    scope of the account. A resource scope never covers an engine's: "Account and profile
    access alone is not sufficient for engine-enforced APIs"."""
    g = tuple(granted.split(":"))
    r = tuple(required.split(":")) if isinstance(required, str) else required
    if len(g) == 3:
        return len(r) in (3, 5, 7) and g[1:] == (WILD, WILD) and _same(g[0], r[0])
    if len(g) == 5 and len(r) == 7:
        r = r[:5]
    if len(g) != len(r) or len(g) not in (5, 6, 7):
        return False
    if len(g) == 5:
        return all(_same(a, b) for a, b in zip(g, r, strict=True))
    mine, wanted = g[-1], r[-1]
    action = (
        mine in (WILD, wanted)
        or wanted is None
        or (manage_covers and mine == "manage" and wanted in ACTIONS)
    )
    return action and all(_same(a, b) for a, b in zip(g[:-1], r[:-1], strict=True))


def _same(granted: str, required: str | None) -> bool:
    return granted in (WILD, required) or required is None


def granted_scopes(
    client: OAuthClient, asked: str | None, reject: Reject, options: Options
) -> tuple[str, ...]:
    """The scopes a token request gets: those it names (none named: all the client's),
    each as the option ``oauth_scope_request`` says: ``"exact"``, one of the client's
    scopes as it was granted ("Request the scope exactly as it was granted ... you must
    request the wildcard form"), or ``"covered"``, any scope one of the client's covers;
    then, with ``oauth_engine_scopes="automatic"``, the client's engine scopes ("Engine
    scopes are added to your tokens automatically")."""
    if asked is None:
        return client.scopes
    wanted = tuple(dict.fromkeys(asked.split(" ")))
    who = client.client_id
    if not asked.strip() or "" in wanted:
        reject(
            "invalid_scope",
            "scope is empty or has an extra space: list scopes separated by one space, "
            "or leave scope out to get all the client's",
            who,
        )
    manage = options.oauth_manage_covers
    for scope in wanted:
        try:
            parse_scope(scope, profile_wildcard=options.oauth_profile_wildcard)
        except ValueError as exc:
            reject("invalid_scope", str(exc), who)
        if scope in client.scopes:
            continue
        wider = [mine for mine in client.scopes if covers(mine, scope, manage_covers=manage)]
        if wider and options.oauth_scope_request == "covered":
            continue
        if wider:
            reject(
                "invalid_scope",
                f"client {who!r} was granted {wider[0]!r}, which covers {scope!r}: request "
                "a scope exactly as it was granted, a wildcard in its wildcard form (or set "
                "the option oauth_scope_request='covered' to accept a narrower one)",
                who,
            )
        reject(
            "invalid_scope",
            f"client {who!r} may not get the scope {scope!r}; its scopes: "
            f"{' '.join(client.scopes)}",
            who,
        )
    if options.oauth_engine_scopes == "automatic":
        wanted += tuple(s for s in client.scopes if is_engine_scope(s) and s not in wanted)
    return wanted


# -- the scope of an API call ----------------------------------------------------------

#: ``/v{YYYY-MM}/{apiFamily}/...``: a call of the gateway's calendar-versioned APIs.
#: Any digits (\d) on purpose: a path with other digits than ASCII is no calendar version,
#: yet it still needs a scope (one of version '*'), never none.
_CALL = re.compile(r"^/v(?P<version>\d{4}-(?:0[1-9]|1[0-2]))/(?P<family>[^/]+)/(?P<rest>.+)$")
#: ``accounts/{account}/profiles/{profile}/...`` after the family (dev-portal-authentication).
_CONTEXT = re.compile(r"^accounts/(?P<account>[^/]+)/profiles/(?P<profile>[^/]+)/?(?P<rest>.*)$")
#: ``engines/{engineId}/...``: an engine-enforced API ("/engines/{engineId}/...").
_ENGINE = re.compile(r"^engines/(?P<engine>[^/]+)/?(?P<rest>.*)$")

#: "read for GET requests, write for POST, PUT, and DELETE requests" (DELETE: the option
#: ``oauth_delete_action``); HEAD and OPTIONS read, PATCH writes.
_METHOD_ACTIONS = {"GET": "read", "HEAD": "read", "OPTIONS": "read"}


@dataclasses.dataclass(frozen=True)
class Required:
    """The scope a call needs, derived from its path and method: its ``parts`` (``None``
    where the path does not say, which any value matches) and ``named``, the scope a 403
    names ("Token does not contain required scope: <named>"): the engine scope of an
    engine-enforced call."""

    parts: tuple[str | None, ...]
    named: str
    #: How it was derived, for a refusal's reason.
    source: str


def required_scope(method: str, path: str, options: Options) -> Required | None:
    """The scope a call of ``/v{YYYY-MM}/{apiFamily}/accounts/{account}/profiles/{profile}/
    {resource}...`` needs (``.../engines/{engineId}/{resource}...`` an engine's too), or of
    ``/v{YYYY-MM}/{apiFamily}/{resource}...`` (the versioning page's shape: any account and
    profile; option ``oauth_short_paths``); ``None`` for a path of neither shape."""
    found = _CALL.match(path)
    if found is None:
        return None
    version, family = found["version"], found["family"]
    action = _METHOD_ACTIONS.get(method.upper(), "write")
    if method.upper() == "DELETE":
        action = options.oauth_delete_action
    how = f"{method.upper()} {path}: version {version}, API {family!r}, action {action}"
    context = _CONTEXT.match(found["rest"])
    if context is None:
        resource = found["rest"].split("/", 1)[0]
        if not options.oauth_short_paths or not resource:
            return None
        named = f"{{account}}:{{profile}}:{family}:{version}:{resource}:{action}"
        return Required((None, None, family, version, resource, action), named, how)
    account, profile, rest = context["account"], context["profile"], context["rest"]
    engine = _ENGINE.match(rest)
    if engine is None:
        resource = rest.split("/", 1)[0]
        if not resource:
            return None
        parts = (account, profile, family, version, resource, action)
        return Required(parts, ":".join(parts), how)
    engine_scope = (account, profile, family, version, engine["engine"])
    resource = engine["rest"].split("/", 1)[0]
    on_engine = engine_scope + ((resource, action) if resource else ())
    return Required(on_engine, ":".join(engine_scope), how + f", engine {engine['engine']!r}")
