"""pytest-mgmtauth: a faithful fake of a management API's auth service for pytest.

Public names are listed in ``__all__``; every other module is private and may change.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Where each public name lives: resolved on first access (PEP 562), so that loading the
#: plugin for a suite that never uses it imports none of the fake, the transport
#: (Werkzeug, pytest-httpserver) or the event classes.
_LAZY: dict[str, str] = {
    "Account": "._domain._accounts",
    "AccountLocked": "._domain._events",
    "AccountLockedManually": "._domain._events",
    "AccountUnlocked": "._domain._events",
    "ApiCall": "._domain._events",
    "AuthFindingWarning": "._assertions",
    "AuthRejected": "._domain._events",
    "BadRequest": "._domain._events",
    "CredentialExpired": "._domain._events",
    "CredentialRevoked": "._domain._events",
    "Event": "._domain._events",
    "ExpiredCredentialWarning": "._assertions",
    "FaultInjected": "._domain._events",
    "LoggedIn": "._domain._events",
    "LoggedOut": "._domain._events",
    "LoginRejected": "._domain._events",
    "LogoutRejected": "._domain._events",
    "MgmtClock": "._simclock",
    "MgmtServer": "._fake",
    "OpenSessionWarning": "._assertions",
    "Options": "._domain._options",
    "RouteHandler": "._transport._binding",
    "ScheduledFault": "._domain._faults",
    "ScheduledFaultFired": "._domain._events",
    "ScriptedFault": "._domain._faults",
    "SecretRotated": "._domain._events",
    "SessionExpired": "._domain._events",
    "Throttled": "._domain._events",
    "TokenChurnWarning": "._assertions",
    "TokenIssued": "._domain._events",
    "UnknownRoute": "._domain._events",
}

#: Renamed public names: old name -> new name. The old names keep working (the same
#: object, so isinstance checks hold) with a DeprecationWarning.
_DEPRECATED: dict[str, str] = {
    "LoggedOutRejected": "LogoutRejected",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # found here from now on, without this function
        return value
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(
            f"pytest_mgmtauth.{name} is deprecated: use pytest_mgmtauth.{new} (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__(new)
    raise AttributeError(f"module 'pytest_mgmtauth' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
