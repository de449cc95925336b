"""The events of calls and faults (see ``events.py`` for the base :class:`Event`): calls
to declared routes, calls refused before any auth decision (a wrong host, a malformed
request, no route, a proxy tunnel that closed), calls to API versions past Active, and
the faults the test scripted or scheduled as they answer or fire."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar

from .events import Event, iso_time, shown

if TYPE_CHECKING:
    from datetime import datetime

    from .events import TimeFormat


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
    #: The client presented a credential that was never good for this call: none, a
    #: malformed or unknown one, another account's or profile's token, a v1 call without
    #: its session (a ``refused_call`` finding). ``False`` for refusals the test brought
    #: about (expire, revoke on cue, faults) and for expired credentials.
    wrong_credential: bool = False
    #: The host it reached, where that is not its flow's usual one (a v1 call at
    #: my.tealiumiq.com, a route declared with ``host=``); else ``None``.
    host: str | None = None
    #: The error code of a refusal in a flow's own shape (OAuth's ``invalid_token``,
    #: ``insufficient_scope``), shown instead of ``return_code``.
    error: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.return_code is None

    def describe(self, when: TimeFormat = iso_time) -> str:
        cred = self.credential or "no known credential"
        at = f" at {self.host}" if self.host else ""
        text = f"{shown(self.method)} {shown(self.path)}{at} with {cred} -> {self.status}"
        if self.return_code is not None:
            text += f" ({self.error or self.return_code}: {shown(self.reason or '')})"
        return text


@dataclasses.dataclass(frozen=True, kw_only=True)
class WrongHost(Event):
    """A request sent to a host of the service that does not serve it, refused before
    any auth decision (see docs/hosts.md). ``went`` is where it went and ``expected``
    where it belongs, as the client can reach them; ``username`` and ``credential`` are
    those of the credential it presented, when the fake knows it."""

    method: str
    path: str
    version: str
    went: str
    expected: str
    credential: str | None
    status: int
    reason: str
    #: Whether it was an API call (a declared route) rather than an authentication.
    api: bool = True

    def describe(self, when: TimeFormat = iso_time) -> str:
        cred = f" with {self.credential}" if self.credential else ""
        return (
            f"{self.method} {self.path} at {self.went}{cred} -> {self.status} wrong host: "
            f"{self.reason}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TunnelClosed(Event):
    """A tunnel through the fake's proxy (the ``intercept`` option) closed before its
    first request: its TLS handshake failed (no SNI, another name) or never came."""

    _names_account: ClassVar[bool] = False

    #: What the CONNECT named: ``host:443``.
    target: str
    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"CONNECT {self.target} -> tunnel closed: {self.reason}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BadRequest(Event):
    """A malformed request the fake answered with a 4xx before any auth decision."""

    _names_account: ClassVar[bool] = False

    method: str
    path: str
    status: int
    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return (
            f"{shown(self.method)} {shown(self.path)} -> {self.status} bad request: "
            f"{shown(self.reason)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnknownRoute(Event):
    """A request to a path no route declares (404), or with a method it does not (405)."""

    _names_account: ClassVar[bool] = False

    method: str
    path: str
    status: int

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"{shown(self.method)} {shown(self.path)} -> {self.status}: no route declares it"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeprecatedVersionCall(Event):
    """A call to a calendar-versioned API (``/v{YYYY-MM}/...``) whose version is past
    Active (``api_versions.py``): in End of Support (``phase`` ``"end_of_support"``,
    answered, with ``Sunset``, ``Deprecation`` and ``Link``), or at End of Life
    (``"end_of_life"``, ``status`` 410). ``sunset`` is its End of Life, ``successor``
    the successor's path."""

    _names_account: ClassVar[bool] = False

    method: str
    path: str
    api_version: str
    phase: str
    sunset: datetime
    successor: str
    status: int | None = None

    def describe(self, when: TimeFormat = iso_time) -> str:
        call = f"{shown(self.method)} {shown(self.path)}"
        sunset = self.sunset.date().isoformat()
        if self.status is not None:
            return (
                f"{call} -> {self.status}: API version {self.api_version} reached End of "
                f"Life on {sunset}; its successor: {self.successor}"
            )
        return (
            f"{call}: API version {self.api_version} is in End of Support (Sunset "
            f"{sunset}); its successor: {self.successor}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FaultInjected(Event):
    """A scripted fault (``mgmt_server.fail_next`` and friends) answered a call.

    ``fault`` is the kind (``fail``, ``hang``, ``reset``, ``malformed``), ``detail`` what
    the client got, ``ordinal`` which of the ``count`` calls it scripted this was.
    """

    method: str
    path: str
    fault: str
    detail: str
    ordinal: int
    count: int

    def describe(self, when: TimeFormat = iso_time) -> str:
        return (
            f"{shown(self.method)} {shown(self.path)} -> scripted fault ({self.ordinal} of "
            f"{self.count}): {shown(self.detail)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduledFaultFired(Event):
    """A scheduled fault (``mgmt_server.schedule_fault``, or a sweep item's) reached its
    point: ``fault`` is the kind (``expire``, ``revoke``, ``throttle``, ``unavailable``,
    ``reset``), ``point`` where it fired (``call3``, ``auth2``), ``detail`` what it did."""

    fault: str
    point: str
    detail: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"scheduled fault {self.fault}@{self.point}: {shown(self.detail)}"
