"""The options of the fake service: one frozen, keyword-only object, and the declaration
of each (:data:`OPTION_SPECS`).

The marker's kwargs are this class's kwargs, so a typo is an error that names the known
options (see :func:`build_options`). Durations are seconds; a ``timedelta`` is accepted
too. How a declaration is parsed and checked is here too (:class:`OptionSpec`, the
checks of host names and paths); the limits of every number are ``limits.py``'s.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import timedelta

from .limits import (
    MAX_COUNT,
    MAX_DURATION,
    check_count,
    check_seconds,
    describe_range,
    shown,
)

# -- options: how one is declared, parsed and checked -------------------------------

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_HOST_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})+$")


def is_host_name(value: object) -> bool:
    """A DNS name of two labels or more, lower case, without scheme, port or path, whose
    last label is not all digits (no top-level domain is, RFC 3696 section 2: such a
    name is an IPv4 address to a resolver)."""
    return (
        isinstance(value, str)
        and len(value) <= 253
        and bool(_HOST_NAME.match(value))
        and not value.rpartition(".")[2].isdigit()
    )


def check_path(name: str, path: object) -> None:
    """A path option: an absolute path without query, fragment or spaces, outside the
    control API's prefix."""
    if not isinstance(path, str):
        raise TypeError(f"mgmtauth option {name!r} must be a str, got {shown(path)}")
    if not path.startswith("/") or path == "/":
        raise ValueError(
            f"mgmtauth option {name!r} must be a path like '/oauth/token', got {shown(path)}"
        )
    if (
        any(c in path for c in "?#{}%")
        or path.startswith("//")
        or not path.isascii()
        or not path.isprintable()
    ):
        # What no request reaches as written: the path is matched decoded, without the
        # query, and '//x' is read as a host.
        raise ValueError(
            f"mgmtauth option {name!r} must be a plain path (no query, fragment, braces, "
            f"percent-escapes, leading '//', spaces or non-ASCII), got {shown(path)}"
        )
    if " " in path or path.startswith("/_mgmtauth"):
        raise ValueError(
            f"mgmtauth option {name!r}: {shown(path)} has a space or is under /_mgmtauth "
            "(mgmtauth-server's control API)"
        )


def shown_text(text: str) -> str:
    """A typed value (an option, a flag, an ini setting) in a message: whole if short,
    else its start and length. The one such helper: settings and the CLI use it too."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One option's declaration. ``kind`` is ``"seconds"``, ``"count"``, ``"bool"``,
    ``"text"`` or ``"choice"``; ``none_words`` are the texts that mean ``None``."""

    name: str
    kind: str
    help: str
    metavar: str = ""
    none_words: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    #: What a text that does not parse should have been (defaults by kind).
    expected: str = ""
    #: Meaningful inside pytest only (not a ``mgmtauth-server`` flag).
    test_only: bool = False
    #: The help of the flag of a ``"bool"`` option that is on by default (the flag
    #: switches it off: ``--no-<name>``); ``help`` stays the ini setting's.
    off_help: str = ""

    def __post_init__(self) -> None:
        if self.choices:  # a choice's metavar and expectation list its choices
            quoted = [repr(choice) for choice in self.choices]
            expected = f"expected {', '.join(quoted[:-1])} or {quoted[-1]}"
            object.__setattr__(self, "metavar", self.metavar or "|".join(self.choices))
            object.__setattr__(self, "expected", self.expected or expected)

    @property
    def default(self) -> object:
        return Options.__dataclass_fields__[self.name].default

    @property
    def flag(self) -> str:
        """The ``mgmtauth-server`` flag; pytest's is ``--mgmtauth-`` + the same. A flag
        switches a ``"bool"`` option away from its default: ``--no-<name>`` for one that
        is on by default (``--no-keep-alive``), ``--<name>`` otherwise."""
        negated = self.kind == "bool" and self.default is True
        return ("--no-" if negated else "--") + self.name.replace("_", "-")

    @property
    def flag_help(self) -> str:
        """The help of :attr:`flag` (``off_help`` for a ``--no-<name>`` flag)."""
        return self.off_help if self.flag.startswith("--no-") and self.off_help else self.help

    @property
    def allowed(self) -> str:
        """The range of the option in words (for help texts)."""
        if self.kind == "seconds":
            return describe_range(0, MAX_DURATION, self.name == "refresh_margin", "seconds")
        if self.kind == "count":
            return f">= 1 and <= {MAX_COUNT}" + (" or none" if self.none_words else "")
        if self.kind == "choice":
            return " or ".join(self.choices)
        return ""

    def parse(self, text: str) -> object:
        """The value a command line or ini text means; ValueError saying what was
        expected (the caller adds where it came from). Ranges: :class:`Options`."""
        word = text.strip().lower()
        if self.none_words and word in self.none_words:
            return None
        if self.kind == "bool":
            if word in ("1", "true", "yes", "on"):
                return True
            if word in ("0", "false", "no", "off"):
                return False
        elif self.kind == "text":
            return text.strip()
        elif self.kind == "choice":
            if word in self.choices:
                return word
        else:
            # One sign at most: "--0" must be the parse error below, not int()'s.
            digits = word[1:] if word[:1] in ("+", "-") else word
            if digits.isascii() and digits.isdigit():
                # A whole number stays exact (10**400 is not inf: Options names the
                # range); past int()'s 4300 digits, say so without echoing it all.
                if len(digits) > 4000:
                    raise ValueError("a number far too large")
                return int(word)
            if self.kind == "seconds":
                try:
                    return float(word)
                except ValueError:
                    pass
        raise ValueError(self.expected or _EXPECTED[self.kind])


_EXPECTED = {
    "seconds": "expected a number of seconds",
    "count": "expected a whole number",
    "bool": "expected true or false",
}


#: What a duration option reads back as: seconds (``float``), or ``float | None`` for
#: ``refresh_margin``, whose ``None`` means "derive it".
_Read = TypeVar("_Read", bound="float | None")


class Duration(Generic[_Read]):
    """A duration field of :class:`Options`: set as seconds or a ``timedelta``,
    read back as seconds.

    A descriptor for the sake of type checkers, which take ``__set__``'s value type as
    the parameter's and ``__get__``'s return type as the attribute's: so
    ``Options(token_ttl=timedelta(minutes=5))``, as documented, type-checks, and
    ``options.token_ttl`` is still a ``float``. The value is kept in the instance's
    ``__dict__`` under the field's name, as without the descriptor; ``__post_init__``
    checks it and converts it to seconds, as it does every other field."""

    def __init__(self, default: _Read) -> None:
        self._default = default
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type) -> _Read: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _Read: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> _Read:
        if instance is None:  # the class's attribute: dataclasses reads the default here
            return self._default
        try:
            value: _Read = instance.__dict__[self._name]
        except KeyError:  # not set yet: what hasattr() and getattr(..., default) expect
            raise AttributeError(self._name) from None
        return value

    def __set__(self, instance: object, value: float | timedelta | _Read) -> None:
        instance.__dict__[self._name] = value


# -- the developer portal's options: where its pages disagree (docs/oauth.md), and the
# lifecycle of API versions (api_versions.py) -----------------------------------------

PORTAL_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "oauth_delete_action",
        "choice",
        "the action a DELETE call's scope needs: 'write' (default, the authentication "
        "page) or 'delete' (the scopes page's action)",
        choices=("write", "delete"),
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
        choices=("exact", "covered"),
    ),
    OptionSpec(
        "oauth_engine_scopes",
        "choice",
        "a client's engine scopes in its tokens: 'automatic' (default: added to every "
        "token, the scopes page) or 'requested' (only when asked for, the authentication "
        "page)",
        choices=("automatic", "requested"),
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
        choices=("warn", "fail", "off"),
        test_only=True,
    ),
    OptionSpec(
        "scim_token_version",
        "choice",
        "the SCIM API's long-lived token endpoint: 'v2' (default, the current page: "
        "/v2/auth-long-lived/token, 90 days) or 'v1' (an earlier version of the page: "
        "/v1/auth-long-lived/token, expires_in 35999, refresh_expires_in, not-before-policy)",
        choices=("v2", "v1"),
    ),
)

_VERSION = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")  # ASCII digits: \d takes any digit


#: The real service's issuer (its published example token), the default of
#: ``Options.issuer``. The same text as ``token_format.ISSUER`` (a test checks it): not
#: imported from there, so that reading the options (which every run of pytest does,
#: for the report header) does not load the token module too.
ISSUER = "https://api.tealiumiq.com"
#: The default of ``Options.oauth_token_path``: where the developer portal's pages send
#: the token request (``POST https://api.tealiumapis.com/oauth/token``).
OAUTH_TOKEN_PATH = "/oauth/token"
#: The default of ``Options.oauth_token_ttl``: the pages' ``expires_in`` (two hours).
OAUTH_TOKEN_TTL = 7200.0

#: The region host v3 API calls go to unless the option ``v3_host`` says otherwise (a
#: real region host seen in public clients).
DEFAULT_V3_HOST = "us-west-2-platform.tealiumapis.com"

#: The longest derived refresh margin (the one of the default token_ttl).
DERIVED_MARGIN_MAX = 300


def derived_refresh_margin(token_ttl: float) -> float:
    """The refresh margin when none is set: a sixth of ``token_ttl`` in whole seconds,
    at most 300 s (the default token_ttl of 1800 s gets the default 300 s: a client that
    renews within the last 5 minutes of a 30-minute token is not churning)."""
    return float(min(DERIVED_MARGIN_MAX, int(token_ttl) // 6))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """How the fake behaves. Every "not shown" of the interface document that users
    could need another answer to is one of these. What each field does is said once, in
    its declaration's help (:data:`OPTION_SPECS`), and in the reference's table."""

    token_ttl: Duration[float] = Duration(1800.0)
    #: Re-authenticating this close to a credential's expiry counts as reuse, not churn.
    #: ``None`` (not set): derived from ``token_ttl`` by :func:`derived_refresh_margin`
    #: (300 s for the default token_ttl); read it back as a number.
    refresh_margin: Duration[float | None] = Duration(None)
    #: Failed v1 logins in a row that lock the account (not shown; our choice: 5).
    lockout_threshold: int = 5
    lockout_duration: Duration[float] = Duration(600.0)
    #: Idle time after which a v1 session ends by itself (not shown; our choice: 30 min).
    session_timeout: Duration[float] = Duration(1800.0)
    throttle: int | None = 5
    strict: bool = False
    https: bool = False
    require_logout: bool = False
    issuer: str = ISSUER
    v3_scope: str = "profile"
    keep_alive: bool = True
    v3_host: str = DEFAULT_V3_HOST
    v3_global_host: bool = False
    intercept: bool = False
    oauth_token_path: str = OAUTH_TOKEN_PATH
    oauth_token_ttl: Duration[float] = Duration(OAUTH_TOKEN_TTL)
    oauth_delete_action: str = "write"
    oauth_manage_covers: bool = True
    oauth_profile_wildcard: bool = True
    oauth_scope_request: str = "exact"
    oauth_engine_scopes: str = "automatic"
    oauth_short_paths: bool = True
    api_lifecycle: bool = True
    api_successor: str = ""
    api_link_v: bool = True
    sunset_check: str = "warn"
    scim_token_version: str = "v2"
    rate_limits: bool = False
    #: Whether ``refresh_margin`` was derived from ``token_ttl`` (not set explicitly):
    #: :func:`build_options` derives it again when only ``token_ttl`` changes.
    refresh_margin_derived: bool = dataclasses.field(
        default=False, init=False, repr=False, compare=False
    )

    def __hash__(self) -> int:
        # Options key the flows' endpoint tables, looked up on every request: hashed once
        # (frozen, so the hash stays; the fields compared, as dataclasses hashes them).
        found: int | None = self.__dict__.get("_hash")
        if found is None:
            compared = tuple(getattr(self, f.name) for f in dataclasses.fields(self) if f.compare)
            found = hash(compared)
            object.__setattr__(self, "_hash", found)
        return found

    def __post_init__(self) -> None:
        for name in ("token_ttl", "lockout_duration", "session_timeout", "oauth_token_ttl"):
            object.__setattr__(self, name, check_seconds(name, getattr(self, name)))
        for name in ("token_ttl", "oauth_token_ttl"):
            if not float(getattr(self, name)).is_integer():
                # The token's exp claim is whole seconds (iat + ttl); a fraction would
                # be cut off silently and the token would expire earlier than asked.
                raise ValueError(
                    f"mgmtauth option {name!r} must be whole seconds (the JWT's exp claim "
                    f"is in seconds), got {getattr(self, name):g}"
                )
        check_path("oauth_token_path", self.oauth_token_path)
        if self.refresh_margin is None:
            margin = derived_refresh_margin(self.token_ttl)
            object.__setattr__(self, "refresh_margin_derived", True)
        else:
            margin = check_seconds("refresh_margin", self.refresh_margin, allow_zero=True)
        object.__setattr__(self, "refresh_margin", margin)
        if margin >= self.token_ttl:
            raise ValueError(
                f"mgmtauth option 'refresh_margin' ({margin:g} s) must be shorter than "
                f"'token_ttl' ({self.token_ttl:g} s); leave refresh_margin out to get "
                f"{derived_refresh_margin(self.token_ttl):g} s (a sixth of token_ttl, "
                f"at most {DERIVED_MARGIN_MAX} s)"
            )
        if not isinstance(self.issuer, str) or not self.issuer:
            raise TypeError(
                f"mgmtauth option 'issuer' must be a non-empty str, got {shown(self.issuer)}"
            )
        if self.v3_scope not in ("profile", "account"):
            raise ValueError(
                "mgmtauth option 'v3_scope' must be 'profile' (a v3 token is good for its "
                "account and profile only) or 'account' (for any profile of its account), "
                f"got {shown(self.v3_scope)}"
            )
        check_count("lockout_threshold", self.lockout_threshold)
        if self.throttle is not None:
            hint = " (premature grants per 60 s), or None to switch throttling off"
            check_count("throttle", self.throttle, hint=hint)
        host = self.v3_host
        if isinstance(host, str) and _HOST_NAME.match(host) and not is_host_name(host):
            # The fake's own address is 127.0.0.1: refusing or intercepting lookups of
            # an address would refuse every request to mgmt_server.url.
            raise ValueError(
                "mgmtauth option 'v3_host' must be a host name, not an IP address (the "
                "fake itself listens on a loopback address, and the service's hosts are "
                "refused or intercepted), like 'us-east-1-platform.tealiumapis.com', got "
                f"{shown(host)}"
            )
        if not is_host_name(self.v3_host):
            raise ValueError(
                "mgmtauth option 'v3_host' must be a host name in lower case without "
                "scheme, port or path (like 'us-east-1-platform.tealiumapis.com'), got "
                f"{shown(self.v3_host)}"
            )
        for spec in OPTION_SPECS:
            value = getattr(self, spec.name)
            if spec.kind == "bool" and not isinstance(value, bool):
                raise TypeError(
                    f"mgmtauth option {spec.name!r} must be True or False, got {shown(value)}"
                )
            if spec.kind == "choice" and value not in spec.choices:
                raise ValueError(
                    f"mgmtauth option {spec.name!r} must be "
                    f"{' or '.join(repr(c) for c in spec.choices)}, got {shown(value)}"
                )
        successor = self.api_successor
        if not isinstance(successor, str) or (successor and not _VERSION.fullmatch(successor)):
            raise ValueError(
                "mgmtauth option 'api_successor' must be a version like '2026-10' (no 'v'), or "
                f"'' to name it automatically, got {shown(successor)}"
            )

    @property
    def margin(self) -> float:
        """``refresh_margin`` in seconds (after construction it is never ``None``)."""
        assert self.refresh_margin is not None
        return self.refresh_margin

    def describe(self) -> str:
        """One line that reproduces these options (report header, failure messages)."""
        parts = [
            f"token_ttl={self.token_ttl:g}s",
            f"refresh_margin={self.refresh_margin:g}s",
            f"lockout={self.lockout_threshold}/{self.lockout_duration:g}s",
            f"session_timeout={self.session_timeout:g}s",
            f"throttle={self.throttle}",
            f"strict={self.strict}",
            f"https={self.https}",
            f"require_logout={self.require_logout}",
        ]
        # The options after these nine when changed only, the portal's last: the header
        # line users know stays as it was.
        for spec in sorted(OPTION_SPECS[9:], key=lambda spec: spec in PORTAL_SPECS):
            value = getattr(self, spec.name)
            if value != spec.default:
                text = f"{value:g}s" if spec.kind == "seconds" else value
                parts.append(f"{spec.name}={text}")
        return " ".join(parts)

    def oauth_margin(self) -> float:
        """The refresh margin of OAuth access tokens: ``refresh_margin`` if set, else
        derived from ``oauth_token_ttl`` as it is from ``token_ttl`` (also when the set
        one is not shorter than ``oauth_token_ttl``)."""
        if not self.refresh_margin_derived and self.margin < self.oauth_token_ttl:
            return self.margin
        return derived_refresh_margin(self.oauth_token_ttl)


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Options) if f.init)


def check_option_names(names: object, *, where: str) -> None:
    """Raise a TypeError naming the known options for any unknown name in ``names``."""
    unknown = [n for n in names if n not in OPTION_NAMES]  # type: ignore[attr-defined]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, OPTION_NAMES, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise TypeError(
        f"{where}: unknown option {', '.join(hints)}; known options: {', '.join(OPTION_NAMES)}"
    )


def build_options(base: Options, overrides: dict[str, Any], *, where: str) -> Options:
    """``base`` with ``overrides`` applied; unknown names fail with the list of known ones."""
    check_option_names(overrides, where=where)
    overrides = dict(overrides)
    if base.refresh_margin_derived and "refresh_margin" not in overrides:
        overrides["refresh_margin"] = None  # derived again from the new token_ttl
    return dataclasses.replace(base, **overrides)


# -- declarations: the one option surface ----------------------------------------------
# Each option is declared once here (name, kind, help, text parser); the marker, the ini
# settings, the ``--mgmtauth-<name>`` flags and the ``mgmtauth-server`` flags are made
# from these. Ranges are checked by :class:`Options` (one check for every source).


OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("token_ttl", "seconds", "bearer token validity in seconds (default 1800)"),
    OptionSpec(
        "refresh_margin",
        "seconds",
        "re-auth this many seconds before expiry counts as reuse (default: a sixth of "
        f"token_ttl, at most {DERIVED_MARGIN_MAX})",
    ),
    OptionSpec(
        "lockout_threshold",
        "count",
        "failed v1 logins in a row that lock an account (default 5)",
        metavar="N",
    ),
    OptionSpec("lockout_duration", "seconds", "seconds a lockout (error 1402) lasts (default 600)"),
    OptionSpec(
        "session_timeout", "seconds", "idle seconds after which a v1 session ends (default 1800)"
    ),
    OptionSpec(
        "throttle",
        "count",
        "premature grants per account per 60 s before 429; 'none' turns it off (default 5)",
        metavar="N|none",
        none_words=("none", "off", ""),
        expected="expected a number of premature grants per 60 s, or 'none'",
    ),
    OptionSpec(
        "strict",
        "bool",
        "fail tests on token churn and expired-credential use (and open v1 sessions with "
        "require_logout) instead of warning (default false)",
        test_only=True,
    ),
    OptionSpec(
        "https", "bool", "serve the fake over HTTPS with a per-session test CA (default false)"
    ),
    OptionSpec(
        "require_logout",
        "bool",
        "count v1 sessions not ended with /v1/logout as a finding (default false)",
        test_only=True,
    ),
    OptionSpec(
        "issuer",
        "text",
        f"the tokens' iss claim (default {ISSUER}, the real service's)",
        metavar="ISS",
    ),
    OptionSpec(
        "v3_scope",
        "choice",
        "a v3 token is good for its 'profile' (default) or any profile of its 'account'",
        choices=("profile", "account"),
    ),
    OptionSpec(
        "keep_alive",
        "bool",
        "HTTP/1.1 keep-alive, as the real service answers (default true); false answers "
        "Connection: close and closes every connection after its answer",
        off_help="answer Connection: close and close every connection after its answer "
        "(default: HTTP/1.1 keep-alive, as the real service)",
    ),
    OptionSpec(
        "v3_host",
        "text",
        "the region host of v3 API calls, the host of v3 auth answers under intercept "
        f"(default {DEFAULT_V3_HOST})",
        metavar="HOST",
    ),
    OptionSpec(
        "v3_global_host",
        "bool",
        "accept v3 API calls at platform.tealiumapis.com too, as the iQ Profile API pages' "
        "examples make them (default false: the region host of the auth answer only)",
    ),
    OptionSpec(
        "intercept",
        "bool",
        "also be an HTTP proxy for the service's hosts (api.tealiumiq.com, "
        "platform.tealiumapis.com...), so that clients with hard-coded hosts reach the "
        "fake through HTTPS_PROXY and the CA variables (set for each test under pytest; "
        "the 'env' of mgmtauth-server --json) (default false)",
    ),
    OptionSpec(
        "oauth_token_path",
        "text",
        f"the path of the OAuth 2.0 token endpoint (default {OAUTH_TOKEN_PATH})",
        metavar="PATH",
    ),
    OptionSpec(
        "oauth_token_ttl",
        "seconds",
        "OAuth access token validity in seconds (default 7200, the developer portal's)",
    ),
    *PORTAL_SPECS,
    OptionSpec(
        "rate_limits",
        "bool",
        "apply the rate limits the service publishes for API calls by family (Hosted Data "
        "Layer 100/s, Collect 100 events/s, Visitor Profile and Visitor Privacy 50/s, "
        "publish status 1/s per publish id): 429 past them (default false)",
    ),
)
OPTION_SPEC: dict[str, OptionSpec] = {spec.name: spec for spec in OPTION_SPECS}
assert tuple(OPTION_SPEC) == OPTION_NAMES, "declare every option of Options, in order"


def setting_names(name: str) -> str:
    """Where a user sets the option ``name``: its marker, ini and flag names (and the
    standalone server's flag), for messages that say which setting changes a verdict."""
    spec = OPTION_SPEC[name]
    names = (
        f"@pytest.mark.mgmtauth({name}=...), the ini setting mgmtauth_{name} or "
        f"--mgmtauth-{spec.flag.removeprefix('--')}"
    )
    if not spec.test_only:
        names += f" (mgmtauth-server: {spec.flag})"
    return names


def name_source(message: str, label: Callable[[str], str]) -> str:
    """``message`` with ``mgmtauth option 'name'`` replaced by ``label(name)`` (the ini
    setting or flag the value came from)."""
    for name in OPTION_NAMES:
        message = message.replace(f"mgmtauth option {name!r}", label(name))
    return message
