"""Writing an auth flow: everything a flow needs, in one public module.

A flow is a class: a :class:`Flow` (or a :class:`BearerFlow` for a credential presented
as a token) that declares its name, endpoints and hosts as class attributes, reads the
:class:`Credential` a protected call presents from a :class:`Received` (:meth:`Flow.read`)
and authorizes it (:meth:`Flow.authorize`, an :class:`Authorization` or a refusal). Its
endpoints answer an :class:`Incoming` with an :class:`Answer`. It is registered before
any fake runs (:func:`register`, or :func:`registered` for a while), then routes declare
``auth="<name>"``. OAuth's token endpoint takes more grant types through
:func:`register_grant`. The package's own flows (``scim`` among them) import only this
module's names; a flow written from the docs imports nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._service.accounts import Account, fingerprint
from ._service.credentials import Call
from ._service.events import AuthRejected, CredentialRevoked, Event
from ._service.flows.base import (
    ACCOUNT_PROFILE_NAMES,
    Answer,
    Credential,
    Endpoint,
    Flow,
    Incoming,
    MalformedCall,
    Received,
    Refuse,
    Sets,
    Where,
)
from ._service.flows.bearer import BearerFlow, BearerToken
from ._service.flows.oauth import (
    GrantHandler,
    OAuthClient,
    OAuthFlow,
    TokenRequest,
    client_credentials_grant,
    register_grant,
    registered_grant,
    unregister_grant,
)
from ._service.options import Options
from ._service.records import AUTH_FAILED, FORBIDDEN, Authorization, Refusal, TokenRecord
from ._service.secret_text import ClientKind
from ._service.timeline import to_datetime
from ._service.token_format import Claims

if TYPE_CHECKING:
    from ._service.flows.registry import (
        register as register,
        registered as registered,
        unregister as unregister,
    )

__all__ = [
    "ACCOUNT_PROFILE_NAMES",
    "AUTH_FAILED",
    "FORBIDDEN",
    "Account",
    "Answer",
    "AuthRejected",
    "Authorization",
    "BearerFlow",
    "BearerToken",
    "Call",
    "Claims",
    "ClientKind",
    "Credential",
    "CredentialRevoked",
    "Endpoint",
    "Event",
    "Flow",
    "GrantHandler",
    "Incoming",
    "MalformedCall",
    "OAuthClient",
    "OAuthFlow",
    "Options",
    "Received",
    "Refusal",
    "Refuse",
    "Sets",
    "TokenRecord",
    "TokenRequest",
    "Where",
    "client_credentials_grant",
    "fingerprint",
    "register",
    "register_grant",
    "registered",
    "registered_grant",
    "to_datetime",
    "unregister",
    "unregister_grant",
]

#: The registry imports the built-in flows, which are written against this module: its
#: functions are loaded on first use (PEP 562), so that either may be imported first.
_FROM_REGISTRY = ("register", "registered", "unregister")


def __getattr__(name: str) -> Any:
    if name in _FROM_REGISTRY:
        value = getattr(importlib.import_module("._service.flows.registry", __package__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pytest_mgmtauth.flows' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
