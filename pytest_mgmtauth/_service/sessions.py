"""The v1 session desk: login, logout, authorizing calls, lockouts (after failed
logins and on cue)."""

from __future__ import annotations

import math
from typing import NoReturn

from .accounts import (
    generate_session_id,
    generate_utk,
)
from .churn import Call
from .clock import to_datetime
from .diagnosis import ClientKind
from .events import (
    AccountLocked,
    AccountLockedManually,
    AccountUnlocked,
    LoggedIn,
    LoggedOut,
    LoginRejected,
    LogoutRejected,
)
from .fault_plan import FaultDesk
from .options import check_seconds
from .records import (
    AUTH_FAILED,
    LOCKED_OUT,
    SERVICE_MESSAGES,
    Authorization,
    SessionRecord,
)


class SessionDesk(FaultDesk):
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
                self._reject_login(now, None, AUTH_FAILED, reason)
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
                self._reject_login(now, username, LOCKED_OUT, reason)
            problem = self._secret_problem(username, "password", account.password, password, client)
            if problem:
                failures = self._failed_logins.get(username, 0) + 1
                self._failed_logins[username] = failures
                locked = None
                if failures >= self.options.lockout_threshold:
                    until = now + self.options.lockout_duration
                    self._lockouts[username] = (now, until)
                    self._failed_logins[username] = 0
                    self._attempts_while_locked[username] = 0
                    locked = AccountLocked(
                        at=to_datetime(now),
                        username=username,
                        failures=failures,
                        until=to_datetime(until),
                    )
                self._reject_login(now, username, AUTH_FAILED, problem, then=locked)
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
                self._refuse(
                    LogoutRejected(
                        at=to_datetime(now),
                        username=record.username if record else None,
                        reason=reason,
                    ),
                    AUTH_FAILED,
                    reason,
                )
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
            call = Call("v1", method, path, now)
            if session_id is None or problem:
                known = self.sessions.get(session_id) if session_id else None
                self._refuse_call(
                    call,
                    known.username if known else None,
                    known.label if known else None,
                    problem or "no JSESSIONID cookie",
                )
            assert session_id is not None
            record = self.sessions.get(session_id)
            if record is None:
                self._refuse_call(
                    call,
                    None,
                    None,
                    "the JSESSIONID cookie names no session of this test: send the "
                    "JSESSIONID value from /v1/login's Set-Cookie",
                )
            if record.ended_at is not None:
                how = {
                    "logout": "ended by /v1/logout",
                    "timeout": f"expired after {self.options.session_timeout:g} s idle",
                    "revoked": "revoked",
                    "expired": "expired (ended early on cue)",
                }.get(record.end_reason or "", "ended")
                self._refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"session {record.label} {how} {now - record.ended_at:.0f} s ago: log in again",
                    # Revoked or expired on cue: the client could not have known.
                    expired=record.end_reason in ("logout", "timeout"),
                )
            if not utk:
                self._refuse_call(
                    call,
                    record.username,
                    record.label,
                    "the utk query parameter is missing: v1 calls need both the JSESSIONID "
                    "cookie and utk=<the utk of /v1/login's answer>",
                )
            if utk != record.utk:
                owner = next((r for r in self.sessions.values() if r.utk == utk), None)
                detail = f"it is the utk of session {owner.label}" if owner else "no session has it"
                self._refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"the utk does not belong to session {record.label} ({detail}): send the "
                    "utk that came with this JSESSIONID",
                )
            self._check_permission(call, record.username, record.label, permission)
            record.uses += 1
            record.last_used = now
            return Authorization(record.username, "v1", record.label)

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
        self._reject_login(now, username, LOCKED_OUT, reason)

    def _reject_login(
        self,
        now: float,
        username: str | None,
        code: int,
        reason: str,
        *,
        then: AccountLocked | None = None,
    ) -> NoReturn:
        """Refuse a ``/v1/login`` with ``code`` (a 1402 with the service's lockout text)."""
        self._refuse(
            LoginRejected(at=to_datetime(now), username=username, return_code=code, reason=reason),
            code,
            reason,
            message=self._lockout_message() if code == LOCKED_OUT else None,
            then=then,
        )
