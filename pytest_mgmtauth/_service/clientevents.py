"""The events clients bring about with their requests: what the auth endpoints granted
or refused (v2/v3 bearer tokens, v1 sessions), throttling, lockouts after failed logins,
the end of a session (by logout or by idling), calls to declared routes, and requests the
fake could not take (:class:`BadRequest`, :class:`UnknownRoute`); with :func:`grants`,
the successful grants of a timeline.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from .eventbase import Event, TimeFormat, iso_time

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenIssued(Event):
    """``/v2/auth`` (``version="v2"``) or ``/v3/auth/accounts/{account}/profiles/{profile}``
    (``version="v3"``, with ``account`` and ``profile``) granted a bearer token."""

    token: str
    fingerprint: str
    expires_at: datetime
    #: Labels of credentials of the same kind the account still held, valid and not
    #: near expiry, when this one was granted: non-empty means churn.
    while_valid: tuple[str, ...] = ()
    #: Labels of earlier grants to the same account that were issued while this
    #: request was in flight (it arrived before they were issued, so its client could
    #: not have known them): non-empty means a thundering herd.
    concurrent_with: tuple[str, ...] = ()
    version: str = "v2"
    #: The v3 account and profile the token is for (``None`` for v2).
    account: str | None = None
    profile: str | None = None

    @property
    def premature(self) -> bool:
        return bool(self.while_valid)

    @property
    def scope(self) -> str:
        """``account/profile`` of a v3 token, ``""`` for v2."""
        return f"{self.account}/{self.profile}" if self.account is not None else ""

    def describe(self, when: TimeFormat = iso_time) -> str:
        exp = when(self.expires_at)
        text = f"token {self.token} ({self.fingerprint}) issued, valid to {exp}"
        if self.scope:
            text = (
                f"{self.version} token {self.token} ({self.fingerprint}) for {self.scope} "
                f"issued, valid to {exp}"
            )
        if self.while_valid:
            text += f"  <-- premature: {', '.join(self.while_valid)} still valid"
        if self.concurrent_with:
            text += f"  <-- concurrent with {', '.join(self.concurrent_with)}"
        return text

    def _timeline_text(self, when: TimeFormat) -> str:
        source = flow_title(self.version) + (f" for {self.scope}" if self.scope else "")
        return (
            f"{self.token} issued by {source} ({self.fingerprint}), valid until "
            f"{when(self.expires_at)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuthRejected(Event):
    """``/v2/auth`` (or v3 auth, ``version="v3"``) refused the credentials."""

    return_code: int
    reason: str
    version: str = "v2"
    account: str | None = None
    profile: str | None = None

    def describe(self, when: TimeFormat = iso_time) -> str:
        scope = f" for {self.account}/{self.profile}" if self.account is not None else ""
        path = flow_title(self.version, path=True)
        return f"{path}{scope} rejected ({self.return_code}): {self.reason}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoggedIn(Event):
    """``/v1/login`` started a session."""

    session: str
    fingerprint: str
    while_valid: tuple[str, ...] = ()
    #: As :attr:`TokenIssued.concurrent_with`, for sessions.
    concurrent_with: tuple[str, ...] = ()
    #: The flow that started it.
    version: str = "v1"

    @property
    def premature(self) -> bool:
        return bool(self.while_valid)

    def describe(self, when: TimeFormat = iso_time) -> str:
        text = f"session {self.session} ({self.fingerprint}) started by /v1/login"
        if self.while_valid:
            text += f"  <-- premature: {', '.join(self.while_valid)} still active"
        if self.concurrent_with:
            text += f"  <-- concurrent with {', '.join(self.concurrent_with)}"
        return text

    def _timeline_text(self, when: TimeFormat) -> str:
        return f"{self.session} started by /v1/login ({self.fingerprint})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoginRejected(Event):
    """``/v1/login`` refused (1401 wrong credentials, 1402 locked out)."""

    return_code: int
    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"/v1/login rejected ({self.return_code}): {self.reason}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccountLocked(Event):
    """Too many failed logins in a row: 1402 until ``until``."""

    failures: int
    until: datetime

    def describe(self, when: TimeFormat = iso_time) -> str:
        return (
            f"account locked after {self.failures} failed logins in a row, until {when(self.until)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoggedOut(Event):
    session: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"session {self.session} ended by /v1/logout"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SessionExpired(Event):
    """A v1 session was idle for ``session_timeout`` and ended by itself."""

    session: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"session {self.session} expired (idle timeout)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Throttled(Event):
    """``/v2/auth`` (or v3 auth) answered 429: too many premature grants within 60 s."""

    retry_after: int
    premature_grants: int
    version: str = "v2"

    def describe(self, when: TimeFormat = iso_time) -> str:
        return (
            f"/{self.version}/auth throttled (429, Retry-After {self.retry_after}s) after "
            f"{self.premature_grants} premature grants within 60 s"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApiCall(Event):
    """A call to a route declared with ``mgmt_server.route``.

    ``credential`` is the label of the credential it presented when the fake knows it
    (``T1``, ``S2``), else ``None``. ``status`` is what the client got; ``reason`` says
    why when the fake refused the call (401) before the route's handler saw it.
    """

    method: str
    path: str
    version: str
    credential: str | None
    status: int
    return_code: int | None = None
    reason: str | None = None
    #: The client presented an expired bearer token or an ended v1 session.
    credential_expired: bool = False

    @property
    def authenticated(self) -> bool:
        return self.return_code is None

    def describe(self, when: TimeFormat = iso_time) -> str:
        cred = self.credential or "no known credential"
        text = f"{self.method} {self.path} with {cred} -> {self.status}"
        if self.return_code is not None:
            text += f" ({self.return_code}: {self.reason})"
        return text


@dataclasses.dataclass(frozen=True, kw_only=True)
class BadRequest(Event):
    """A malformed request the fake answered with a 4xx before any auth decision."""

    _names_account: ClassVar[bool] = False

    method: str
    path: str
    status: int
    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"{self.method} {self.path} -> {self.status} bad request: {self.reason}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnknownRoute(Event):
    """A request to a path no route declares (404), or with a method it does not (405)."""

    _names_account: ClassVar[bool] = False

    method: str
    path: str
    status: int

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"{self.method} {self.path} -> {self.status}: no route declares it"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LogoutRejected(Event):
    """``/v1/logout`` without a live session."""

    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"/v1/logout rejected: {self.reason}"


def flow_title(version: str, *, path: bool = False) -> str:
    """How texts name the authentication endpoint of the flow ``version`` (or its path)."""
    from .flows.registry import FLOWS  # the flows import the events: read it when used

    flow = FLOWS.get(version)
    if flow is None:
        return version
    return flow.path_title if path else flow.title


def flow_credential(version: str) -> str:
    """What the flow ``version`` grants: ``"token"`` or ``"session"``."""
    from .flows.registry import FLOWS

    flow = FLOWS.get(version)
    return flow.credential if flow is not None else "credential"


#: A successful credential grant.
Grant: TypeAlias = "TokenIssued | LoggedIn"


def grant_version(grant: Grant) -> str:
    return grant.version


def grants(
    events: Sequence[Event], *, version: str | None = None, username: str | None = None
) -> list[Grant]:
    """Successful credential grants (``/v2/auth``, v3 auth, ``/v1/login``), in order."""
    return [
        e
        for e in events
        if isinstance(e, (TokenIssued, LoggedIn))
        and (username is None or e.username == username)
        and (version is None or grant_version(e) == version)
    ]
