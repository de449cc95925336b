"""The grant rule, which any flow calls once its checks passed (the account, the secret,
the flow's own rules): it turns a credential the flow made into a grant of this test.

Contract. The flow supplies what only it knows: the credential's value (a signed JWT
with its claims, an opaque id, a cookie) and its lifetime, and for a credential
that is not a JWT, that it is a secret to mask. The rule does everything else, so a
grant of any flow is counted, judged and faulted alike:

- the throttle re-check (429 after ``throttle`` premature grants within the window),
  read at the moment the grant takes effect;
- churn: the account's credentials of the same flow (same account and profile, same
  scopes) still valid and farther than the flow's refresh margin from their end;
- concurrency: the grants issued while this request was in flight;
- the record (labelled ``T<n>``), its place in the test's order (serial and tick), and
  its expiry: a presented credential is refused after ``expires_at``;
- holding the secret, so no log or event shows it;
- the :class:`~.events.TokenIssued` event and the fault hook (a ``fail_next`` or
  ``malformed_next`` aimed at grants, a scheduled fault counting grants).

v1 sessions, which end when idle rather than at a fixed time, go through
:meth:`Grants.session`: the same order, churn, event-and-fault steps, with
:class:`~.records.SessionRecord`.

Call :meth:`Grants.token` with or without the service's lock held (it takes it): a
flow that signs should sign before, outside the lock, as signing is most of a grant's
cost."""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import TYPE_CHECKING

from .events import LoggedIn, TokenIssued
from .records import SessionRecord, TokenRecord
from .timeline import to_datetime
from .token_format import Claims

if TYPE_CHECKING:
    import threading

    from .credentials import Credentials
    from .fault_runner import FaultRunner
    from .flows.base import Flow
    from .options import Options
    from .timeline import Timeline


@dataclasses.dataclass(eq=False)
class Grants:
    """Grants of every flow in one test: one rule for counting, churn, expiry, masking,
    the event and the fault hook."""

    _timeline: Timeline
    _credentials: Credentials
    _faults: FaultRunner
    _options: Options
    _lock: threading.RLock

    def token(
        self,
        flow: Flow,
        username: str,
        value: str,
        *,
        lifetime: float | None = None,
        claims: Claims | None = None,
        arrived: int | None = None,
        account: str | None = None,
        profile: str | None = None,
        scopes: tuple[str, ...] = (),
        margin: float | None = None,
        secret: bool = False,
    ) -> TokenRecord:
        """Grant ``value`` to ``username`` for ``flow``, now (the clock is read under the
        lock). Either ``claims`` (of a signed JWT: its ``exp`` ends it) or ``lifetime``
        (seconds from now, for an opaque value) is given. ``arrived``: the tick of the
        request (:meth:`Credentials.request_arrived`); ``account``, ``profile``,
        ``scopes``: what the credential is bound to (churn counts per binding);
        ``margin``: the refresh margin of this credential if not the flow's
        (:meth:`Flow.churn_margin`); ``secret``:
        mask ``value`` by name (a JWT is masked by its shape already). May refuse with
        429 (throttled)."""
        credentials = self._credentials
        with self._lock:
            now = self._timeline.now()
            credentials.check_throttle(flow, username, now)
            if claims is None:
                if lifetime is None:
                    raise TypeError("Grants.token needs the claims of a JWT or a lifetime")
                # sub, iat, nbf, exp, jti: the value is its own id.
                claims = Claims(username, int(now), int(now), int(now + lifetime), value)
            if margin is None:
                margin = flow.churn_margin(self._options)
            # Churn and concurrency count per binding: holding one token for each of
            # several profiles, or sets of scopes, is no churn.
            binding = (flow.name, account, profile, frozenset(scopes))
            same = [
                r
                for r in credentials.tokens.values()
                if r.username == username
                and (r.version, r.account, r.profile, frozenset(r.scopes)) == binding
            ]
            refused = credentials.last_refusal.get((username, flow.name), 0)
            held = [
                r
                for r in same
                if r.revoked_at is None
                and r.expired_at is None
                and r.serial > refused
                and now < r.claims.exp - margin
            ]
            concurrent = (
                () if arrived is None else tuple([r.label for r in same if r.issued_tick > arrived])
            )
            serial, tick = credentials.next_grant()
            record = TokenRecord(
                label=f"T{len(credentials.tokens) + 1}",
                token=value,
                claims=claims,
                username=username,
                serial=serial,
                issued_tick=tick,
                version=flow.name,
                account=account,
                profile=profile,
                issued_at=now,
                scopes=scopes,
            )
            credentials.tokens[claims.jti] = record
            credentials.by_token[value] = record
            if held:
                credentials.premature.setdefault((username, flow.name), deque()).append(now)
            if secret:
                self._timeline.hold_secrets(value)
            self._timeline.record(
                TokenIssued(
                    at=to_datetime(now),
                    username=username,
                    token=record.label,
                    fingerprint=record.fingerprint,
                    expires_at=to_datetime(claims.exp),
                    while_valid=tuple(r.label for r in held),
                    concurrent_with=concurrent,
                    version=flow.name,
                    account=account,
                    profile=profile,
                    scopes=scopes,
                )
            )
            self._faults.granted()
            return record

    def session(
        self,
        flow: Flow,
        username: str,
        session_id: str,
        utk: str,
        *,
        arrived: int | None = None,
    ) -> SessionRecord:
        """Start a v1-style session (``session_id`` and its ``utk``, both secrets) that
        ends when idle for ``session_timeout``. Call it holding the service's lock, after
        :meth:`Credentials.expire_sessions`."""
        credentials = self._credentials
        with self._lock:
            now = self._timeline.now()
            refused = credentials.last_refusal.get((username, flow.name), 0)
            timeout, margin = self._options.session_timeout, self._options.margin
            mine = [r for r in credentials.sessions.values() if r.username == username]
            held = [
                r
                for r in mine
                if r.ended_at is None
                and r.serial > refused
                and now < r.last_used + timeout - margin
            ]
            concurrent = (
                () if arrived is None else tuple([r.label for r in mine if r.issued_tick > arrived])
            )
            serial, tick = credentials.next_grant()
            record = SessionRecord(
                label=f"S{len(credentials.sessions) + 1}",
                session_id=session_id,
                utk=utk,
                username=username,
                started_at=now,
                last_used=now,
                serial=serial,
                issued_tick=tick,
                version=flow.name,
            )
            credentials.sessions[session_id] = record
            self._timeline.hold_secrets(session_id, utk)
            self._timeline.record(
                LoggedIn(
                    at=to_datetime(now),
                    username=username,
                    session=record.label,
                    fingerprint=record.fingerprint,
                    while_valid=tuple(r.label for r in held),
                    concurrent_with=concurrent,
                )
            )
            self._faults.granted()
            return record
