"""v1: ``POST /v1/login`` with username and password -> a ``JSESSIONID`` cookie and a
``utk``, presented on every call, ended by ``POST /v1/logout``; lockouts after failed
logins."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NoReturn

from ..accounts import generate_session_id, generate_utk
from ..events import AccountLocked, LoggedIn, LoggedOut, LoginRejected, LogoutRejected
from ..records import AUTH_FAILED, LOCKED_OUT, SERVICE_MESSAGES, Authorization, SessionRecord
from ..secret_text import ClientKind
from ..timeline import to_datetime
from .base import COOKIE_PATH, REMEMBER_ME, Answer, Endpoint, Flow, Incoming, Presented

if TYPE_CHECKING:
    from ..credentials import Call
    from ..options import Options


class V1Flow(Flow):
    name = "v1"
    title = "/v1/login"
    path_title = "/v1/login"
    secret = "password"
    credential = "session"
    presents = "session"
    route_prefix = "/v1/"
    auth_hosts = ("api.tealiumiq.com",)
    #: Public v1 clients send their later calls (utk, JSESSIONID) to my.tealiumiq.com,
    #: and those of SSO customers to sso.tealiumiq.com.
    api_hosts = ("api.tealiumiq.com", "my.tealiumiq.com", "sso.tealiumiq.com")
    grants_phrase = "/v1/login sessions"
    endpoints = (
        Endpoint("login", "/v1/login", form=("username", "password")),
        Endpoint("logout", "/v1/logout", fault_point=False),
    )

    @classmethod
    def fix_churn(cls, options: Options) -> str:
        return (
            "keep the JSESSIONID and utk of one /v1/login for every v1 call; log in again "
            "only after /v1/logout, or after a call was answered 401 with returnCode 1401"
        )

    @classmethod
    def fix_expired(cls, options: Options) -> str:
        return (
            "after /v1/logout or an idle timeout the session is gone: log in again before "
            "the next call instead of presenting the old JSESSIONID"
        )

    def login(
        self,
        username: str,
        password: str,
        *,
        arrived: int | None = None,
        client: ClientKind = ClientKind.OTHER,
    ) -> SessionRecord:
        """A new session, or :class:`Refusal` (1401, 1402); ``client`` picks the idiom of
        a wrong password's fix."""
        service = self.service
        with service.mutex:
            now = service.now()
            service.credentials.expire_sessions(now)
            account = service.accounts.get(username)
            if account is None:
                reason = service.accounts.unknown_account(username)
                self._reject_login(now, None, AUTH_FAILED, reason)
            self._check_manual_lock(username, now)
            lockout = service.accounts.lockouts.get(username)
            if lockout is not None and now < lockout[1]:
                start, end = lockout
                attempts = service.accounts.attempts_while_locked.get(username, 0) + 1
                service.accounts.attempts_while_locked[username] = attempts
                hammering = ""
                if attempts > 1:
                    # A client that retries /v1/login in a loop on 1402 hammers the
                    # service for nothing: say so, with the count.
                    hammering = (
                        f"; the client is still hammering the locked account: {attempts} "
                        f"login attempts since the lockout began, stop retrying on 1402"
                    )
                offset = service.timeline.offset
                reason = (
                    f"account locked since {offset(start)} until {offset(end)} after "
                    f"{service.options.lockout_threshold} failed logins; attempts during a "
                    f"lockout do not end it sooner: wait {math.ceil(end - now)} s{hammering}"
                )
                self._reject_login(now, username, LOCKED_OUT, reason)
            problem = service.accounts.secret_problem(
                username, self.secret, account.password, password, client
            )
            if problem:
                self._count_failure(now, username, problem)
            service.accounts.failed_logins[username] = 0
            held = service.credentials.held_sessions(username, now, self.name)
            concurrent = service.credentials.concurrent(
                service.credentials.sessions.values(), username, arrived
            )
            serial, tick = service.credentials.next_grant()
            record = SessionRecord(
                label=f"S{len(service.credentials.sessions) + 1}",
                session_id=generate_session_id(),
                utk=generate_utk(),
                username=username,
                started_at=now,
                last_used=now,
                serial=serial,
                issued_tick=tick,
                version=self.name,
            )
            service.credentials.sessions[record.session_id] = record
            service.timeline.hold_secrets(record.session_id, record.utk)
            service.timeline.record(
                LoggedIn(
                    at=to_datetime(now),
                    username=username,
                    session=record.label,
                    fingerprint=record.fingerprint,
                    while_valid=tuple(r.label for r in held),
                    concurrent_with=concurrent,
                )
            )
            service.fault_runner.granted()
            return record

    def _count_failure(self, now: float, username: str, problem: str) -> NoReturn:
        """A wrong password: one step towards a lockout, then the refusal."""
        service = self.service
        failures = service.accounts.failed_logins.get(username, 0) + 1
        service.accounts.failed_logins[username] = failures
        locked = None
        if failures >= service.options.lockout_threshold:
            until = now + service.options.lockout_duration
            service.accounts.lockouts[username] = (now, until)
            service.accounts.failed_logins[username] = 0
            service.accounts.attempts_while_locked[username] = 0
            locked = AccountLocked(
                at=to_datetime(now),
                username=username,
                failures=failures,
                until=to_datetime(until),
            )
        self._reject_login(now, username, AUTH_FAILED, problem, then=locked)

    def answer_login(self, incoming: Incoming) -> Answer:
        session = self.login(
            incoming.form["username"],
            incoming.form["password"],
            arrived=incoming.arrived,
            client=incoming.client,
        )
        # JSESSIONID first and on its own header line: working clients of the real service
        # match '^JSESSIONID=([^;]*);' over the Set-Cookie lines.
        cookie = f"JSESSIONID={session.session_id}; Path={COOKIE_PATH}; Secure; HttpOnly"
        return Answer({"utk": session.utk}, cookies=(cookie, REMEMBER_ME))

    def logout(self, session_id: str | None, *, problem: str | None = None) -> SessionRecord:
        """End the session of the JSESSIONID cookie."""
        service = self.service
        with service.mutex:
            now = service.now()
            service.credentials.expire_sessions(now)
            record = service.credentials.sessions.get(session_id) if session_id else None
            reason = problem or ""
            if record is None and not reason:
                reason = "the JSESSIONID cookie names no session of this test"
            elif record is not None and record.ended_at is not None:
                reason = f"session {record.label} had ended already ({record.end_reason})"
            if reason:
                service.timeline.refuse(
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
            service.timeline.record(
                LoggedOut(at=to_datetime(now), username=record.username, session=record.label)
            )
            return record

    def answer_logout(self, incoming: Incoming) -> Answer:
        session_id = incoming.cookies.get("JSESSIONID")
        problem = (
            None
            if session_id
            else (
                "no JSESSIONID cookie was sent to /v1/logout: send 'Cookie: JSESSIONID=<id>' "
                "with the id from /v1/login's Set-Cookie (a cookie jar will not, because of "
                f"Path={COOKIE_PATH})"
            )
        )
        self.logout(session_id, problem=problem)
        return Answer({})

    def authorize(self, presented: Presented, call: Call, permission: str | None) -> Authorization:
        """Authenticate a protected v1 call by its JSESSIONID cookie and utk."""
        service = self.service
        session_id, utk, problem = presented.session_id, presented.utk, presented.problem
        with service.mutex:
            now = call.now
            service.credentials.expire_sessions(now)
            if session_id is None or problem:
                known = service.credentials.sessions.get(session_id) if session_id else None
                # Without its cookie, the utk still names the session's account: the
                # refusal is the account's (it releases its sessions, so logging in
                # again after it is no churn), but no session was presented.
                owner = known or next(
                    (r for r in service.credentials.sessions.values() if utk and r.utk == utk),
                    None,
                )
                service.credentials.refuse_call(
                    call,
                    owner.username if owner else None,
                    known.label if known else None,
                    problem or "no JSESSIONID cookie",
                    wrong=True,
                )
            assert session_id is not None
            record = service.credentials.sessions.get(session_id)
            if record is None:
                service.credentials.refuse_call(
                    call,
                    None,
                    None,
                    "the JSESSIONID cookie names no session of this test: send the "
                    "JSESSIONID value from /v1/login's Set-Cookie",
                    wrong=True,
                )
            if record.ended_at is not None:
                how = {
                    "logout": "ended by /v1/logout",
                    "timeout": f"expired after {service.options.session_timeout:g} s idle",
                    "revoked": "revoked",
                    "expired": "expired (ended early on cue)",
                }.get(record.end_reason or "", "ended")
                service.credentials.refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"session {record.label} {how} {now - record.ended_at:.0f} s ago: log in again",
                    # Revoked or expired on cue: the client could not have known.
                    expired=record.end_reason in ("logout", "timeout"),
                )
            if not utk:
                service.credentials.refuse_call(
                    call,
                    record.username,
                    record.label,
                    "the utk query parameter is missing: v1 calls need both the JSESSIONID "
                    "cookie and utk=<the utk of /v1/login's answer>",
                    wrong=True,
                )
            if utk != record.utk:
                owner = next(
                    (r for r in service.credentials.sessions.values() if r.utk == utk), None
                )
                detail = f"it is the utk of session {owner.label}" if owner else "no session has it"
                service.credentials.refuse_call(
                    call,
                    record.username,
                    record.label,
                    f"the utk does not belong to session {record.label} ({detail}): send the "
                    "utk that came with this JSESSIONID",
                    wrong=True,
                )
            service.credentials.check_permission(call, record.username, record.label, permission)
            record.uses += 1
            record.last_used = now
            return Authorization(record.username, self.name, record.label)

    def _check_manual_lock(self, username: str, now: float) -> None:
        service = self.service
        lock = service.accounts.manual_locks.get(username)
        if lock is None or now >= lock[1]:
            return
        start, end = lock
        until = "until unlocked" if end == math.inf else f"until {service.timeline.offset(end)}"
        reason = f"account locked on cue since {service.timeline.offset(start)}, {until}"
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
        """Refuse a login with ``code`` (a 1402 with the service's lockout text)."""
        minutes = max(1, math.ceil(self.service.options.lockout_duration / 60))
        self.service.timeline.refuse(
            LoginRejected(at=to_datetime(now), username=username, return_code=code, reason=reason),
            code,
            reason,
            message=SERVICE_MESSAGES[LOCKED_OUT].format(minutes=minutes)
            if code == LOCKED_OUT
            else None,
            then=then,
        )
