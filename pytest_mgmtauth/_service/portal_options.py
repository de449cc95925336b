"""The options of the developer portal's published pages (repository Tealium/docs-site,
``administration/early-access/developer-portal/``): where two pages disagree, which
reading the fake takes (each a documented choice of docs/oauth.md), and the lifecycle of
API versions (``api_versions.py``) with its teardown check. Declared here and
listed last by ``options.py``, whose :class:`~.options.Options` holds the fields and
calls :func:`check_portal_options`.

Read at every start of pytest with the other declarations: nothing heavy here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .limits import OptionSpec, shown

if TYPE_CHECKING:
    from .options import Options

PORTAL_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "oauth_delete_action",
        "choice",
        "the action a DELETE call's scope needs: 'write' (default, the authentication "
        "page) or 'delete' (the scopes page's action)",
        metavar="write|delete",
        choices=("write", "delete"),
        expected="expected 'write' or 'delete'",
    ),
    OptionSpec(
        "oauth_manage_covers",
        "bool",
        "a 'manage' scope covers read, write and delete too (default true); false: manage "
        "covers manage only",
        off_help="a 'manage' scope covers manage only (default: read, write and delete too)",
    ),
    OptionSpec(
        "oauth_profile_wildcard",
        "bool",
        "accept the authentication page's profile wildcard {account}:*:* (every engine of "
        "every profile) (default true); false: refuse it, as the scopes page has no such form",
        off_help="refuse the profile wildcard {account}:*:* (the scopes page has no such "
        "form; default: accept it, as the authentication page's engine check)",
    ),
    OptionSpec(
        "oauth_scope_request",
        "choice",
        "how a token request names a scope: 'exact' (default: as it was granted, a "
        "wildcard in its wildcard form) or 'covered' (any scope a granted one covers)",
        metavar="exact|covered",
        choices=("exact", "covered"),
        expected="expected 'exact' or 'covered'",
    ),
    OptionSpec(
        "oauth_engine_scopes",
        "choice",
        "a client's engine scopes in its tokens: 'automatic' (default: added to every "
        "token, the scopes page) or 'requested' (only when asked for, the authentication "
        "page)",
        metavar="automatic|requested",
        choices=("automatic", "requested"),
        expected="expected 'automatic' or 'requested'",
    ),
    OptionSpec(
        "oauth_short_paths",
        "bool",
        "an OAuth route on /v{YYYY-MM}/{family}/{resource} (the versioning page's shape, "
        "no /accounts/{a}/profiles/{p}) needs a scope of that API, version, resource and "
        "action in any account and profile (default true); false: only a route's scope=",
        off_help="an OAuth route on /v{YYYY-MM}/{family}/{resource} needs only its scope= "
        "(default: a scope of that API, version, resource and action, any account and "
        "profile)",
    ),
    OptionSpec(
        "api_lifecycle",
        "bool",
        "the lifecycle of /v{YYYY-MM}/ API versions on the simulated clock: Active 24 "
        "months, then End of Support headers for 12, then 410 (default true)",
        off_help="no lifecycle of /v{YYYY-MM}/ API versions: every version stays Active "
        "(an approved contract extension)",
    ),
    OptionSpec(
        "api_successor",
        "text",
        "the successor version End of Support names, like 2026-10 (default: the newest "
        "version of the API the test's routes declare, else the month End of Support began)",
        metavar="YYYY-MM",
    ),
    OptionSpec(
        "api_link_v",
        "bool",
        "the successor Link keeps the v of the URL, </v2026-10/cdp/audiences> (default "
        "true); false: as the lifecycle page's example prints it, </2026-10/...>",
        off_help="write the successor Link as the lifecycle page's example prints it, "
        "</2026-10/cdp/audiences> (default: with the v of the URL)",
    ),
    OptionSpec(
        "sunset_check",
        "choice",
        "calls to API versions in End of Support or at End of Life at teardown: 'warn' "
        "(default, DeprecatedVersionWarning), 'fail' the test, or 'off'",
        metavar="warn|fail|off",
        choices=("warn", "fail", "off"),
        expected="expected 'warn', 'fail' or 'off'",
        test_only=True,
    ),
)

_VERSION = re.compile(r"\d{4}-(0[1-9]|1[0-2])")


def check_portal_options(options: Options) -> None:
    """TypeError/ValueError naming the option whose value is not one it takes."""
    for spec in PORTAL_SPECS:
        value = getattr(options, spec.name)
        if spec.kind == "bool" and not isinstance(value, bool):
            raise TypeError(
                f"mgmtauth option {spec.name!r} must be True or False, got {shown(value)}"
            )
        if spec.kind == "choice" and value not in spec.choices:
            raise ValueError(
                f"mgmtauth option {spec.name!r} must be "
                f"{' or '.join(repr(c) for c in spec.choices)}, got {shown(value)}"
            )
    successor = options.api_successor
    if not isinstance(successor, str) or (successor and not _VERSION.fullmatch(successor)):
        raise ValueError(
            "mgmtauth option 'api_successor' must be a version like '2026-10' (no 'v'), or "
            f"'' to name it automatically, got {shown(successor)}"
        )


def changed_portal_options(options: Options) -> list[str]:
    """``name=value`` of each of these options not at its default (the one line that
    reproduces the options)."""
    return [
        f"{spec.name}={getattr(options, spec.name)}"
        for spec in PORTAL_SPECS
        if getattr(options, spec.name) != spec.default
    ]
