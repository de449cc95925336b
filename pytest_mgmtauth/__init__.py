"""pytest-mgmtauth: a faithful fake of a management API's auth service for pytest.

Public names are listed in ``__all__``; every other module is private and may change.
"""

from __future__ import annotations

from ._assertions import TokenChurnWarning
from ._domain._accounts import Account
from ._domain._events import (
    AccountLocked,
    ApiCall,
    AuthRejected,
    BadRequest,
    Event,
    LoggedIn,
    CredentialExpired,
    CredentialRevoked,
    LoggedOut,
    FaultInjected,
    LoggedOutRejected,
    LoginRejected,
    SessionExpired,
    Throttled,
    SecretRotated,
    TokenIssued,
    UnknownRoute,
)
from ._domain._options import Options
from ._fake import MgmtServer
from ._domain._faults import ScriptedFault
from ._simclock import MgmtClock
from ._transport._app import RouteHandler

__version__ = "0.1.0"

__all__ = [
    "Account",
    "AccountLocked",
    "ApiCall",
    "AuthRejected",
    "AccountLockedManually",
    "AccountUnlocked",
    "BadRequest",
    "Event",
    "LoggedIn",
    "CredentialExpired",
    "CredentialRevoked",
    "LoggedOut",
    "FaultInjected",
    "LoggedOutRejected",
    "LoginRejected",
    "MgmtClock",
    "MgmtServer",
    "Options",
    "RouteHandler",
    "SessionExpired",
    "Throttled",
    "ScriptedFault",
    "SecretRotated",
    "TokenChurnWarning",
    "TokenIssued",
    "UnknownRoute",
    "__version__",
]
