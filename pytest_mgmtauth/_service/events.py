"""The timeline: typed, immutable records of what happened to the fake in one test.

Every event has ``at`` (the simulated time, an aware UTC datetime) and ``username``
(``None`` when the request named no known account). Credentials are named by their
per-test label (``T1``, ``T2`` for bearer tokens, ``S1`` for v1 sessions) and a short
fingerprint; secrets never appear whole.

The package imports every event class and helper from here; they are defined by
family: the base class and the time formats in ``_eventbase.py``, what clients' requests
bring about in ``_clientevents.py``, what the test brings about on cue in
``_cueevents.py``.
"""

from __future__ import annotations

from .clientevents import (
    AccountLocked,
    ApiCall,
    AuthRejected,
    BadRequest,
    Grant,
    LoggedIn,
    LoggedOut,
    LoginRejected,
    LogoutRejected,
    SessionExpired,
    Throttled,
    TokenIssued,
    UnknownRoute,
    grant_version,
    grants,
)
from .cueevents import (
    AccountLockedManually,
    AccountUnlocked,
    CredentialExpired,
    CredentialRevoked,
    FaultInjected,
    ScheduledFaultFired,
    SecretRotated,
)
from .eventbase import Event, TimeFormat, format_offset, iso_time, timeline_origin

__all__ = [
    "AccountLocked",
    "AccountLockedManually",
    "AccountUnlocked",
    "ApiCall",
    "AuthRejected",
    "BadRequest",
    "CredentialExpired",
    "CredentialRevoked",
    "Event",
    "FaultInjected",
    "Grant",
    "LoggedIn",
    "LoggedOut",
    "LoginRejected",
    "LogoutRejected",
    "ScheduledFaultFired",
    "SecretRotated",
    "SessionExpired",
    "Throttled",
    "TimeFormat",
    "TokenIssued",
    "UnknownRoute",
    "format_offset",
    "grant_version",
    "grants",
    "iso_time",
    "timeline_origin",
]
