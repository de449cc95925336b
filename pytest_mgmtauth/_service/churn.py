"""Grant ordering: serials and ticks, the credentials an account still holds, the one
in use, session idle expiry, and refused calls (which release held credentials)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NoReturn

from .account_book import AccountBook
from .clock import to_datetime
from .events import (
    ApiCall,
    Event,
    SessionExpired,
)
from .records import AUTH_FAILED, FORBIDDEN, SessionRecord, TokenRecord

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class Call:
    """A protected call being authorized: what its refusal records."""

    version: str
    method: str
    path: str
    now: float


class GrantOrdering(AccountBook):
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
        version: str,
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

    def _held_sessions(self, username: str, now: float, version: str) -> list[SessionRecord]:
        """Sessions the account still holds: active, not refused, not near idle timeout."""
        refused = self._last_refusal.get((username, version), 0)
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

    def _idle_sessions(self, now: float) -> list[SessionRecord]:
        """Active sessions whose idle timeout has passed by ``now``."""
        timeout = self.options.session_timeout
        return [
            rec
            for rec in self.sessions.values()
            if rec.ended_at is None and now >= rec.last_used + timeout
        ]

    def _session_expired(self, rec: SessionRecord) -> SessionExpired:
        return SessionExpired(
            at=to_datetime(rec.last_used + self.options.session_timeout),
            username=rec.username,
            session=rec.label,
        )

    def _due_events(self, now: float) -> list[Event]:
        return [self._session_expired(rec) for rec in self._idle_sessions(now)]

    def _expire_sessions(self, now: float) -> None:
        """Record the idle expiries due by ``now`` (every write calls it first)."""
        for rec in self._idle_sessions(now):
            self._record(self._session_expired(rec))
            rec.ended_at = rec.last_used + self.options.session_timeout
            rec.end_reason = "timeout"

    def _in_use(self, now: float) -> TokenRecord | SessionRecord | None:
        """The credential in use: the latest grant that has not ended."""
        live: list[TokenRecord | SessionRecord] = [
            r
            for r in self.tokens.values()
            if r.revoked_at is None and r.expired_at is None and now < r.claims.exp
        ]
        live += [r for r in self.sessions.values() if r.ended_at is None]
        return max(live, key=lambda r: r.serial, default=None)

    # -- shared --------------------------------------------------------------------

    def _refuse_call(
        self,
        call: Call,
        username: str | None,
        credential: str | None,
        reason: str,
        *,
        expired: bool = False,
        code: int = AUTH_FAILED,
    ) -> NoReturn:
        """Refuse a protected call with 401. A 1401 releases the account's credentials
        granted so far (replacing them is no churn); a 1469 (``code=FORBIDDEN``) does not:
        the credential was good."""
        if username is not None and code == AUTH_FAILED:
            self._last_refusal[(username, call.version)] = self._serial
        self._refuse(
            ApiCall(
                at=to_datetime(call.now),
                username=username,
                method=call.method,
                path=call.path,
                version=call.version,
                credential=credential,
                status=401,
                return_code=code,
                reason=reason,
                credential_expired=expired,
            ),
            code,
            reason,
        )

    def _check_permission(
        self, call: Call, username: str, credential: str, permission: str | None
    ) -> None:
        if self.accounts[username].has_permission(permission):
            return
        reason = f"account {username!r} lacks the permission {permission!r} this route needs"
        self._refuse_call(call, username, credential, reason, code=FORBIDDEN)
