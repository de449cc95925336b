"""The faults part of the service: it carries out the fault plan (scheduled faults at
their trigger points, scripted faults of auth calls) and ends credentials on cue."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .accounts import fingerprint
from .events import (
    SLEPT_IN_REAL_TIME,
    CredentialExpired,
    CredentialRevoked,
    FaultInjected,
    ScheduledFaultFired,
    Throttled,
    flow_credential,
)
from .faults import (
    CALL_ANSWERS,
    DEFAULT_RETRY_AFTER,
    FaultPlan,
    FiredFault,
    ScheduledFault,
    failure,
    scheduled_failure,
)
from .records import SessionRecord, TokenRecord
from .timeline import real_seconds, to_datetime

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from .account_book import AccountBook
    from .credentials import Credentials
    from .limits import EndOnCue
    from .options import Options
    from .timeline import Timeline


class FaultRunner:
    """Carries out one test's fault plan on its credentials and timeline."""

    def __init__(
        self,
        timeline: Timeline,
        accounts: AccountBook,
        credentials: Credentials,
        options: Options,
        lock: threading.RLock,
    ) -> None:
        self._timeline = timeline
        self._accounts = accounts
        self._credentials = credentials
        self._options = options
        self._lock = lock
        #: The last 429 a fault answered, per flow: when (simulated, and real seconds),
        #: and its Retry-After.
        self._throttled: dict[str, tuple[float, float, int]] = {}
        #: Scripted and scheduled faults (faults.py).
        self.plan = FaultPlan()
        #: Moves the clock forward by that many seconds and returns True, or returns
        #: False when the clock cannot be moved (the test does not run on mgmt_clock):
        #: a scheduled ``expire`` lets the credential's lifetime pass, or else ends it
        #: early on cue.
        self.advance: Callable[[float], bool] | None = None

    # -- scheduled faults (trigger points; mgmt_server.schedule_fault, sweeps) --------

    def schedule(self, fault: ScheduledFault) -> None:
        """Schedule ``fault`` at its point; calls already made count."""
        with self._lock:
            self.plan.schedule(fault)

    def granted(self) -> None:
        # Before protected call 1 is right after the first grant (if no call came yet),
        # while that grant's request is still being answered.
        if self.plan.protected_calls == 0:
            self._fire_before_call(1, in_flight=True)

    def protected_call_arrived(self) -> ScheduledFault | None:
        """Count a protected call that matched a route; the scheduled fault the transport
        must carry out on it (``reset``, ``busy``), already recorded, else ``None``."""
        with self._lock:
            fault = self.plan.protected_call()
            # An expire/revoke not fired yet (before call 1 without any grant) fires now.
            self._fire_before_call(self.plan.protected_calls)
            if fault is not None:
                self._record_fired(fault.kind, fault.point, CALL_ANSWERS[fault.kind])
            return fault

    def protected_call_answered(self) -> None:
        """A protected call was answered: what is due before the next one fires now,
        while the client reads the answer (so a client that renews before its token
        expires sees the new time before it sends the next call)."""
        with self._lock:
            self._fire_before_call(self.plan.protected_calls + 1)

    def schedule_move(self, seconds: float, index: int) -> None:
        """Move the clock on by ``seconds`` just before protected call ``index`` (when
        the clock can move; calls already made count)."""
        with self._lock:
            self.plan.schedule_move(index, seconds)

    def _fire_before_call(self, index: int, *, in_flight: bool = False) -> None:
        # The clock moves first: an expiry at the same point then ends what is in use
        # at the new time.
        moves, due = self.plan.before_call(index)
        for seconds in moves:
            self._move_clock(seconds, index)
        for fault in due:
            self._end_in_use(fault, in_flight=in_flight)

    def _move_clock(self, seconds: float, index: int) -> None:
        if self.advance is not None and self.advance(seconds):
            self._credentials.expire_sessions(self._timeline.now())
            detail = f"the clock moved on {seconds:g} s"
        else:
            detail = f"the clock could not move {seconds:g} s: the test does not run on mgmt_clock"
        self._record_fired("clock", f"call{index}", detail)

    def _record_fired(
        self, kind: str, point: str, detail: str, username: str | None = None
    ) -> None:
        self._timeline.record_now(
            lambda at: ScheduledFaultFired(
                at=at, username=username, fault=kind, point=point, detail=detail
            )
        )

    def _end_in_use(self, fault: ScheduledFault, *, in_flight: bool = False) -> None:
        now = self._timeline.now()
        self._credentials.expire_sessions(now)
        rec = self._credentials.in_use(now)
        if rec is None:
            self._record_fired(fault.kind, fault.point, "no credential was in use, nothing ended")
            return
        kind = flow_credential(rec.version)  # the flow's own word for it
        if isinstance(rec, TokenRecord):
            end = float(rec.claims.exp)
        else:
            end = rec.last_used + self._options.session_timeout
        if (
            fault.kind == "expire"
            and end > now
            and self.advance is not None
            and self.advance(end - now)
        ):
            # As if its lifetime had passed: the clock moves on to its end, so a client
            # that watches the clock can renew in time.
            self._credentials.expire_sessions(self._timeline.now())
            detail = f"the clock moved on {end - now:.0f} s to the end of {kind} {rec.label}"
            if in_flight and isinstance(rec, TokenRecord):
                # A client that got the token with this answer and sends it at once
                # (checking before it authenticated, not again after) cannot have
                # seen this coming: its refused call is a 401 to recover from.
                rec.expired_in_flight = True
                detail += " while the answer that granted it was in flight"
        else:
            how: EndOnCue = "expired" if fault.kind == "expire" else "revoked"
            self._end_on_cue(rec.label, how)
            detail = f"{kind} {rec.label} {how} on cue"
            if how == "expired":
                detail += " (the clock cannot move: the test does not run on mgmt_clock)"
        self._record_fired(fault.kind, fault.point, detail, rec.username)

    # -- faults on cue (mgmt_server.fail_next, expire, lock, rotate_key...) ---------

    def auth_call(
        self, version: str, method: str, path: str, username: Callable[[], str | None]
    ) -> FiredFault | None:
        """Count an authentication call of ``version``; the fault it takes, recorded, or
        None. ``username`` reads the call's username (for the timeline), asked only when
        a fault may be taken: the common call reads nothing more."""
        due = self.plan.auth_call()
        if due is None and not self.plan.any_for(version) and version not in self._throttled:
            return None
        return self.take_fault(version, method, path, username(), scheduled=due)

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
        (from ``plan.auth_call``) comes first."""
        with self._lock:
            if username not in self._accounts:
                username = None  # the timeline names known accounts only
            retry = self._retried_too_soon(version, username)
            if retry is not None:
                return retry
            answer = scheduled_failure(scheduled) if scheduled is not None else None
            if scheduled is not None and answer is not None:
                detail = f"{method} {path} answered {answer.describe()}"
                self._record_fired(scheduled.kind, scheduled.point, detail, username)
                fired: FiredFault | None = FiredFault(answer, 1)
            else:
                fired = self._take_scripted(version, method, path, username)
            if fired is not None and fired.fault.status == 429:
                # A throttled client must wait Retry-After: a retry before then gets 429
                # again, as a real throttle answers.
                asked = fired.fault.retry_after or DEFAULT_RETRY_AFTER
                self._throttled[version] = (self._timeline.now(), real_seconds(), asked)
            return fired

    def _retried_too_soon(self, version: str, username: str | None) -> FiredFault | None:
        window = self._throttled.get(version)
        if window is None:
            return None
        fired_at, real_at, asked = window
        now = self._timeline.now()
        if now >= fired_at + asked:
            del self._throttled[version]
            return None
        remaining = max(1, math.ceil(fired_at + asked - now))
        # A client that slept Retry-After in real time while the test's clock stood
        # still (mgmt_clock, freezegun) did wait: its sleep is the fault, not its manners.
        slept = real_seconds() - real_at
        real = round(slept, 3) if slept >= asked else None
        self._timeline.record(
            Throttled(
                at=to_datetime(now),
                username=username,
                retry_after=remaining,
                premature_grants=0,
                version=version,
                waited=round(now - fired_at, 3),
                asked=asked,
                waited_real=real,
            )
        )
        reason = f"retried {now - fired_at:g} s after a 429 with Retry-After {asked} s"
        if real is None:
            reason += ": wait Retry-After seconds before asking again"
        else:
            reason += f" on the test's clock, after {real:.1f} s of real time: {SLEPT_IN_REAL_TIME}"
        return FiredFault(failure(429, retry_after=remaining), 1, reason=reason)

    def _take_scripted(
        self, version: str, method: str, path: str, username: str | None
    ) -> FiredFault | None:
        fired = self.plan.take(version)
        if fired is not None:
            self._timeline.record_now(
                lambda at: FaultInjected(
                    at=at,
                    username=username,
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
            for rec in self._credentials.tokens.values():
                if credential in (rec.token, rec.label):
                    return rec
            for srec in self._credentials.sessions.values():
                if credential in (srec.session_id, srec.label, srec.utk):
                    return srec
            labels = [r.label for r in self._credentials.tokens.values()]
            labels += [r.label for r in self._credentials.sessions.values()]
            shown = credential if len(credential) <= 4 else fingerprint(credential)
            raise ValueError(
                f"no token or session of this test is {shown}; known: "
                f"{', '.join(labels) or 'none (nothing was granted yet)'}"
            )

    def expire(self, credential: str) -> str:
        """End a token or session now, as if its lifetime had run out; returns its label.
        Later calls with it get 401 (1401); re-authenticating is not churn."""
        return self._end_on_cue(credential, "expired")

    def revoke(self, credential: str) -> str:
        """Revoke a token or session now; returns its label. Later calls with it get 401
        (1401); re-authenticating is not churn."""
        return self._end_on_cue(credential, "revoked")

    def _end_on_cue(self, credential: str, how: EndOnCue) -> str:
        if not isinstance(credential, str):
            raise TypeError(
                f"{how[:-1]}() takes a token or JSESSIONID (a str), got {type(credential).__name__}"
            )
        with self._lock:
            now = self._timeline.now()
            self._credentials.expire_sessions(now)
            rec = self.find_credential(credential)
            if isinstance(rec, TokenRecord):
                # Tokens keep expiry and revocation apart: the refusal says which.
                if how == "expired" and rec.expired_at is None:
                    rec.expired_at = now
                elif how == "revoked" and rec.revoked_at is None:
                    rec.revoked_at = now
            else:
                if rec.ended_at is None:
                    rec.ended_at = now
                    rec.end_reason = how
            event = CredentialExpired if how == "expired" else CredentialRevoked
            self._timeline.record(
                event(
                    at=to_datetime(now),
                    username=rec.username,
                    credential=rec.label,
                    version=rec.version,
                )
            )
            return rec.label
