"""The credentials part of the service: the tokens and sessions granted in one test,
their order (serials and ticks), which an account still holds (churn), the one in use,
session idle expiry, and refused protected calls (which release held credentials)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, NoReturn

from .events import ApiCall, Event, SessionExpired, Throttled
from .records import AUTH_FAILED, FORBIDDEN, THROTTLE_WINDOW, SessionRecord, TokenRecord
from .timeline import to_datetime

if TYPE_CHECKING:
    import threading
    from collections import deque
    from collections.abc import Mapping

    from .account_book import AccountBook
    from .flows.base import Flow
    from .options import Options
    from .timeline import Timeline


@dataclasses.dataclass(frozen=True)
class Call:
    """A protected call being authorized: what its refusal records."""

    version: str
    method: str
    path: str
    now: float
    #: The path as the gateway reads it, normalised once by the transport (repeated
    #: slashes as one, dot segments removed, after percent-decoding): what a scope is
    #: derived from, never the un-normalised one.
    normalized: str
    #: The host it reached where that is not its flow's usual one (else ``None``).
    host: str | None = None
    #: The scope the route requires (``route(..., scope=...)``), for a flow whose
    #: tokens carry scopes; ``None``: none.
    scope: str | None = None


@dataclasses.dataclass(eq=False)
class Credentials:
    """Every token and session of one test, and the rules of holding them."""

    _timeline: Timeline
    _accounts: AccountBook
    _options: Options
    _lock: threading.RLock
    tokens: dict[str, TokenRecord] = dataclasses.field(default_factory=dict)  # by jti
    #: The same records by the exact token string: a token this test was issued is
    #: known without verifying its signature again.
    by_token: dict[str, TokenRecord] = dataclasses.field(default_factory=dict)
    sessions: dict[str, SessionRecord] = dataclasses.field(default_factory=dict)  # JSESSIONID
    #: Premature bearer grants in the throttling window, per (username, flow).
    premature: dict[tuple[str, str], deque[float]] = dataclasses.field(default_factory=dict)
    #: The serial of the last grant before a protected call by the account last got a
    #: 1401, per flow: credentials granted up to then may be replaced without it
    #: counting as churn (the grant rule reads it). Serials, not times: under a frozen
    #: clock everything happens at one instant.
    last_refusal: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    _serial: int = 0
    # Ticks order request arrivals and grants, for thundering-herd detection.
    _tick: int = 0

    def __post_init__(self) -> None:
        self._timeline.due = self._due_events

    # -- order and churn -----------------------------------------------------------

    def request_arrived(self) -> int:
        """A tick for a credential request that has just arrived (before its body is
        read); pass it to a flow's grant as ``arrived``."""
        with self._lock:
            self._tick += 1
            return self._tick

    def next_grant(self) -> tuple[int, int]:
        self._serial += 1
        self._tick += 1
        return self._serial, self._tick

    def check_throttle(self, flow: Flow, username: str, now: float) -> None:
        """The throttling rule: refuse (429) a grant to whom already got ``throttle``
        premature grants of ``flow`` within the window."""
        limit = self._options.throttle
        if limit is None:
            return
        window = self.premature.get((username, flow.name))
        if not window:
            return
        while window and window[0] <= now - THROTTLE_WINDOW:
            window.popleft()
        if len(window) >= limit:
            retry_after = max(1, math.ceil(window[0] + THROTTLE_WINDOW - now))
            self._timeline.refuse(
                Throttled(
                    at=to_datetime(now),
                    username=username,
                    retry_after=retry_after,
                    premature_grants=len(window),
                    version=flow.name,
                ),
                429,
                f"{len(window)} new {flow.credential or 'credential'}s within "
                f"{THROTTLE_WINDOW:g} s while the {flow.principal} held a valid one; reuse "
                f"the {flow.credential or 'credential'} until it is about to expire",
                message="Too many authentication requests",
                retry_after=retry_after,
                status=429,
            )

    # -- session idle expiry -------------------------------------------------------

    def _idle_sessions(self, now: float) -> list[SessionRecord]:
        timeout = self._options.session_timeout
        return [
            rec
            for rec in self.sessions.values()
            if rec.ended_at is None and now >= rec.last_used + timeout
        ]

    def _session_expired(self, rec: SessionRecord) -> SessionExpired:
        return SessionExpired(
            at=to_datetime(rec.last_used + self._options.session_timeout),
            username=rec.username,
            session=rec.label,
        )

    def _due_events(self, now: float) -> list[Event]:
        return [self._session_expired(rec) for rec in self._idle_sessions(now)]

    def expire_sessions(self, now: float) -> None:
        """Record the idle expiries due by ``now`` (every write calls it first)."""
        for rec in self._idle_sessions(now):
            self._timeline.record(self._session_expired(rec))
            rec.ended_at = rec.last_used + self._options.session_timeout
            rec.end_reason = "timeout"

    def in_use(self, now: float) -> TokenRecord | SessionRecord | None:
        """The credential in use: the latest grant that has not ended."""
        live: list[TokenRecord | SessionRecord] = [
            r
            for r in self.tokens.values()
            if r.revoked_at is None and r.expired_at is None and now < r.claims.exp
        ]
        live += [r for r in self.sessions.values() if r.ended_at is None]
        return max(live, key=lambda r: r.serial, default=None)

    # -- protected calls -----------------------------------------------------------

    def refuse_call(
        self,
        call: Call,
        username: str | None,
        credential: str | None,
        reason: str,
        *,
        expired: bool = False,
        wrong: bool = False,
        code: int = AUTH_FAILED,
        status: int = 401,
        error: str | None = None,
        body: Mapping[str, object] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        message: str | None = None,
        then: Event | None = None,
    ) -> NoReturn:
        """Refuse a protected call with 401 (or ``status``). A 1401 releases the account's
        credentials granted so far (replacing them is no churn); a 1469
        (``code=FORBIDDEN``) does not: the credential was good. ``expired``: the client
        sent a credential whose end it could have seen; ``wrong``: one that was never good
        for this call (both are findings; neither is a refusal the test brought about on
        cue). A flow that answers in another error shape passes its ``error`` code,
        ``body`` and ``headers``; ``message`` replaces the service's text of ``code``
        and ``then`` is recorded after the call (a lockout)."""
        if username is not None and code == AUTH_FAILED:
            self.last_refusal[(username, call.version)] = self._serial
        self._timeline.refuse(
            ApiCall(
                at=to_datetime(call.now),
                username=username,
                method=call.method,
                path=call.path,
                version=call.version,
                credential=credential,
                status=status,
                return_code=code,
                reason=reason,
                credential_expired=expired,
                wrong_credential=wrong,
                host=call.host,
                error=error,
            ),
            code,
            reason,
            status=status,
            body=body,
            headers=headers,
            message=message,
            then=then,
        )

    def check_permission(
        self,
        call: Call,
        username: str,
        credential: str,
        permission: str | None,
        *,
        status: int = 401,
        error: str | None = None,
    ) -> None:
        """Refuse a call whose account lacks ``permission`` with 1469: as 401 (v1, v2:
        the interface document) or ``status`` with ``error`` (v3's 403 Forbidden)."""
        if self._accounts[username].has_permission(permission):
            return
        reason = f"account {username!r} lacks the permission {permission!r} this route needs"
        self.refuse_call(
            call, username, credential, reason, code=FORBIDDEN, status=status, error=error
        )
