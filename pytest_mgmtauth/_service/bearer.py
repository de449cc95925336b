"""The bearer token desk (v2 and v3): grant, authorize, throttle window, v3 scope."""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import TYPE_CHECKING, NoReturn

from .accounts import (
    format_scopes,
)
from .churn import Call
from .clock import to_datetime
from .diagnosis import ClientKind
from .events import (
    AuthRejected,
    Throttled,
    TokenIssued,
)
from .fault_plan import FaultDesk
from .records import AUTH_FAILED, THROTTLE_WINDOW, Authorization, TokenRecord
from .tokens import TokenProblem, unverified_subject
from .v3 import auth_path, call_scope

if TYPE_CHECKING:
    from .types import BearerVersion


class BearerDesk(FaultDesk):
    def _check_throttle(self, username: str, now: float, version: BearerVersion = "v2") -> None:
        limit = self.options.throttle
        if limit is None:
            return
        window = self._premature.get((username, version))
        if not window:
            return
        while window and window[0] <= now - THROTTLE_WINDOW:
            window.popleft()
        if len(window) >= limit:
            retry_after = max(1, math.ceil(window[0] + THROTTLE_WINDOW - now))
            self._refuse(
                Throttled(
                    at=to_datetime(now),
                    username=username,
                    retry_after=retry_after,
                    premature_grants=len(window),
                    version=version,
                ),
                429,
                f"{len(window)} new tokens within {THROTTLE_WINDOW:g} s while the account "
                f"held a valid one; reuse the token until it is about to expire",
                message="Too many authentication requests",
                retry_after=retry_after,
                status=429,
            )

    # -- v2 ------------------------------------------------------------------------

    def grant_token(
        self,
        username: str,
        key: str,
        *,
        arrived: int | None = None,
        client: ClientKind = ClientKind.OTHER,
    ) -> tuple[str, TokenRecord]:
        """``/v2/auth``: a new bearer token, or :class:`Refusal`.

        ``arrived`` is the :meth:`request_arrived` tick of the request; without it the
        grant cannot be part of a thundering herd. ``client`` (what the transport made of
        the User-Agent) picks the idiom of a wrong key's fix.
        """
        return self._grant_bearer(username, key, arrived, "v2", None, None, client)

    def grant_token_v3(
        self,
        username: str,
        key: str,
        account: str,
        profile: str,
        *,
        arrived: int | None = None,
        client: ClientKind = ClientKind.OTHER,
    ) -> tuple[str, TokenRecord]:
        """``POST /v3/auth/accounts/{account}/profiles/{profile}``: a bearer token bound
        to that account and profile, or :class:`Refusal`. Same rules as v2 (lifetime,
        reuse, throttling), churn counted per account and profile."""
        return self._grant_bearer(username, key, arrived, "v3", account, profile, client)

    def _grant_bearer(
        self,
        username: str,
        key: str,
        arrived: int | None,
        version: BearerVersion,
        scope_account: str | None,
        scope_profile: str | None,
        client: ClientKind = ClientKind.OTHER,
    ) -> tuple[str, TokenRecord]:
        with self._lock:
            now = self.now()
            account = self.accounts.get(username)

            def reject(who: str | None, reason: str) -> NoReturn:
                self._refuse(
                    AuthRejected(
                        at=to_datetime(now),
                        username=who,
                        return_code=AUTH_FAILED,
                        reason=reason,
                        version=version,
                        account=scope_account,
                        profile=scope_profile,
                    ),
                    AUTH_FAILED,
                    reason,
                )

            if account is None:
                reject(None, self._unknown_account(username))
            self._check_throttle(username, now, version)
            problem = self._secret_problem(username, "API key", account.api_key, key, client)
            if problem:
                reject(username, problem)
            if version == "v3":
                assert scope_account is not None
                assert scope_profile is not None
                if not account.may_use_profile(scope_account, scope_profile):
                    reject(
                        username,
                        f"account {username!r} may not get v3 tokens for "
                        f"{scope_account}/{scope_profile}; it may for: "
                        f"{format_scopes(account.profiles)} (add_account(profiles=...))",
                    )
            held = self._held_tokens(username, now, version, scope_account, scope_profile)
            concurrent = self._concurrent(
                (
                    r
                    for r in self.tokens.values()
                    if (r.version, r.account, r.profile) == (version, scope_account, scope_profile)
                ),
                username,
                arrived,
            )
            token, claims = self._signer.issue(
                username, int(now), int(self.options.token_ttl), issuer=self.options.issuer
            )
            serial, tick = self._next_grant()
            record = TokenRecord(
                label=f"T{len(self.tokens) + 1}",
                token=token,
                claims=claims,
                username=username,
                serial=serial,
                issued_tick=tick,
                version=version,
                account=scope_account,
                profile=scope_profile,
                issued_at=now,
            )
            self.tokens[claims.jti] = record
            self._by_token[token] = record
            if held:
                self._premature.setdefault((username, version), deque()).append(now)
            self._record(
                TokenIssued(
                    at=to_datetime(now),
                    username=username,
                    token=record.label,
                    fingerprint=record.fingerprint,
                    expires_at=to_datetime(claims.exp),
                    while_valid=tuple(r.label for r in held),
                    concurrent_with=concurrent,
                    version=version,
                    account=scope_account,
                    profile=scope_profile,
                )
            )
            self._granted()
            return token, record

    def authorize_v2(
        self,
        token: str | None,
        *,
        problem: str | None,
        method: str,
        path: str,
        permission: str | None,
    ) -> Authorization:
        """Authenticate a protected call by its bearer token; :class:`Refusal` if not.

        With a ``problem`` (a malformed Authorization header), ``token`` may be the
        token found in it anyway: it attributes the refusal to its account.
        """
        return self._authorize_bearer(
            "v2", token, problem=problem, method=method, path=path, permission=permission
        )

    def authorize_v3(
        self,
        token: str | None,
        *,
        problem: str | None,
        method: str,
        path: str,
        permission: str | None,
    ) -> Authorization:
        """As :meth:`authorize_v2` for a v3 route: the token must come from v3 auth, and
        be for the account and profile the path names (``/accounts/{a}/profiles/{p}``;
        only the account with the ``v3_scope="account"`` option)."""
        return self._authorize_bearer(
            "v3", token, problem=problem, method=method, path=path, permission=permission
        )

    def _authorize_bearer(
        self,
        version: BearerVersion,
        token: str | None,
        *,
        problem: str | None,
        method: str,
        path: str,
        permission: str | None,
    ) -> Authorization:
        with self._lock:
            now = self.now()
            call = Call(version, method, path, now)
            if token is None or problem:
                owner, label = self._attribute_token(token) if token else (None, None)
                self._refuse_call(call, owner, label, problem or "no bearer token")
            assert token is not None
            record = self._by_token.get(token)
            if record is not None:
                claims = record.claims  # issued in this test, exactly this string
            else:
                try:
                    claims = self._signer.verify(token, issuer=self.options.issuer)
                except TokenProblem as exc:
                    sub = unverified_subject(token)
                    self._refuse_call(
                        dataclasses.replace(call, version="v2"),
                        sub if sub in self.accounts else None,
                        None,
                        str(exc),
                    )
                record = self.tokens.get(claims.jti)
            if record is None or record.token != token:
                self._refuse_call(
                    call,
                    claims.sub if claims.sub in self.accounts else None,
                    None,
                    "the token was signed by this fake but not issued in this test (each "
                    f"test starts with no tokens): authenticate with {_auth_endpoint(version)} "
                    "in this test",
                )
            self._check_bearer_kind(call, record)
            if record.revoked_at is not None:
                self._refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"token {record.label} was revoked {now - record.revoked_at:.0f} s ago: "
                    "authenticate again",
                )
            if record.expired_at is not None and now >= record.expired_at:
                # Ended early on cue: the client could not have seen it coming, so this
                # is no use of an expired token (expired=False) but a 401 to recover from.
                self._refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"token {record.label} expired {now - record.expired_at:.0f} s ago (ended "
                    f"early on cue): authenticate again on a 401",
                )
            if now >= claims.exp:
                self._refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"token {record.label} expired {now - claims.exp:.0f} s ago "
                    f"({_lifetime(record)}): authenticate again before it expires, or on a 401",
                    expired=True,
                )
            if now < claims.nbf:
                self._refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"token {record.label} is not valid before its nbf",
                )
            self._check_permission(call, record.username, record.label, permission)
            record.uses += 1
            return Authorization(record.username, version, record.label)

    def _check_bearer_kind(self, call: Call, record: TokenRecord) -> None:
        """Refuse a v2 token on a v3 route, the reverse, and a v3 token used for another
        account or profile than its own (naming both)."""
        version, path = call.version, call.path
        if record.version != version:
            if version == "v3":
                reason = (
                    f"token {record.label} is a v2 token (from /v2/auth): v3 routes take a "
                    f"token from POST {auth_path('{account}', '{profile}')}"
                )
            else:
                reason = (
                    f"token {record.label} is a v3 token (for {record.scope}): this route "
                    "takes a v2 token from POST /v2/auth (declare it with auth='v3' if it "
                    "is a v3 operation)"
                )
            self._refuse_call(call, record.username, record.label, reason)
        if version != "v3":
            return
        account, profile = call_scope(path)
        wrong = ""
        if account is not None and account != record.account:
            wrong = f"account {account!r}"
        elif (
            self.options.v3_scope == "profile" and profile is not None and profile != record.profile
        ):
            wrong = f"profile {account}/{profile}"
        if wrong:
            assert account is not None
            want = f"{account}/{profile or '{profile}'}"
            relax = (
                " (or set the option v3_scope='account' to accept any profile of the account)"
                if account == record.account
                else ""
            )
            self._refuse_call(
                call,
                record.username,
                record.label,
                f"token {record.label} is for {record.scope}, but this call is for {wrong}: "
                f"authenticate at POST /v3/auth/accounts/{want.replace('/', '/profiles/', 1)} "
                f"and send that token with {want}'s calls{relax}",
            )

    def _attribute_token(self, token: str) -> tuple[str | None, str | None]:
        """The account and label of a token presented in a malformed header."""
        record = self._by_token.get(token)
        if record is not None:
            return record.username, record.label
        sub = unverified_subject(token)
        return (sub if sub in self.accounts else None), None


def _auth_endpoint(version: BearerVersion) -> str:
    return "/v2/auth" if version == "v2" else auth_path("{account}", "{profile}")


def _lifetime(record: TokenRecord) -> str:
    """How long the token was valid: ``exp`` minus the moment it was issued, which is
    less than ``token_ttl`` when it was issued at a fractional second (``iat`` is that
    moment truncated to the second)."""
    claims = record.claims
    lived = claims.exp - record.issued_at
    if record.issued_at == 0.0 or lived == claims.exp - claims.iat:
        return f"valid {claims.exp - claims.iat} s from issue"
    return (
        f"valid {lived:.3f} s from issue: exp is iat + {claims.exp - claims.iat} s and iat "
        "is the moment of issue truncated to the second"
    )
