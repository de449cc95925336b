"""pytest-mgmtauth: a faithful fake of a management API's auth service for pytest.

Public names are listed in ``__all__``; every other module is private and may change.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._fake.server import MgmtServer
    from ._glue.clock import MgmtClock
    from ._http.binding import RecordedRequest, RouteHandler
    from ._service.accounts import Account
    from ._service.call_events import (
        ApiCall,
        BadRequest,
        DeprecatedVersionCall,
        FaultInjected,
        ScheduledFaultFired,
        TunnelClosed,
        UnknownRoute,
        WrongHost,
    )
    from ._service.events import (
        AccountLocked,
        AccountLockedManually,
        AccountUnlocked,
        AuthRejected,
        ClientRevoked,
        CredentialExpired,
        CredentialRevoked,
        Event,
        LoggedIn,
        LoggedOut,
        LoginRejected,
        LogoutRejected,
        SecretRotated,
        SessionExpired,
        Throttled,
        TokenIssued,
    )
    from ._service.faults import ScheduledFault, ScriptedFault
    from ._service.flows.oauth_clients import OAuthClient
    from ._service.options import Options
    from ._verdicts.findings import (
        AuthFindingWarning,
        DeprecatedVersionWarning,
        ExpiredCredentialWarning,
        OpenSessionWarning,
        RefusedCallWarning,
        TokenChurnWarning,
        WrongHostWarning,
    )
    from .plugin import SigningKeyCacheWarning

__version__ = "0.2.0"

__all__ = [
    "Account",
    "AccountLocked",
    "AccountLockedManually",
    "AccountUnlocked",
    "ApiCall",
    "AuthFindingWarning",
    "AuthRejected",
    "BadRequest",
    "ClientRevoked",
    "CredentialExpired",
    "CredentialRevoked",
    "DeprecatedVersionCall",
    "DeprecatedVersionWarning",
    "Event",
    "ExpiredCredentialWarning",
    "FaultInjected",
    "LoggedIn",
    "LoggedOut",
    "LoginRejected",
    "LogoutRejected",
    "MgmtClock",
    "MgmtServer",
    "OAuthClient",
    "OpenSessionWarning",
    "Options",
    "RecordedRequest",
    "RefusedCallWarning",
    "RouteHandler",
    "ScheduledFault",
    "ScheduledFaultFired",
    "ScriptedFault",
    "SecretRotated",
    "SessionExpired",
    "SigningKeyCacheWarning",
    "Throttled",
    "TokenChurnWarning",
    "TokenIssued",
    "TunnelClosed",
    "UnknownRoute",
    "WrongHost",
    "WrongHostWarning",
    "__version__",
]

#: Where each public name lives: resolved on first access (PEP 562), so that loading the
#: plugin for a suite that never uses it imports none of the fake, the transport
#: (Werkzeug, pytest-httpserver) or the event classes.
_LAZY: dict[str, str] = {
    "Account": "._service.accounts",
    "AccountLocked": "._service.events",
    "AccountLockedManually": "._service.events",
    "AccountUnlocked": "._service.events",
    "ApiCall": "._service.call_events",
    "AuthFindingWarning": "._verdicts.findings",
    "AuthRejected": "._service.events",
    "BadRequest": "._service.call_events",
    "ClientRevoked": "._service.events",
    "CredentialExpired": "._service.events",
    "CredentialRevoked": "._service.events",
    "DeprecatedVersionCall": "._service.call_events",
    "DeprecatedVersionWarning": "._verdicts.findings",
    "Event": "._service.events",
    "ExpiredCredentialWarning": "._verdicts.findings",
    "FaultInjected": "._service.call_events",
    "LoggedIn": "._service.events",
    "LoggedOut": "._service.events",
    "LoginRejected": "._service.events",
    "LogoutRejected": "._service.events",
    "MgmtClock": "._glue.clock",
    "MgmtServer": "._fake.server",
    "OAuthClient": "._service.flows.oauth_clients",
    "OpenSessionWarning": "._verdicts.findings",
    "Options": "._service.options",
    "RecordedRequest": "._http.binding",
    "RefusedCallWarning": "._verdicts.findings",
    "RouteHandler": "._http.binding",
    "ScheduledFault": "._service.faults",
    "ScheduledFaultFired": "._service.call_events",
    "ScriptedFault": "._service.faults",
    "SecretRotated": "._service.events",
    "SessionExpired": "._service.events",
    "SigningKeyCacheWarning": ".plugin",
    "Throttled": "._service.events",
    "TokenChurnWarning": "._verdicts.findings",
    "TokenIssued": "._service.events",
    "TunnelClosed": "._service.call_events",
    "UnknownRoute": "._service.call_events",
    "WrongHost": "._service.call_events",
    "WrongHostWarning": "._verdicts.findings",
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
