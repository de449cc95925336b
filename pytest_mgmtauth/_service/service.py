"""The fake auth service: accounts, tokens, sessions, lockout, throttling, events.

Pure Python, no HTTP and no pytest: the transport turns requests into these calls and
:class:`Refusal` into error answers. One instance holds one test's state; the signing
key (the expensive part) is shared across tests through the :class:`TokenSigner`.
All public methods are thread-safe: the HTTP server calls them from many threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

from .churn import Call
from .events import format_offset, grants
from .fault_plan import FaultDesk
from .flows.registry import FLOWS, check_version
from .records import (
    AUTH_FAILED,
    DIAGNOSIS_BUDGET,
    DIAGNOSIS_WINDOW,
    FORBIDDEN,
    LOCKED_OUT,
    SERVICE_MESSAGES,
    THROTTLE_WINDOW,
    Authorization,
    Refusal,
    SessionRecord,
    TokenRecord,
)

if TYPE_CHECKING:
    from .flows.base import Flow, Presented

__all__ = [
    "AUTH_FAILED",
    "DIAGNOSIS_BUDGET",
    "DIAGNOSIS_WINDOW",
    "FORBIDDEN",
    "LOCKED_OUT",
    "SERVICE_MESSAGES",
    "THROTTLE_WINDOW",
    "AuthService",
    "Authorization",
    "Refusal",
    "SessionRecord",
    "TokenRecord",
    "format_offset",
]

F = TypeVar("F", bound="Flow")


class AuthService(FaultDesk):
    """One test's service: the state and its parts (timeline, accounts, churn, faults),
    and one instance of each auth flow of the registry, which grant and authorize on it.
    Every public method takes the lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flows: dict[str, Flow] = {name: flow(self) for name, flow in FLOWS.items()}

    @overload
    def flow(self, which: type[F]) -> F: ...
    @overload
    def flow(self, which: str) -> Flow: ...
    def flow(self, which: type[Flow] | str) -> Flow:
        """This service's instance of a flow, by its class or its name."""
        name = which if isinstance(which, str) else which.name
        return self.flows[name]

    def authorize(
        self,
        version: str,
        presented: Presented,
        *,
        method: str,
        path: str,
        permission: str | None,
    ) -> Authorization:
        """Authenticate a protected call of a route declared for the flow ``version``;
        :class:`Refusal` if not."""
        with self._lock:
            call = Call(version, method, path, self.now())
            return self.flows[version].authorize(presented, call, permission)

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        check_version(version, what="version", none="every flow")
        return len(grants(self.events, version=version, username=username))
