"""pytest-mgmtauth: a faithful fake of a management API's auth service for pytest.

Public names are listed in ``__all__``; every other module is private and may change.
"""

from __future__ import annotations

import warnings
from typing import Any

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
    LoginRejected,
    LogoutRejected,
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
from ._transport._binding import RouteHandler

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
    "LoginRejected",
    "LogoutRejected",
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

#: Renamed public names: old name -> (new name, the object). The old names keep working
#: (the same object, so isinstance checks hold) with a DeprecationWarning.
_DEPRECATED: dict[str, tuple[str, Any]] = {
    "LoggedOutRejected": ("LogoutRejected", LogoutRejected),
}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new, value = _DEPRECATED[name]
        warnings.warn(
            f"pytest_mgmtauth.{name} is deprecated: use pytest_mgmtauth.{new} (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return value
    raise AttributeError(f"module 'pytest_mgmtauth' has no attribute {name!r}")
