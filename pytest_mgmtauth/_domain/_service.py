"""The fake auth service: accounts, tokens, sessions, lockout, throttling, events.

Pure Python, no HTTP and no pytest: the transport turns requests into these calls and
:class:`Refusal` into error answers. One instance holds one test's state; the signing
key (the expensive part) is shared across tests through the :class:`TokenSigner`.
All public methods are thread-safe: the HTTP server calls them from many threads.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, NoReturn

from ._accounts import (
    Account,
    fingerprint,
    format_scopes,
    generate_api_key,
    generate_password,
    generate_session_id,
    generate_utk,
    make_account,
)
from ._clock import Clock, system_clock, to_datetime
from ._diagnosis import ClientKind, diagnose_secret, paused_diagnosis
from ._events import (
    AccountLocked,
    AccountLockedManually,
    AccountUnlocked,
    ApiCall,
    AuthRejected,
    BadRequest,
    CredentialExpired,
    CredentialRevoked,
    Event,
    FaultInjected,
    LoggedIn,
    LoggedOut,
    LoggedOutRejected,
    LoginRejected,
    ScheduledFaultFired,
    SecretRotated,
    SessionExpired,
    Throttled,
    TokenIssued,
    UnknownRoute,
)
from ._faults import FaultPlan, FiredFault, ScheduledFault, scheduled_failure
from ._options import check_seconds
from ._redact import SecretMasker
from ._tokens import Claims, TokenProblem, TokenSigner, unverified_subject
from ._v3 import auth_path, call_scope

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ._options import Options

AUTH_FAILED = 1401
LOCKED_OUT = 1402
FORBIDDEN = 1469

#: The service's fixed texts; the fake appends its diagnosis after a colon.
SERVICE_MESSAGES = {
    AUTH_FAILED: "Authentication failed",
    LOCKED_OUT: "Too many unsuccessful login attempts; try again in {minutes} minutes",
    FORBIDDEN: "User is authenticated but the request is denied for lack of proper permissions",
}

#: Throttling counts premature grants within this window of simulated time.
THROTTLE_WINDOW = 60.0

#: A wrong API key or password is diagnosed (compared with the account's, see
#: _diagnosis.py) for at most this many failures per account and secret within
#: DIAGNOSIS_WINDOW seconds of simulated time; later failures get a plain 1401, so that
#: the diagnoses cannot be used as an oracle to recover the secret.
DIAGNOSIS_BUDGET = 5
DIAGNOSIS_WINDOW = 60.0


class Refusal(Exception):
    """The service says no. The transport renders it as ``status`` with a JSON body."""

    def __init__(
        self,
        status: int,
        return_code: int,
        reason: str,
        *,
        message: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.return_code = return_code
        self.reason = reason
        base = message if message is not None else SERVICE_MESSAGES.get(return_code, "")
        self.message = f"{base}: {reason}" if base else reason
        self.retry_after = retry_after


@dataclasses.dataclass
class TokenRecord:
    label: str
    token: str = dataclasses.field(repr=False)
    claims: Claims
    username: str
    uses: int = 0
    revoked_at: float | None = None
    #: When ``mgmt_server.expire`` ended it ahead of its ``exp``.
    expired_at: float | None = None
    #: Order of grants in this test (tokens and sessions share it): a 1401 refusal
    #: releases the credentials granted before it, see AuthService._held_tokens.
    serial: int = 0
    #: Tick at which it was issued, to tell which requests were in flight meanwhile.
    issued_tick: int = 0
    #: "v2", or "v3" with the account and profile of its auth path.
    version: str = "v2"
    account: str | None = None
    profile: str | None = None
    #: The fake's time of issue (``claims.iat`` is it truncated to the second).
    issued_at: float = 0.0

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.token)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis and IPython print dataclasses field by field, repr=False ones too.
        printer.text(repr(self))

    @property
    def scope(self) -> str:
        """``account/profile`` of a v3 token, ``""`` for v2."""
        return f"{self.account}/{self.profile}" if self.version == "v3" else ""


@dataclasses.dataclass
class SessionRecord:
    label: str
    session_id: str = dataclasses.field(repr=False)
    utk: str = dataclasses.field(repr=False)
    username: str
    started_at: float
    last_used: float
    uses: int = 0
    ended_at: float | None = None
    end_reason: str | None = None  # "logout", "timeout", "revoked", "expired" (on cue)
    serial: int = 0
    issued_tick: int = 0

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.session_id)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@dataclasses.dataclass(frozen=True)
class Authorization:
    """Who a protected call authenticated as, and with which credential."""

    username: str
    version: str
    credential: str


class AuthService:
    def __init__(self, options: Options, signer: TokenSigner, clock: Clock = system_clock) -> None:
        self.options = options
        self._signer = signer
        self._clock = clock
        self._lock = threading.RLock()
        self.started_at = clock()
        self.accounts: dict[str, Account] = {}
        self.tokens: dict[str, TokenRecord] = {}  # by jti
        # The same records by the exact token string: a token this test was issued is
        # known without verifying its signature again (PyJWT's checks cost ~1 ms per
        # call on a 4096-bit token, most of a protected call; see docs/benchmarks.md).
        self._by_token: dict[str, TokenRecord] = {}
        self.sessions: dict[str, SessionRecord] = {}  # by JSESSIONID
        self._events: list[Event] = []
        self._failed_logins: dict[str, int] = {}
        self._lockouts: dict[str, tuple[float, float]] = {}  # username -> (start, end)
        # Premature bearer grants in the throttling window, per (username, version).
        self._premature: dict[tuple[str, str], deque[float]] = {}
        # The serial of the last grant before a protected call by the account last got a
        # 1401, per version: credentials granted up to then may be replaced without it
        # counting as churn. Serials, not times: under a frozen clock everything happens
        # at one instant.
        self._last_refusal: dict[tuple[str, str], int] = {}
        self._serial = 0
        # Ticks order request arrivals and grants, for thundering-herd detection.
        self._tick = 0
        # Login attempts per account during its current lockout.
        self._attempts_while_locked: dict[str, int] = {}
        #: Scripted faults for the next /v2/auth and /v1/login calls (see _faults.py).
        self.faults = FaultPlan()
        # Locks set by lock(): username -> (start, end); end is inf until unlock().
        self._manual_locks: dict[str, tuple[float, float]] = {}
        # Secrets replaced by rotate_*(): (username, "API key"/"password") -> [(old, when)].
        self._rotated: dict[tuple[str, str], list[tuple[str, float]]] = {}
        # Every secret this service holds or handed out, masked wherever text leaves it.
        self._masker = SecretMasker()
        # Times of the diagnosed failures, per (username, "API key"/"password").
        self._diagnosed: dict[tuple[str, str], deque[float]] = {}
        #: Moves the clock forward by that many seconds and returns True, or returns
        #: False when the clock cannot be moved (the test does not run on mgmt_clock):
        #: a scheduled ``expire`` lets the credential's lifetime pass, or else ends it
        #: early on cue.
        self.advance: Callable[[float], bool] | None = None

    # -- time and events -----------------------------------------------------------

    def now(self) -> float:
        return self._clock()

    def _record(self, event: Event) -> None:
        self._events.append(self._masked_event(event))

    def redact(self, text: str) -> str:
        """``text`` with every secret of this test's accounts, tokens and sessions (also
        rotated-out and ended ones) replaced by its fingerprint: apply it to anything
        that quotes what a client sent before it leaves the fake."""
        return self._masker.mask(text)

    def keep_masking(self, previous: AuthService) -> None:
        """Mask the secrets of ``previous`` too (the standalone server's state before a
        reset: its clients may still send the old sessions' ids)."""
        self._masker.add_all(previous._masker)

    def _masked_event(self, event: Event) -> Event:
        changes: dict[str, Any] = {}
        for field in dataclasses.fields(event):
            value = getattr(event, field.name)
            if isinstance(value, str):
                masked = self._masker.mask(value)
                if masked != value:
                    changes[field.name] = masked
        return dataclasses.replace(event, **changes) if changes else event

    def _hold_secrets(self, *values: str) -> None:
        for value in values:
            self._masker.add(value)

    @property
    def events(self) -> list[Event]:
        """The timeline, oldest first (a copy)."""
        with self._lock:
            self._expire_sessions(self.now())
            return sorted(self._events, key=lambda e: e.at)

    def _expire_sessions(self, now: float) -> None:
        timeout = self.options.session_timeout
        for rec in self.sessions.values():
            if rec.ended_at is None and now >= rec.last_used + timeout:
                rec.ended_at = rec.last_used + timeout
                rec.end_reason = "timeout"
                self._record(
                    SessionExpired(
                        at=to_datetime(rec.ended_at),
                        username=rec.username,
                        session=rec.label,
                    )
                )

    # -- accounts ------------------------------------------------------------------

    def add_account(
        self,
        username: str | None = None,
        *,
        api_key: str | None = None,
        password: str | None = None,
        permissions: Iterable[str] | None = None,
        profiles: object = None,
    ) -> Account:
        with self._lock:
            account = make_account(
                len(self.accounts) + 1, username, api_key, password, permissions, profiles
            )
            if account.username in self.accounts:
                raise ValueError(
                    f"add_account: an account {account.username!r} exists already in this test"
                )
            self.accounts[account.username] = account
            self._hold_secrets(account.api_key, account.password)
            return account

    def _unknown_account(self, username: str) -> str:
        close = difflib.get_close_matches(username, list(self.accounts), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        if " " in username and username.replace(" ", "+") in self.accounts:
            hint = (
                f"; did you mean {username.replace(' ', '+')!r}? A '+' arrived as a space: "
                "URL-encode the username in the form body"
            )
        if not self.accounts:
            hint = (
                "; this test has no accounts: add one with mgmt_server.add_account() "
                "or use the mgmt_account fixture"
            )
        return self.redact(f"no account {username!r} exists{hint}")

    # -- churn ---------------------------------------------------------------------

    def request_arrived(self) -> int:
        """A tick for a credential request that has just arrived (before its body is
        read); pass it to :meth:`grant_token` / :meth:`login` as ``arrived``."""
        with self._lock:
            self._tick += 1
            return self._tick

    def _next_grant(self) -> tuple[int, int]:
        self._serial += 1
        self._tick += 1
        return self._serial, self._tick

    def _held_tokens(
        self,
        username: str,
        now: float,
        version: str = "v2",
        account: str | None = None,
        profile: str | None = None,
    ) -> list[TokenRecord]:
        """Tokens the account still holds: valid, not refused, not near expiry.

        Churn is a grant while this is non-empty. A 1401 on a call attributed to the
        account releases every token granted before it (the client was told its
        credential is no good); a 1469 does not. A token within ``refresh_margin`` of
        its ``exp`` may be replaced. v3 tokens count per account and profile: holding
        one for each of several profiles is no churn.
        """
        refused = self._last_refusal.get((username, version), 0)
        margin = self.options.margin
        return [
            rec
            for rec in self.tokens.values()
            if rec.username == username
            and rec.version == version
            and (rec.account, rec.profile) == (account, profile)
            and rec.revoked_at is None
            and rec.expired_at is None
            and rec.serial > refused
            and now < rec.claims.exp - margin
        ]

    def _held_sessions(self, username: str, now: float) -> list[SessionRecord]:
        """Sessions the account still holds: active, not refused, not near idle timeout."""
        refused = self._last_refusal.get((username, "v1"), 0)
        margin = self.options.margin
        timeout = self.options.session_timeout
        return [
            rec
            for rec in self.sessions.values()
            if rec.username == username
            and rec.ended_at is None
            and rec.serial > refused
            and now < rec.last_used + timeout - margin
        ]

    @staticmethod
    def _concurrent(
        records: Iterable[TokenRecord | SessionRecord], username: str, arrived: int | None
    ) -> tuple[str, ...]:
        """Labels of the account's grants issued after a request arrived at ``arrived``."""
        if arrived is None:
            return ()
        return tuple(r.label for r in records if r.username == username and r.issued_tick > arrived)

    def _check_throttle(self, username: str, now: float, version: str = "v2") -> None:
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
            self._record(
                Throttled(
                    at=to_datetime(now),
                    username=username,
                    retry_after=retry_after,
                    premature_grants=len(window),
                    version=version,
                )
            )
            raise Refusal(
                429,
                429,
                f"{len(window)} new tokens within {THROTTLE_WINDOW:g} s while the account "
                f"held a valid one; reuse the token until it is about to expire",
                message="Too many authentication requests",
                retry_after=retry_after,
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
        version: str,
        scope_account: str | None,
        scope_profile: str | None,
        client: ClientKind = ClientKind.OTHER,
    ) -> tuple[str, TokenRecord]:
        with self._lock:
            now = self.now()
            account = self.accounts.get(username)

            def reject(who: str | None, reason: str) -> NoReturn:
                self._record(
                    AuthRejected(
                        at=to_datetime(now),
                        username=who,
                        return_code=AUTH_FAILED,
                        reason=reason,
                        version=version,
                        account=scope_account,
                        profile=scope_profile,
                    )
                )
                raise Refusal(401, AUTH_FAILED, reason)

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
        version: str,
        token: str | None,
        *,
        problem: str | None,
        method: str,
        path: str,
        permission: str | None,
    ) -> Authorization:
        with self._lock:
            now = self.now()
            if token is None or problem:
                owner, label = self._attribute_token(token) if token else (None, None)
                self._refuse_call(
                    version, owner, label, method, path, problem or "no bearer token", now
                )
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
                        "v2",
                        sub if sub in self.accounts else None,
                        None,
                        method,
                        path,
                        str(exc),
                        now,
                    )
                record = self.tokens.get(claims.jti)
            if record is None or record.token != token:
                self._refuse_call(
                    version,
                    claims.sub if claims.sub in self.accounts else None,
                    None,
                    method,
                    path,
                    "the token was signed by this fake but not issued in this test (each "
                    f"test starts with no tokens): authenticate with {_auth_endpoint(version)} "
                    "in this test",
                    now,
                )
            self._check_bearer_kind(version, record, method, path, now)
            if record.revoked_at is not None:
                self._refuse_call(
                    version,
                    record.username,
                    record.label,
                    method,
                    path,
                    f"token {record.label} was revoked {now - record.revoked_at:.0f} s ago: "
                    "authenticate again",
                    now,
                )
            if record.expired_at is not None and now >= record.expired_at:
                # Ended early on cue: the client could not have seen it coming, so this
                # is no use of an expired token (expired=False) but a 401 to recover from.
                self._refuse_call(
                    version,
                    record.username,
                    record.label,
                    method,
                    path,
                    f"token {record.label} expired {now - record.expired_at:.0f} s ago (ended "
                    f"early on cue): authenticate again on a 401",
                    now,
                )
            if now >= claims.exp:
                self._refuse_call(
                    version,
                    record.username,
                    record.label,
                    method,
                    path,
                    f"token {record.label} expired {now - claims.exp:.0f} s ago "
                    f"({_lifetime(record)}): authenticate again before it expires, or on a 401",
                    now,
                    expired=True,
                )
            if now < claims.nbf:
                self._refuse_call(
                    version,
                    record.username,
                    record.label,
                    method,
                    path,
                    f"token {record.label} is not valid before its nbf",
                    now,
                )
            self._check_permission(
                record.username, version, record.label, method, path, permission, now
            )
            record.uses += 1
            return Authorization(record.username, version, record.label)

    def _check_bearer_kind(
        self, version: str, record: TokenRecord, method: str, path: str, now: float
    ) -> None:
        """Refuse a v2 token on a v3 route, the reverse, and a v3 token used for another
        account or profile than its own (naming both)."""
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
            self._refuse_call(version, record.username, record.label, method, path, reason, now)
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
                version,
                record.username,
                record.label,
                method,
                path,
                f"token {record.label} is for {record.scope}, but this call is for {wrong}: "
                f"authenticate at POST /v3/auth/accounts/{want.replace('/', '/profiles/', 1)} "
                f"and send that token with {want}'s calls{relax}",
                now,
            )

    def _attribute_token(self, token: str) -> tuple[str | None, str | None]:
        """The account and label of a token presented in a malformed header."""
        record = self._by_token.get(token)
        if record is not None:
            return record.username, record.label
        sub = unverified_subject(token)
        return (sub if sub in self.accounts else None), None

    # -- v1 ------------------------------------------------------------------------

    def login(
        self,
        username: str,
        password: str,
        *,
        arrived: int | None = None,
        client: ClientKind = ClientKind.OTHER,
    ) -> SessionRecord:
        """``/v1/login``: a new session, or :class:`Refusal` (1401, 1402); ``client`` as
        for :meth:`grant_token`."""
        with self._lock:
            now = self.now()
            self._expire_sessions(now)
            account = self.accounts.get(username)
            if account is None:
                reason = self._unknown_account(username)
                self._record(
                    LoginRejected(
                        at=to_datetime(now),
                        username=None,
                        return_code=AUTH_FAILED,
                        reason=reason,
                    )
                )
                raise Refusal(401, AUTH_FAILED, reason)
            self._check_manual_lock(username, now)
            lockout = self._lockouts.get(username)
            if lockout is not None and now < lockout[1]:
                start, end = lockout
                attempts = self._attempts_while_locked.get(username, 0) + 1
                self._attempts_while_locked[username] = attempts
                hammering = ""
                if attempts > 1:
                    # A client that retries /v1/login in a loop on 1402 hammers the
                    # service for nothing: say so, with the count.
                    hammering = (
                        f"; the client is still hammering the locked account: {attempts} "
                        f"login attempts since the lockout began, stop retrying on 1402"
                    )
                reason = (
                    f"account locked since {self._offset(start)} until {self._offset(end)} "
                    f"after {self.options.lockout_threshold} failed logins; attempts during a "
                    f"lockout do not end it sooner: wait {math.ceil(end - now)} s{hammering}"
                )
                self._record(
                    LoginRejected(
                        at=to_datetime(now),
                        username=username,
                        return_code=LOCKED_OUT,
                        reason=reason,
                    )
                )
                raise Refusal(401, LOCKED_OUT, reason, message=self._lockout_message())
            problem = self._secret_problem(username, "password", account.password, password, client)
            if problem:
                failures = self._failed_logins.get(username, 0) + 1
                self._failed_logins[username] = failures
                self._record(
                    LoginRejected(
                        at=to_datetime(now),
                        username=username,
                        return_code=AUTH_FAILED,
                        reason=problem,
                    )
                )
                if failures >= self.options.lockout_threshold:
                    until = now + self.options.lockout_duration
                    self._lockouts[username] = (now, until)
                    self._failed_logins[username] = 0
                    self._attempts_while_locked[username] = 0
                    self._record(
                        AccountLocked(
                            at=to_datetime(now),
                            username=username,
                            failures=failures,
                            until=to_datetime(until),
                        )
                    )
                raise Refusal(401, AUTH_FAILED, problem)
            self._failed_logins[username] = 0
            held = self._held_sessions(username, now)
            concurrent = self._concurrent(self.sessions.values(), username, arrived)
            serial, tick = self._next_grant()
            record = SessionRecord(
                label=f"S{len(self.sessions) + 1}",
                session_id=generate_session_id(),
                utk=generate_utk(),
                username=username,
                started_at=now,
                last_used=now,
                serial=serial,
                issued_tick=tick,
            )
            self.sessions[record.session_id] = record
            self._hold_secrets(record.session_id, record.utk)
            self._record(
                LoggedIn(
                    at=to_datetime(now),
                    username=username,
                    session=record.label,
                    fingerprint=record.fingerprint,
                    while_valid=tuple(r.label for r in held),
                    concurrent_with=concurrent,
                )
            )
            self._granted()
            return record

    def _lockout_message(self) -> str:
        minutes = max(1, math.ceil(self.options.lockout_duration / 60))
        return SERVICE_MESSAGES[LOCKED_OUT].format(minutes=minutes)

    def logout(self, session_id: str | None, *, problem: str | None = None) -> SessionRecord:
        """``/v1/logout``: end the session of the JSESSIONID cookie."""
        with self._lock:
            now = self.now()
            self._expire_sessions(now)
            record = self.sessions.get(session_id) if session_id else None
            reason = problem or ""
            if record is None and not reason:
                reason = "the JSESSIONID cookie names no session of this test"
            elif record is not None and record.ended_at is not None:
                reason = f"session {record.label} had ended already ({record.end_reason})"
            if reason:
                self._record(
                    LoggedOutRejected(
                        at=to_datetime(now),
                        username=record.username if record else None,
                        reason=reason,
                    )
                )
                raise Refusal(401, AUTH_FAILED, reason)
            assert record is not None
            record.ended_at = now
            record.end_reason = "logout"
            self._record(
                LoggedOut(at=to_datetime(now), username=record.username, session=record.label)
            )
            return record

    def authorize_v1(
        self,
        session_id: str | None,
        utk: str | None,
        *,
        problem: str | None,
        method: str,
        path: str,
        permission: str | None,
    ) -> Authorization:
        """Authenticate a protected v1 call by its JSESSIONID cookie and utk."""
        with self._lock:
            now = self.now()
            self._expire_sessions(now)
            if session_id is None or problem:
                known = self.sessions.get(session_id) if session_id else None
                self._refuse_call(
                    "v1",
                    known.username if known else None,
                    known.label if known else None,
                    method,
                    path,
                    problem or "no JSESSIONID cookie",
                    now,
                )
            assert session_id is not None
            record = self.sessions.get(session_id)
            if record is None:
                self._refuse_call(
                    "v1",
                    None,
                    None,
                    method,
                    path,
                    "the JSESSIONID cookie names no session of this test: send the "
                    "JSESSIONID value from /v1/login's Set-Cookie",
                    now,
                )
            if record.ended_at is not None:
                how = {
                    "logout": "ended by /v1/logout",
                    "timeout": f"expired after {self.options.session_timeout:g} s idle",
                    "revoked": "revoked",
                    "expired": "expired (ended early on cue)",
                }.get(record.end_reason or "", "ended")
                self._refuse_call(
                    "v1",
                    record.username,
                    record.label,
                    method,
                    path,
                    f"session {record.label} {how} {now - record.ended_at:.0f} s ago: log in again",
                    now,
                    # Revoked or expired on cue: the client could not have known.
                    expired=record.end_reason in ("logout", "timeout"),
                )
            if not utk:
                self._refuse_call(
                    "v1",
                    record.username,
                    record.label,
                    method,
                    path,
                    "the utk query parameter is missing: v1 calls need both the JSESSIONID "
                    "cookie and utk=<the utk of /v1/login's answer>",
                    now,
                )
            if utk != record.utk:
                owner = next((r for r in self.sessions.values() if r.utk == utk), None)
                detail = f"it is the utk of session {owner.label}" if owner else "no session has it"
                self._refuse_call(
                    "v1",
                    record.username,
                    record.label,
                    method,
                    path,
                    f"the utk does not belong to session {record.label} ({detail}): send the "
                    "utk that came with this JSESSIONID",
                    now,
                )
            self._check_permission(
                record.username, "v1", record.label, method, path, permission, now
            )
            record.uses += 1
            record.last_used = now
            return Authorization(record.username, "v1", record.label)

    # -- shared --------------------------------------------------------------------

    def _refuse_call(
        self,
        version: str,
        username: str | None,
        credential: str | None,
        method: str,
        path: str,
        reason: str,
        now: float,
        *,
        expired: bool = False,
    ) -> NoReturn:
        if username is not None:
            self._last_refusal[(username, version)] = self._serial
        self._record(
            ApiCall(
                at=to_datetime(now),
                username=username,
                method=method,
                path=path,
                version=version,
                credential=credential,
                status=401,
                return_code=AUTH_FAILED,
                reason=reason,
                credential_expired=expired,
            )
        )
        raise Refusal(401, AUTH_FAILED, reason)

    def _check_permission(
        self,
        username: str,
        version: str,
        credential: str,
        method: str,
        path: str,
        permission: str | None,
        now: float,
    ) -> None:
        account = self.accounts[username]
        if account.has_permission(permission):
            return
        reason = f"account {username!r} lacks the permission {permission!r} this route needs"
        self._record(
            ApiCall(
                at=to_datetime(now),
                username=username,
                method=method,
                path=path,
                version=version,
                credential=credential,
                status=401,
                return_code=FORBIDDEN,
                reason=reason,
            )
        )
        raise Refusal(401, FORBIDDEN, reason)

    def record_call(self, auth: Authorization, method: str, path: str, status: int) -> None:
        """An authenticated call reached its route's handler and got ``status``."""
        with self._lock:
            self._record(
                ApiCall(
                    at=to_datetime(self.now()),
                    username=auth.username,
                    method=method,
                    path=path,
                    version=auth.version,
                    credential=auth.credential,
                    status=status,
                )
            )

    def record_bad_request(self, method: str, path: str, status: int, reason: str) -> None:
        with self._lock:
            self._record(
                BadRequest(
                    at=to_datetime(self.now()),
                    username=None,
                    method=method,
                    path=path,
                    status=status,
                    reason=reason,
                )
            )

    def record_unknown_route(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self._record(
                UnknownRoute(
                    at=to_datetime(self.now()),
                    username=None,
                    method=method,
                    path=path,
                    status=status,
                )
            )

    # -- scheduled faults (trigger points; mgmt_server.schedule_fault, sweeps) --------

    def schedule(self, fault: ScheduledFault) -> None:
        """Schedule ``fault`` at its point; calls already made count."""
        with self._lock:
            self.faults.schedule(fault)

    def _granted(self) -> None:
        # Before protected call 1 is right after the first grant (if no call came yet).
        if self.faults.protected_calls == 0:
            self._fire_before_call(1)

    def protected_call_arrived(self) -> ScheduledFault | None:
        """Count a protected call that matched a route; the scheduled fault the transport
        must carry out on it (``reset``), already recorded, else ``None``."""
        with self._lock:
            fault = self.faults.protected_call()
            # An expire/revoke not fired yet (before call 1 without any grant) fires now.
            self._fire_before_call(self.faults.protected_calls)
            if fault is not None:
                self._record_scheduled(fault, "the connection was reset, no answer")
            return fault

    def protected_call_answered(self) -> None:
        """A protected call was answered: what is due before the next one fires now,
        while the client reads the answer (so a client that renews before its token
        expires sees the new time before it sends the next call)."""
        with self._lock:
            self._fire_before_call(self.faults.protected_calls + 1)

    def _fire_before_call(self, index: int) -> None:
        for fault in self.faults.before_call(index):
            self._end_in_use(fault)

    def _record_scheduled(self, fault: ScheduledFault, detail: str) -> None:
        self._record(
            ScheduledFaultFired(
                at=to_datetime(self.now()),
                username=None,
                fault=fault.kind,
                point=fault.point,
                detail=detail,
            )
        )

    def _in_use(self, now: float) -> TokenRecord | SessionRecord | None:
        """The credential in use: the latest grant that has not ended."""
        live: list[TokenRecord | SessionRecord] = [
            r
            for r in self.tokens.values()
            if r.revoked_at is None and r.expired_at is None and now < r.claims.exp
        ]
        live += [r for r in self.sessions.values() if r.ended_at is None]
        return max(live, key=lambda r: r.serial, default=None)

    def _end_in_use(self, fault: ScheduledFault) -> None:
        now = self.now()
        self._expire_sessions(now)
        rec = self._in_use(now)
        if rec is None:
            self._record_scheduled(fault, "no credential was in use, nothing ended")
            return
        kind = "token" if isinstance(rec, TokenRecord) else "session"
        if isinstance(rec, TokenRecord):
            end = float(rec.claims.exp)
        else:
            end = rec.last_used + self.options.session_timeout
        if (
            fault.kind == "expire"
            and end > now
            and self.advance is not None
            and self.advance(end - now)
        ):
            # As if its lifetime had passed: the clock moves on to its end, so a client
            # that watches the clock can renew in time.
            self._expire_sessions(self.now())
            detail = f"the clock moved on {end - now:.0f} s to the end of {kind} {rec.label}"
        else:
            if fault.kind == "expire":
                self._end_on_cue(rec.label, "expired", CredentialExpired)
                detail = (
                    f"{kind} {rec.label} expired on cue (the clock cannot move: the test "
                    "does not run on mgmt_clock)"
                )
            else:
                self._end_on_cue(rec.label, "revoked", CredentialRevoked)
                detail = f"{kind} {rec.label} revoked on cue"
        self._record(
            ScheduledFaultFired(
                at=to_datetime(self.now()),
                username=rec.username,
                fault=fault.kind,
                point=fault.point,
                detail=detail,
            )
        )

    # -- faults on cue (mgmt_server.fail_next, expire, lock, rotate_key...) ---------

    def auth_call_arrived(self) -> ScheduledFault | None:
        """Count an authentication call (``/v2/auth``, ``/v1/login``); the scheduled fault
        it triggers, if any (pass it to :meth:`take_fault`)."""
        return self.faults.auth_call()

    def take_fault(
        self,
        version: str,
        method: str,
        path: str,
        username: str | None,
        scheduled: ScheduledFault | None = None,
    ) -> FiredFault | None:
        """The scripted fault this ``/v2/auth`` or ``/v1/login`` call gets, recorded in
        the timeline; ``None`` when the call is answered normally. A ``scheduled`` fault
        (from :meth:`auth_call_arrived`) comes first."""
        with self._lock:
            if scheduled is not None:
                answer = scheduled_failure(scheduled)
                if answer is not None:
                    self._record(
                        ScheduledFaultFired(
                            at=to_datetime(self.now()),
                            username=username if username in self.accounts else None,
                            fault=scheduled.kind,
                            point=scheduled.point,
                            detail=f"{method} {path} answered {answer.describe()}",
                        )
                    )
                    return FiredFault(answer, 1)
            fired = self.faults.take(version)
            if fired is not None:
                self._record(
                    FaultInjected(
                        at=to_datetime(self.now()),
                        username=username if username in self.accounts else None,
                        method=method,
                        path=path,
                        fault=fired.fault.kind,
                        detail=fired.fault.describe(),
                        ordinal=fired.ordinal,
                        count=fired.fault.count,
                    )
                )
            return fired

    def find_credential(self, credential: str) -> TokenRecord | SessionRecord:
        """A token or session of this test by its value (the JWT, the JSESSIONID) or its
        label (``T1``, ``S1``); ValueError naming the known labels if none matches."""
        with self._lock:
            if not isinstance(credential, str) or not credential:
                raise TypeError(
                    "expects a token (the JWT), a JSESSIONID or a label like 'T1' / 'S1', "
                    f"got {credential!r}"
                )
            for rec in self.tokens.values():
                if credential in (rec.token, rec.label):
                    return rec
            for srec in self.sessions.values():
                if credential in (srec.session_id, srec.label, srec.utk):
                    return srec
            labels = [r.label for r in self.tokens.values()]
            labels += [r.label for r in self.sessions.values()]
            shown = credential if len(credential) <= 4 else fingerprint(credential)
            raise ValueError(
                f"no token or session of this test is {shown}; known: "
                f"{', '.join(labels) or 'none (nothing was granted yet)'}"
            )

    def expire(self, credential: str) -> str:
        """End a token or session now, as if its lifetime had run out; returns its label.
        Later calls with it get 401 (1401); re-authenticating is not churn."""
        return self._end_on_cue(credential, "expired", CredentialExpired)

    def revoke(self, credential: str) -> str:
        """Revoke a token or session now; returns its label. Later calls with it get 401
        (1401); re-authenticating is not churn."""
        return self._end_on_cue(credential, "revoked", CredentialRevoked)

    def _end_on_cue(
        self,
        credential: str,
        how: str,
        event: type[CredentialExpired] | type[CredentialRevoked],
    ) -> str:
        if not isinstance(credential, str):
            raise TypeError(
                f"{how[:-1]}() takes a token or JSESSIONID (a str), got {type(credential).__name__}"
            )
        with self._lock:
            now = self.now()
            self._expire_sessions(now)
            rec = self.find_credential(credential)
            if isinstance(rec, TokenRecord):
                # Tokens keep expiry and revocation apart: the refusal says which.
                if how == "expired" and rec.expired_at is None:
                    rec.expired_at = now
                elif how == "revoked" and rec.revoked_at is None:
                    rec.revoked_at = now
                version = rec.version
            else:
                if rec.ended_at is None:
                    rec.ended_at = now
                    rec.end_reason = how
                version = "v1"
            self._record(
                event(
                    at=to_datetime(now),
                    username=rec.username,
                    credential=rec.label,
                    version=version,
                )
            )
            return rec.label

    def _known_account(self, username: str) -> Account:
        account = self.accounts.get(username)
        if account is None:
            raise ValueError(self._unknown_account(username))
        return account

    def lock(self, username: str, *, seconds: float | None = None) -> None:
        """Lock the account now: ``/v1/login`` answers 1402 until :meth:`unlock`, or for
        ``seconds`` of simulated time. ``/v2/auth`` is not affected (the service's lockout
        is a v1 login rule)."""
        with self._lock:
            self._known_account(username)
            if seconds is not None:
                seconds = check_seconds("seconds", seconds, what="lock()")
            now = self.now()
            end = math.inf if seconds is None else now + seconds
            # Everything that can fail is done before the state changes.
            event = AccountLockedManually(
                at=to_datetime(now),
                username=username,
                until=None if seconds is None else to_datetime(end),
            )
            self._manual_locks[username] = (now, end)
            self._record(event)

    def unlock(self, username: str) -> None:
        """End any lock of the account (on cue or after failed logins) and forget its
        failed logins."""
        with self._lock:
            self._known_account(username)
            self._manual_locks.pop(username, None)
            self._lockouts.pop(username, None)
            self._failed_logins[username] = 0
            self._record(AccountUnlocked(at=to_datetime(self.now()), username=username))

    def _check_manual_lock(self, username: str, now: float) -> None:
        lock = self._manual_locks.get(username)
        if lock is None or now >= lock[1]:
            return
        start, end = lock
        until = "until unlocked" if end == math.inf else f"until {self._offset(end)}"
        reason = f"account locked on cue since {self._offset(start)}, {until}"
        self._record(
            LoginRejected(
                at=to_datetime(now), username=username, return_code=LOCKED_OUT, reason=reason
            )
        )
        raise Refusal(401, LOCKED_OUT, reason, message=self._lockout_message())

    def rotate_secret(self, username: str, secret: str, new_value: str | None = None) -> Account:
        """Replace the account's ``"API key"`` or ``"password"`` (generated unless given);
        the old one gets 1401 from now on. Credentials already granted stay valid."""
        with self._lock:
            account = self._known_account(username)
            if secret not in ("API key", "password"):
                raise ValueError(f"secret must be 'API key' or 'password', got {secret!r}")
            if new_value is not None and (not isinstance(new_value, str) or not new_value):
                raise ValueError(f"the new {secret} must be a non-empty str, got {new_value!r}")
            old = account.api_key if secret == "API key" else account.password
            if new_value is None:
                new_value = generate_api_key() if secret == "API key" else generate_password()
            if new_value == old:
                raise ValueError(f"the new {secret} is the account's current one")
            if secret == "API key":
                rotated = dataclasses.replace(account, api_key=new_value)
            else:
                rotated = dataclasses.replace(account, password=new_value)
            self.accounts[username] = rotated
            self._hold_secrets(new_value)
            now = self.now()
            self._rotated.setdefault((username, secret), []).append((old, now))
            self._record(
                SecretRotated(
                    at=to_datetime(now),
                    username=username,
                    secret=secret,
                    old_fingerprint=fingerprint(old),
                    new_fingerprint=fingerprint(new_value),
                )
            )
            return rotated

    def _secret_problem(
        self,
        username: str,
        secret: str,
        expected: str,
        received: str,
        client: ClientKind = ClientKind.OTHER,
    ) -> str:
        """diagnose_secret, knowing that a rotated-out secret is an old one, not a typo."""
        if received == expected:
            return ""
        for old, when in reversed(self._rotated.get((username, secret), [])):
            if received == old:
                return (
                    f"this is the account's old {secret} ({fingerprint(old)}), replaced at "
                    f"{self._offset(when)} by rotation: use the current one"
                )
        now = self.now()
        recent = self._diagnosed.setdefault((username, secret), deque())
        while recent and recent[0] <= now - DIAGNOSIS_WINDOW:
            recent.popleft()
        if len(recent) >= DIAGNOSIS_BUDGET:
            return paused_diagnosis(secret, DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW)
        recent.append(now)
        return diagnose_secret(secret, expected, received, client)

    # -- queries -------------------------------------------------------------------

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        if version not in (None, "v1", "v2", "v3"):
            raise ValueError(f"version must be 'v1', 'v2', 'v3' or None, got {version!r}")
        return sum(
            1
            for e in self.events
            if isinstance(e, (TokenIssued, LoggedIn))
            and (version is None or _grant_version(e) == version)
            and (username is None or e.username == username)
        )

    def _offset(self, timestamp: float) -> str:
        # Whole seconds from the test's start, or from an earlier event if the clock was
        # set back (mgmt_clock starts on a whole second, possibly before this service was
        # made): never "-00:00:00", and the same origin as the assertions' timelines.
        first = min((e.at.timestamp() for e in self._events), default=self.started_at)
        return format_offset(timestamp - math.floor(min(self.started_at, first)))


def _grant_version(event: TokenIssued | LoggedIn) -> str:
    return event.version if isinstance(event, TokenIssued) else "v1"


def _auth_endpoint(version: str) -> str:
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


def format_offset(seconds: float) -> str:
    """Simulated time since the test started, as ``HH:MM:SS``."""
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    return f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"
