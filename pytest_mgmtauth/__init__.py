"""pytest-mgmtauth: a faithful fake of a management API's auth service for pytest.

Public names are listed in ``__all__``; the public module ``pytest_mgmtauth.flows`` holds
what writing an auth flow needs. Every other module is private and may change.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._fake.server import MgmtServer as MgmtServer
    from ._glue.clock import MgmtClock as MgmtClock
    from ._http.binding import (
        RecordedRequest as RecordedRequest,
        RouteHandler as RouteHandler,
    )
    from ._service.accounts import Account as Account, Profile as Profile
    from ._service.events import (
        AccountLocked as AccountLocked,
        AccountLockedManually as AccountLockedManually,
        AccountUnlocked as AccountUnlocked,
        ApiCall as ApiCall,
        AuthRejected as AuthRejected,
        BadRequest as BadRequest,
        ClientRevoked as ClientRevoked,
        CredentialExpired as CredentialExpired,
        CredentialRevoked as CredentialRevoked,
        DeprecatedVersionCall as DeprecatedVersionCall,
        Event as Event,
        FaultInjected as FaultInjected,
        LoggedIn as LoggedIn,
        LoggedOut as LoggedOut,
        LoginRejected as LoginRejected,
        LogoutRejected as LogoutRejected,
        RateLimited as RateLimited,
        ScheduledFaultFired as ScheduledFaultFired,
        SecretRotated as SecretRotated,
        SessionExpired as SessionExpired,
        Throttled as Throttled,
        TokenIssued as TokenIssued,
        TunnelClosed as TunnelClosed,
        UnknownRoute as UnknownRoute,
        WrongHost as WrongHost,
    )
    from ._service.faults import (
        ScheduledFault as ScheduledFault,
        ScriptedFault as ScriptedFault,
    )
    from ._service.options import Options as Options
    from ._verdicts.findings import (
        AuthFindingWarning as AuthFindingWarning,
        DeprecatedVersionWarning as DeprecatedVersionWarning,
        DriftWarning as DriftWarning,
        ExpiredCredentialWarning as ExpiredCredentialWarning,
        OpenSessionWarning as OpenSessionWarning,
        RefusedCallWarning as RefusedCallWarning,
        TokenChurnWarning as TokenChurnWarning,
        WrongHostWarning as WrongHostWarning,
    )
    from .flows import OAuthClient as OAuthClient
    from .plugin import SigningKeyCacheWarning as SigningKeyCacheWarning

__version__ = "0.2.0"

#: Where each public name lives, by module: resolved on first access (PEP 562), so that
#: loading the plugin for a suite that never uses it imports none of the fake, the
#: transport (Werkzeug, pytest-httpserver) or the event classes.
_LAZY: dict[str, tuple[str, ...]] = {
    "._fake.server": ("MgmtServer",),
    "._glue.clock": ("MgmtClock",),
    "._http.binding": ("RecordedRequest", "RouteHandler"),
    "._service.accounts": ("Account", "Profile"),
    "._service.events": (
        "AccountLocked",
        "AccountLockedManually",
        "AccountUnlocked",
        "ApiCall",
        "AuthRejected",
        "BadRequest",
        "ClientRevoked",
        "CredentialExpired",
        "CredentialRevoked",
        "DeprecatedVersionCall",
        "Event",
        "FaultInjected",
        "LoggedIn",
        "LoggedOut",
        "LoginRejected",
        "LogoutRejected",
        "RateLimited",
        "ScheduledFaultFired",
        "SecretRotated",
        "SessionExpired",
        "Throttled",
        "TokenIssued",
        "TunnelClosed",
        "UnknownRoute",
        "WrongHost",
    ),
    "._service.faults": ("ScheduledFault", "ScriptedFault"),
    ".flows": ("OAuthClient",),
    "._service.options": ("Options",),
    "._verdicts.findings": (
        "AuthFindingWarning",
        "DeprecatedVersionWarning",
        "DriftWarning",
        "ExpiredCredentialWarning",
        "OpenSessionWarning",
        "RefusedCallWarning",
        "TokenChurnWarning",
        "WrongHostWarning",
    ),
    ".plugin": ("SigningKeyCacheWarning",),
}
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names}

__all__ = sorted([*_MODULE_OF, "__version__"])


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # found here from now on, without this function
        return value
    if name == "LoggedOutRejected":  # renamed: the same class, so isinstance checks hold
        warnings.warn(
            "pytest_mgmtauth.LoggedOutRejected is deprecated: use "
            "pytest_mgmtauth.LogoutRejected (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__("LogoutRejected")
    raise AttributeError(f"module 'pytest_mgmtauth' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
