"""v3 auth: the account and profile a token is bound to, read from URL paths.

v3 grants a token at ``POST /v3/auth/accounts/{account}/profiles/{profile}``; the calls
it is good for carry the same ``/accounts/{account}/profiles/{profile}`` segments in
their paths (``/v3/customers/accounts/acme/profiles/main/...``). Pure Python.
"""

from __future__ import annotations

import re

V3_AUTH_PREFIX = "/v3/auth/"
V3_AUTH_TEMPLATE = "/v3/auth/accounts/{account}/profiles/{profile}"
_AUTH_PATH = re.compile(r"^/v3/auth/accounts/(?P<account>[^/]+)/profiles/(?P<profile>[^/]+)/?$")
_SCOPE = re.compile(r"/accounts/(?P<account>[^/]+)(?:/profiles/(?P<profile>[^/]+))?")


def auth_path_scope(path: str) -> tuple[str, str] | None:
    """``(account, profile)`` of a v3 auth path, or ``None`` if it is not one."""
    match = _AUTH_PATH.match(path)
    if match is None:
        return None
    return match["account"], match["profile"]


def call_scope(path: str) -> tuple[str | None, str | None]:
    """The account and profile a v3 call's path names (``None`` where it names none)."""
    match = _SCOPE.search(path)
    if match is None:
        return None, None
    return match["account"], match["profile"]


def auth_path(account: str, profile: str) -> str:
    return V3_AUTH_TEMPLATE.format(account=account, profile=profile)


def wrong_auth_path(path: str) -> str:
    """Why ``path`` under ``/v3/auth/`` is no v3 auth endpoint, and the right shape."""
    return (
        f"{path} is not a v3 auth endpoint: v3 authenticates at POST "
        f"{V3_AUTH_TEMPLATE} (both names non-empty, no further segments)"
    )
