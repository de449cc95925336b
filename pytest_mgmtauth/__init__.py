"""pytest-mgmtauth: a faithful fake of a management API's auth service for pytest.

Public names are listed in ``__all__``; every other module is private and may change.
"""

from __future__ import annotations

from ._assertions import (
    AuthFindingWarning,
    ExpiredCredentialWarning,
    OpenSessionWarning,
    TokenChurnWarning,
)
from ._domain._accounts import Account
from ._domain._events import (
    AccountLocked,
    AccountLockedManually,
    AccountUnlocked,
    ApiCall,
    AuthRejected,
    BadRequest,
    CredentialExpired,
    CredentialRevoked,
    Event,
    FaultInjected,
    LoggedIn,
    LoggedOut,
    LoggedOutRejected,
    LoginRejected,
    ScheduledFaultFired,
    SecretRotated,
    SessionExpired,
    Throttled,
    TokenIssued,
    UnknownRoute,
)
from ._domain._faults import ScheduledFault, ScriptedFault
from ._domain._options import Options
from ._fake import MgmtServer
from ._simclock import MgmtClock
from ._transport._app import RouteHandler

__version__ = "0.1.0"

__all__ = [
    "Account",
    "AccountLocked",
    "AccountLockedManually",
    "AccountUnlocked",
    "ApiCall",
    "AuthFindingWarning",
    "AuthRejected",
    "BadRequest",
    "CredentialExpired",
    "CredentialRevoked",
    "Event",
    "ExpiredCredentialWarning",
    "FaultInjected",
    "LoggedIn",
    "LoggedOut",
    "LoggedOutRejected",
    "LoginRejected",
    "MgmtClock",
    "MgmtServer",
    "OpenSessionWarning",
    "Options",
    "RouteHandler",
    "ScheduledFault",
    "ScheduledFaultFired",
    "ScriptedFault",
    "SecretRotated",
    "SessionExpired",
    "Throttled",
    "TokenChurnWarning",
    "TokenIssued",
    "UnknownRoute",
    "__version__",
]
