"""The events of calls and faults (see ``events.py`` for the base :class:`Event`): calls
to declared routes, calls refused before any auth decision (a wrong host, a malformed
request, no route, a proxy tunnel that closed), and the faults the test scripted or
scheduled as they answer or fire."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar

from .events import Event, iso_time, shown

if TYPE_CHECKING:
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
    first request: its TLS handshake failed (no SNI, another name) or never came. Also a
    connection that this process's lookup of a service host sent to the fake, whose TLS
    handshake failed (``via`` ``"TLS"``)."""

    _names_account: ClassVar[bool] = False

    #: What the CONNECT named (or the TLS handshake, by SNI): ``host:443``.
    target: str
    reason: str
    #: ``"CONNECT"`` (a tunnel of the proxy) or ``"TLS"`` (a connection to the fake
    #: from a lookup in this process, see docs/hosts.md).
    via: str = "CONNECT"

    def describe(self, when: TimeFormat = iso_time) -> str:
        closed = "tunnel closed" if self.via == "CONNECT" else "connection closed"
        return f"{self.via} {self.target} -> {closed}: {self.reason}"


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
