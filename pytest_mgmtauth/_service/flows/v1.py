"""v1: ``POST /v1/login`` with username and password -> a ``JSESSIONID`` cookie and a
``utk``, presented on every call, ended by ``POST /v1/logout``; lockouts after failed
logins."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..accounts import generate_session_id, generate_utk
from ..events import LoggedOut, LoginRejected, LogoutRejected
from ..records import AUTH_FAILED, Authorization, SessionRecord
from ..secret_text import ClientKind
from ..timeline import to_datetime
from .base import (
    COOKIE_PATH,
    Answer,
    Credential,
    Endpoint,
    Flow,
    Incoming,
    MalformedCall,
    Received,
    remember_me,
)

if TYPE_CHECKING:
    from ..credentials import Call
    from ..events import Event
    from ..options import Options

FORM_TYPE = "application/x-www-form-urlencoded"


@dataclasses.dataclass(frozen=True)
class SessionCookie(Credential):
    """What a v1 call presents: the ``JSESSIONID`` cookie and the ``utk`` parameter."""

    session_id: str | None = None
    utk: str | None = None


class V1Flow(Flow):
    name = "v1"
    title = "/v1/login"
    path_title = "/v1/login"
    secret = "password"
    credential = "session"
    attempt = "login"
    answer_field = "utk"
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
            now = service.timeline.now()
            service.credentials.expire_sessions(now)
            self.check_account(
                username, password, now=now, client=client, refuse=self.refuse_auth(now)
            )
            return service.grants.session(
                self, username, generate_session_id(), generate_utk(), arrived=arrived
            )

    def rejected(self, now: float, username: str | None, code: int, reason: str) -> Event:
        return LoginRejected(
            at=to_datetime(now), username=username, return_code=code, reason=reason
        )

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
        return Answer(
            {"utk": session.utk}, cookies=(cookie, remember_me(self.service.timeline.now()))
        )

    def logout(self, session_id: str | None, *, problem: str | None = None) -> SessionRecord:
        """End the session of the JSESSIONID cookie."""
        service = self.service
        with service.mutex:
            now = service.timeline.now()
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
        problem = None
        if not session_id:
            problem = (
                "no JSESSIONID cookie was sent to /v1/logout: send 'Cookie: JSESSIONID=<id>' "
                "with the id from /v1/login's Set-Cookie (a cookie jar will not, because of "
                f"Path={COOKIE_PATH})"
            )
        self.logout(session_id, problem=problem)
        return Answer({})

    @classmethod
    def fix_refused(cls) -> str:
        return "the JSESSIONID cookie and utk of the v1 session"

    def read(self, received: Received) -> SessionCookie:
        session_id = received.cookies.get("JSESSIONID")
        utks = received.param("utk")
        if len(utks) > 1:
            # Which one the real service reads is not published, so neither is guessed.
            raise MalformedCall(
                400,
                f"the query parameter 'utk' appears {len(utks)} times; send it once "
                "(?utk=<the utk of /v1/login's answer>)",
            )
        utk = utks[0] if utks else None
        if session_id and not utk and (misplaced := _misplaced_utk(received)):
            return SessionCookie(
                session_id=session_id,
                problem=(
                    f"utk arrived {misplaced}, not in the query string: v1 calls take it as "
                    "the query parameter ?utk=<the utk of /v1/login's answer>"
                ),
            )
        if session_id:
            return SessionCookie(session_id=session_id, utk=utk)
        other = self.others_carried(received)
        if other is not None:
            return SessionCookie(
                utk=utk,
                problem=(
                    "this is a v1 route: it takes the JSESSIONID cookie and utk of /v1/login, "
                    f"not {other}"
                ),
            )
        return SessionCookie(utk=utk, problem=missing_session_cookie(received), missing=not utk)

    def carried(self, received: Received) -> str | None:
        if "JSESSIONID" in received.cookies:
            return (
                "a JSESSIONID cookie: v1 sessions work on v1 routes only, those under /v1/ "
                "and those declared route(..., auth='v1') (the service's /urest/...)"
            )
        return None

    def owner(self, credential: Credential) -> tuple[str | None, str | None]:
        if isinstance(credential, SessionCookie) and credential.session_id is not None:
            with self.service.mutex:
                session = self.service.credentials.sessions.get(credential.session_id)
            if session is not None:
                return session.username, session.label
        return None, None

    def authorize(
        self, credential: Credential, call: Call, permission: str | None
    ) -> Authorization:
        assert isinstance(credential, SessionCookie)
        service = self.service
        session_id, utk, problem = credential.session_id, credential.utk, credential.problem
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


def missing_session_cookie(received: Received) -> str:
    """Why a client's cookie jar did not send JSESSIONID back, for this very request."""
    causes = []
    if not received.path.startswith(f"{COOKIE_PATH}/"):
        causes.append(f"its Path={COOKIE_PATH} does not cover {received.path}")
    if received.scheme != "https":
        causes.append("it is Secure and this request came over http://")
    why = (
        f"a cookie jar does not send it back here: {' and '.join(causes)}"
        if causes
        else "this client does not keep cookies between calls"
    )
    others = sorted(name for name in received.cookies if name != "JSESSIONID")
    sent = f" (cookies sent: {', '.join(others)})" if others else ""
    return (
        f"no JSESSIONID cookie was sent{sent}. /v1/login sets it with Path={COOKIE_PATH}; "
        f"Secure; HttpOnly, so {why}. Take JSESSIONID from /v1/login's Set-Cookie header "
        "and send 'Cookie: JSESSIONID=<id>' yourself, with utk as a query parameter"
    )


def _misplaced_utk(received: Received) -> str | None:
    """Where a utk that is not in the query string arrived instead, if anywhere."""
    for name, _ in received.headers:
        if "utk" in name.lower():
            return f"in the header {name!r}"
    if received.mimetype == FORM_TYPE and b"utk=" in received.body:
        return "in the form body"
    return None
