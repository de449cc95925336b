"""The bearer-token flow v2, v3 and OAuth share: a JWT signed for a secret, handed to the
grant rule (``grants.py``), and presented as a bearer token (the checks of a presented
token, the refusals that name it). Reading ``Authorization: Bearer`` is
``bearer_header.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, NoReturn

from ..accounts import format_scopes
from ..records import AUTH_FAILED, Authorization, TokenRecord
from ..secret_text import ClientKind
from ..token_format import ALGORITHM, TokenProblem, unverified_subject
from .base import HTTP_WHITESPACE, Credential, Flow
from .bearer_header import BearerToken, read_bearer

__all__ = ["BearerFlow", "BearerToken"]

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..accounts import Account
    from ..credentials import Call
    from ..limits import SecretKind
    from ..options import Options
    from .base import Received


class BearerFlow(Flow):
    """What v2 and v3 share: a JWT granted for an API key, presented as a bearer token."""

    secret: ClassVar[SecretKind] = "API key"
    credential = "token"
    #: What its tokens are signed with (``token_format.HEADERS``).
    algorithm: ClassVar[str] = ALGORITHM
    #: The service does not publish a lockout of bearer grants.
    locks_out = False
    #: How its messages name the token in ``Authorization: Bearer <...>``.
    token_word: ClassVar[str] = "token"
    #: The error code its refused calls record (``ApiCall.error``); ``None``: the
    #: service's ``returnCode`` says it.
    refused_error: ClassVar[str | None] = None

    @classmethod
    def fix_refused(cls) -> str:
        return f"the bearer token of {cls.title}"

    @classmethod
    def token_source(cls) -> str:
        """Where its tokens come from, as a refusal's fix names it."""
        return f"the {cls.answer_field!r} field of {cls.title}'s answer"

    def read(self, received: Received) -> BearerToken:
        return read_bearer(received, self, self.token_word)

    def carried(self, received: Received) -> str | None:
        values = received.header("Authorization")
        if values and values[0].strip(HTTP_WHITESPACE).lower().startswith("bearer "):
            return "a bearer token"
        return None

    def owner(self, credential: Credential) -> tuple[str | None, str | None]:
        if isinstance(credential, BearerToken) and credential.token is not None:
            with self.service.mutex:
                record = self.service.credentials.by_token.get(credential.token)
            if record is not None:
                return record.username, record.label
        return None, None

    @classmethod
    def origin(cls, record: TokenRecord) -> str:
        """Where a token of this flow came from, for a refusal naming it."""
        return f"from {cls.title}"

    @classmethod
    def fix_churn(cls, options: Options) -> str:
        return (
            f"keep the token from {cls.title} and send it with every call; authenticate again "
            f"only within refresh_margin ({options.refresh_margin:g} s) of its expiry (the "
            f"JWT's exp claim, {options.token_ttl:g} s after issue) or after a call was "
            "answered 401 with returnCode 1401"
        )

    @classmethod
    def fix_expired(cls, options: Options) -> str:
        return (
            "refresh proactively: before a call, authenticate again when the token is "
            f"within refresh_margin ({options.refresh_margin:g} s) of its exp claim, "
            "instead of sending it until the service answers 401"
        )

    def check_scope(self, call: Call, record: TokenRecord) -> None:
        """Refuse a token of this flow used where it does not belong (v3: another
        account or profile); nothing by default."""

    def refuse_call(
        self,
        call: Call,
        username: str | None,
        credential: str | None,
        reason: str,
        *,
        expired: bool = False,
        wrong: bool = False,
    ) -> NoReturn:
        """Refuse a protected call: the service's 401 with 1401 by default (a flow with
        its own error shape answers in it). ``expired``, ``wrong``: as
        ``Credentials.refuse_call``."""
        self.service.credentials.refuse_call(
            call,
            username,
            credential,
            reason,
            expired=expired,
            wrong=wrong,
            error=self.refused_error,
        )

    def check_permission(self, call: Call, record: TokenRecord, permission: str | None) -> None:
        """1469 if the token's account lacks the route's ``permission``."""
        self.service.credentials.check_permission(call, record.username, record.label, permission)

    def grant_refused(
        self, account_record: Account, account: str | None, profile: str | None
    ) -> str | None:
        """Why this flow's own rules refuse a grant whose secret was right; ``None``: they
        do not. By default a token bound to an account and profile (v3's, SCIM's) goes
        only to an account that may use that profile."""
        if account is None or profile is None or account_record.may_use_profile(account, profile):
            return None
        return (
            f"account {account_record.username!r} may not get {self.grants_phrase} for "
            f"{account}/{profile}; it may for: "
            f"{format_scopes(account_record.profiles)} (add_account(profiles=...))"
        )

    def grant(
        self,
        username: str,
        key: str,
        account: str | None = None,
        profile: str | None = None,
        *,
        arrived: int | None = None,
        client: ClientKind = ClientKind.OTHER,
    ) -> tuple[str, TokenRecord]:
        """A new bearer token (v3: bound to ``account`` and ``profile``), or
        :class:`Refusal`. ``arrived`` is the :meth:`request_arrived` tick of the request
        (without it the grant cannot be part of a thundering herd); ``client`` picks the
        idiom of a wrong key's fix. Lifetime, reuse and throttling are the grant rule's;
        v3's churn is counted per account and profile."""
        service = self.service
        with service.mutex:
            now = service.timeline.now()
            refuse = self.refuse_auth(now, account=account, profile=profile)
            found = self.check_account(
                username, key, now=now, client=client, refuse=refuse, throttle=True
            )
            refused = self.grant_refused(found, account, profile)
            if refused:
                refuse(username, AUTH_FAILED, refused)
        return self.issue_token(username, now, arrived=arrived, account=account, profile=profile)

    def issue_token(
        self,
        username: str,
        now: float,
        *,
        arrived: int | None,
        account: str | None = None,
        profile: str | None = None,
        scopes: tuple[str, ...] = (),
        ttl: float | None = None,
        margin: float | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> tuple[str, TokenRecord]:
        """Issue a token to ``username`` whose grant passed every check, requested at
        ``now``: sign it, then record it, its churn (same account and profile, or same
        scopes) and its place among concurrent grants. ``ttl``, ``margin``: the
        lifetime and refresh margin of this flow's tokens if not ``token_ttl`` and
        ``refresh_margin``; ``extra``: more claims. Call it without holding the
        service's lock."""
        service = self.service
        lifetime = int(service.options.token_ttl if ttl is None else ttl)
        # Signed outside the lock: the signature is most of a grant's cost, and the test's
        # other requests (other accounts' grants, protected calls) need not queue behind
        # it. The grant takes effect below, when it is recorded: what it is judged
        # against (tokens held, grants in flight, the throttle window) is read then.
        issuer = service.options.issuer
        if extra or self.algorithm != ALGORITHM:
            token, claims = service.signer.issue_with(
                username, int(now), lifetime, extra or {}, issuer=issuer, algorithm=self.algorithm
            )
        else:
            token, claims = service.signer.issue(username, int(now), lifetime, issuer=issuer)
        record = service.grants.token(
            self,
            username,
            token,
            claims=claims,
            arrived=arrived,
            account=account,
            profile=profile,
            scopes=scopes,
            margin=margin,
        )
        return token, record

    def authorize(
        self, credential: Credential, call: Call, permission: str | None
    ) -> Authorization:
        assert isinstance(credential, BearerToken)
        service = self.service
        token, problem = credential.token, credential.problem
        with service.mutex:
            if token is None or problem:
                self._refuse_unread(call, credential)
            assert token is not None
            record = service.credentials.by_token.get(token)
            if record is not None:
                claims = record.claims  # issued in this test, exactly this string
            else:
                try:
                    claims = service.signer.verify(
                        token,
                        issuer=service.options.issuer,
                        algorithm=self.algorithm,
                        source=self.token_source(),
                    )
                except TokenProblem as exc:
                    sub = unverified_subject(token)
                    self.refuse_call(
                        call, sub if sub in service.accounts else None, None, str(exc), wrong=True
                    )
                record = service.credentials.tokens.get(claims.jti)
            if record is None or record.token != token:
                self.refuse_call(
                    call,
                    claims.sub if claims.sub in service.accounts else None,
                    None,
                    "the token was signed by this fake but not issued in this test (each "
                    f"test starts with no tokens): authenticate with {self.title} in this test",
                    wrong=True,
                )
            if record.version != self.name:
                self.refuse_call(
                    call, record.username, record.label, self.wrong_flow_reason(record), wrong=True
                )
            self.check_scope(call, record)
            self._check_live(call, record)
            self.check_permission(call, record, permission)
            record.uses += 1
            return Authorization(record.username, self.name, record.label)

    def origin_of(self, record: TokenRecord) -> str:
        """Where any flow's token came from (its own flow says)."""
        other = self.service.flows[record.version]
        assert isinstance(other, BearerFlow)
        return other.origin(record)

    def wrong_flow_reason(self, record: TokenRecord) -> str:
        kind = self.service.flows[record.version].credential or "credential"
        return (
            f"{kind} {record.label} is a {record.version} {kind} ({self.origin_of(record)}): "
            f"this route takes a {self.name} {self.credential} from POST {self.title} (declare the "
            f"route with auth={record.version!r} if it is a {record.version} operation)"
        )

    def _check_live(self, call: Call, record: TokenRecord) -> None:
        """Refuse a revoked, expired or not yet valid token."""
        now, claims = call.now, record.claims
        named = f"{self.credential} {record.label}"  # one name per credential, per flow
        expired = False
        if record.revoked_at is not None:
            reason = f"{named} was revoked {now - record.revoked_at:.0f} s ago: authenticate again"
        elif record.expired_at is not None and now >= record.expired_at:
            # Ended early on cue: the client could not have seen it coming, so this
            # is no use of an expired token (expired=False) but a 401 to recover from.
            reason = (
                f"{named} expired {now - record.expired_at:.0f} s ago (ended "
                f"early on cue): authenticate again on a 401"
            )
        elif now >= claims.exp and record.expired_in_flight:
            reason = (
                f"{named} expired {now - claims.exp:.0f} s ago: a scheduled "
                "expire moved the clock to its exp while the answer that granted it was in "
                "flight (no client could renew it in time): authenticate again on a 401"
            )
        elif now >= claims.exp:
            reason = (
                f"{named} expired {now - claims.exp:.0f} s ago "
                f"({_lifetime(record)}): authenticate again before it expires, or on a 401"
            )
            expired = True
        elif now < claims.nbf:
            reason = f"{named} is not valid before its nbf"
        else:
            return
        self.refuse_call(call, record.username, record.label, reason, expired=expired)

    def _refuse_unread(self, call: Call, presented: BearerToken) -> NoReturn:
        token = presented.token
        owner, label = self._attribute_token(token) if token else (None, None)
        self.refuse_call(call, owner, label, presented.problem or "no bearer token", wrong=True)

    def _attribute_token(self, token: str) -> tuple[str | None, str | None]:
        """The account and label of a token presented in a malformed header."""
        service = self.service
        record = service.credentials.by_token.get(token)
        if record is not None:
            return record.username, record.label
        sub = unverified_subject(token)
        return (sub if sub in service.accounts else None), None


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
