"""The events the test brings about: a scripted fault answering a call, a scheduled
fault reaching its point, and credentials, accounts and secrets changed on cue
(``mgmt_server.expire``, ``revoke``, ``lock``, ``unlock``, ``rotate_key``,
``rotate_password``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar

from .clientevents import flow_credential
from .eventbase import Event, TimeFormat, iso_time

if TYPE_CHECKING:
    from datetime import datetime


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
            f"{self.method} {self.path} -> scripted fault ({self.ordinal} of {self.count}): "
            f"{self.detail}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class _CredentialEndedOnCue(Event):
    """A token (``version="v2"`` or ``"v3"``) or session (``"v1"``) the test ended on
    purpose."""

    credential: str
    version: str

    #: What happened to it, in the timeline line.
    _ended: ClassVar[str]

    def describe(self, when: TimeFormat = iso_time) -> str:
        kind = flow_credential(self.version)
        return f"{kind} {self.credential} {self._ended} on cue"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CredentialExpired(_CredentialEndedOnCue):
    """A token or session was made to expire now (``mgmt_server.expire``)."""

    _ended: ClassVar[str] = "expired"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CredentialRevoked(_CredentialEndedOnCue):
    """A token or session was revoked (``mgmt_server.revoke``)."""

    _ended: ClassVar[str] = "revoked"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccountLockedManually(Event):
    """``mgmt_server.lock``: /v1/login answers 1402 until ``until`` (``None``: until
    ``unlock``)."""

    until: datetime | None

    def describe(self, when: TimeFormat = iso_time) -> str:
        end = "until unlocked" if self.until is None else f"until {when(self.until)}"
        return f"account locked on cue, {end}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccountUnlocked(Event):
    """``mgmt_server.unlock``: any lockout ended and the failed-login count is zero."""

    def describe(self, when: TimeFormat = iso_time) -> str:
        return "account unlocked on cue"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SecretRotated(Event):
    """``mgmt_server.rotate_key`` / ``rotate_password``: the old secret now gets 1401."""

    secret: str  # "API key" or "password"
    old_fingerprint: str
    new_fingerprint: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return (
            f"{self.secret} rotated on cue ({self.old_fingerprint} -> {self.new_fingerprint}); "
            f"the old one now gets 1401"
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
        return f"scheduled fault {self.fault}@{self.point}: {self.detail}"
