"""The options of the fake service: one frozen, keyword-only object.

The marker's kwargs are this class's kwargs, so a typo is an error that names the known
options (see :func:`build_options`). Durations are seconds; a ``timedelta`` is accepted too.
"""

from __future__ import annotations

import dataclasses
import difflib
from datetime import timedelta
from typing import Any

from ._tokens import ISSUER

Seconds = float


def _seconds(name: str, value: object, *, allow_zero: bool = False) -> Seconds:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"mgmtauth option {name!r} takes seconds (int, float or timedelta), "
            f"got {type(value).__name__} {value!r}"
        )
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"mgmtauth option {name!r} must be {bound} seconds, got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """How the fake behaves. Every "not shown" of the interface document that users
    could need another answer to is one of these."""

    #: Bearer token validity (the interface document: 30 minutes).
    token_ttl: Seconds = 1800.0
    #: Re-authenticating this close to a credential's expiry counts as reuse, not churn.
    refresh_margin: Seconds = 60.0
    #: Failed v1 logins in a row that lock the account (not shown; our choice: 5).
    lockout_threshold: int = 5
    #: How long error 1402 lasts, from the failure that started the lockout.
    lockout_duration: Seconds = 600.0
    #: Idle time after which a v1 session ends by itself (not shown; our choice: 30 min).
    session_timeout: Seconds = 1800.0
    #: Premature grants one account may get within 60 s before /v2/auth answers 429;
    #: ``None`` switches throttling off.
    throttle: int | None = 5
    #: Fail the test at teardown on token churn instead of warning.
    strict: bool = False
    #: Serve over HTTPS with a per-session test CA.
    https: bool = False
    #: Count a v1 session not ended with /v1/logout as a finding at teardown (the
    #: interface document makes logout optional, so this is off by default).
    require_logout: bool = False
    #: The tokens' ``iss`` claim (the real service's by default).
    issuer: str = ISSUER
    #: What a v3 token is bound to: ``"profile"`` (its account and profile, the fake's
    #: default) or ``"account"`` (any profile of its account).
    v3_scope: str = "profile"

    def __post_init__(self) -> None:
        for name in ("token_ttl", "lockout_duration", "session_timeout"):
            object.__setattr__(self, name, _seconds(name, getattr(self, name)))
        if not float(self.token_ttl).is_integer():
            # The token's exp claim is whole seconds (iat + token_ttl); a fraction would
            # be cut off silently and the token would expire earlier than asked.
            raise ValueError(
                f"mgmtauth option 'token_ttl' must be whole seconds (the JWT's exp claim "
                f"is in seconds), got {self.token_ttl:g}"
            )
        margin = _seconds("refresh_margin", self.refresh_margin, allow_zero=True)
        object.__setattr__(self, "refresh_margin", margin)
        if margin >= self.token_ttl:
            raise ValueError(
                f"mgmtauth option 'refresh_margin' ({margin:g} s) must be shorter than "
                f"'token_ttl' ({self.token_ttl:g} s)"
            )
        threshold = self.lockout_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ValueError(
                f"mgmtauth option 'lockout_threshold' must be an int >= 1, got {threshold!r}"
            )
        throttle = self.throttle
        if throttle is not None and (
            isinstance(throttle, bool) or not isinstance(throttle, int) or throttle < 1
        ):
            raise ValueError(
                "mgmtauth option 'throttle' must be an int >= 1 (premature grants per 60 s) "
                f"or None to switch throttling off, got {throttle!r}"
            )
        if not isinstance(self.issuer, str) or not self.issuer:
            raise TypeError(
                f"mgmtauth option 'issuer' must be a non-empty str, got {self.issuer!r}"
            )
        if self.v3_scope not in ("profile", "account"):
            raise ValueError(
                "mgmtauth option 'v3_scope' must be 'profile' (a v3 token is good for its "
                "account and profile only) or 'account' (for any profile of its account), "
                f"got {self.v3_scope!r}"
            )
        for name in ("strict", "https", "require_logout"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(
                    f"mgmtauth option {name!r} must be True or False, got {getattr(self, name)!r}"
                )

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
        # Shown when changed only: the header line users know stays as it was.
        if self.issuer != ISSUER:
            parts.append(f"issuer={self.issuer}")
        if self.v3_scope != "profile":
            parts.append(f"v3_scope={self.v3_scope}")
        return " ".join(parts)


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Options))


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
    return dataclasses.replace(base, **overrides)
