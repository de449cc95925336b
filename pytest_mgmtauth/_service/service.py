"""The fake auth service: accounts, tokens, sessions, lockout, throttling, events.

Pure Python, no HTTP and no pytest: the transport turns requests into these calls and
:class:`Refusal` into error answers. One instance holds one test's state; the signing
key (the expensive part) is shared across tests through the :class:`TokenSigner`.
All public methods are thread-safe: the HTTP server calls them from many threads.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, NoReturn, TypeVar, overload

from .account_book import AccountBook
from .call_events import WrongHost
from .credentials import Call, Credentials
from .events import format_offset, grants
from .fault_runner import FaultRunner
from .flows.registry import FLOWS, WRONG_HOST_STATUS, check_endpoints, check_version
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
from .timeline import Clock, Timeline, system_clock, to_datetime

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .accounts import Account
    from .events import Event
    from .faults import FiredFault, ScheduledFault
    from .flows.base import Flow, Presented
    from .flows.registry import Where
    from .limits import SecretKind
    from .options import Options
    from .tokens import TokenSigner

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


class AuthService:
    """One test's service. It holds its parts (the timeline, the accounts, the
    credentials, the faults) and one instance of each auth flow of the registry, which
    grant and authorize on those parts; its methods are what the transport, the fake
    and the verdicts call. One lock guards it all."""

    def __init__(
        self,
        options: Options,
        signer: TokenSigner,
        clock: Clock = system_clock,
    ) -> None:
        check_endpoints(options)
        self.options = options
        self.signer = signer
        self.mutex = threading.RLock()
        self.timeline = Timeline(clock, self.mutex)
        self.accounts = AccountBook(self.timeline, options, signer, self.mutex)
        self.credentials = Credentials(self.timeline, self.accounts, options, self.mutex)
        self.fault_runner = FaultRunner(
            self.timeline, self.accounts, self.credentials, options, self.mutex
        )
        #: The scripted and scheduled faults of this test.
        self.faults = self.fault_runner.plan
        self.flows: dict[str, Flow] = {name: flow(self) for name, flow in FLOWS.items()}

    @overload
    def flow(self, which: type[F]) -> F: ...
    @overload
    def flow(self, which: str) -> Flow: ...
    def flow(self, which: type[Flow] | str) -> Flow:
        """This service's instance of a flow, by its class or its name."""
        name = which if isinstance(which, str) else which.name
        return self.flows[name]

    # -- time and the timeline ---------------------------------------------------------

    def now(self) -> float:
        return self.timeline.now()

    @property
    def started_at(self) -> float:
        return self.timeline.started_at

    @property
    def events(self) -> list[Event]:
        """The timeline, oldest first (a copy)."""
        return self.timeline.events

    def redact(self, text: str) -> str:
        return self.timeline.redact(text)

    def keep_masking(self, previous: AuthService) -> None:
        self.timeline.keep_masking(previous.timeline)

    def record_call(
        self,
        auth: Authorization,
        method: str,
        path: str,
        status: int,
        *,
        host: str | None = None,
    ) -> None:
        self.timeline.record_call(auth, method, path, status, host=host)

    def record_bad_request(self, method: str, path: str, status: int, reason: str) -> None:
        self.timeline.record_bad_request(method, path, status, reason)

    def record_tunnel_closed(self, target: str, reason: str, via: str = "CONNECT") -> None:
        """A tunnel through the fake's proxy (or a TLS connection) closed before its first
        request."""
        self.timeline.record_tunnel_closed(target, reason, via)

    def record_unknown_route(self, method: str, path: str, status: int) -> None:
        self.timeline.record_unknown_route(method, path, status)

    # -- accounts and credentials ------------------------------------------------------

    def add_account(
        self,
        username: str | None = None,
        *,
        api_key: str | None = None,
        password: str | None = None,
        permissions: Iterable[str] | None = None,
        profiles: object = None,
    ) -> Account:
        return self.accounts.add_account(
            username,
            api_key=api_key,
            password=password,
            permissions=permissions,
            profiles=profiles,
        )

    def account_list(self) -> list[Account]:
        return self.accounts.account_list()

    def principals(self) -> list[str]:
        """Whom credentials are granted to: the accounts' usernames, then those the
        flows know besides (OAuth's client ids)."""
        with self.mutex:
            found = list(self.accounts)
            for flow in self.flows.values():
                found += flow.principals()
            return found

    def rotate_secret(
        self, username: str, secret: SecretKind, new_value: str | None = None
    ) -> Account:
        return self.accounts.rotate_secret(username, secret, new_value)

    def lock(self, username: str, *, seconds: float | None = None) -> None:
        self.accounts.lock(username, seconds=seconds)

    def unlock(self, username: str) -> None:
        self.accounts.unlock(username)

    @property
    def tokens(self) -> dict[str, TokenRecord]:
        return self.credentials.tokens

    @property
    def sessions(self) -> dict[str, SessionRecord]:
        return self.credentials.sessions

    def token_list(self) -> list[TokenRecord]:
        return self.credentials.token_list()

    def session_list(self) -> list[SessionRecord]:
        return self.credentials.session_list()

    def request_arrived(self) -> int:
        return self.credentials.request_arrived()

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        check_version(version, what="version", none="every flow")
        return len(grants(self.events, version=version, username=username))

    def authorize(
        self,
        version: str,
        presented: Presented,
        *,
        method: str,
        path: str,
        permission: str | None,
        host: str | None = None,
        scope: str | None = None,
    ) -> Authorization:
        """Authenticate a protected call of a route declared for the flow ``version``
        (``host``: where it went, if not the flow's usual host; needing ``permission``
        or ``scope``); :class:`Refusal` if not."""
        with self.mutex:
            call = Call(version, method, path, self.now(), host=host, scope=scope)
            return self.flows[version].authorize(presented, call, permission)

    # -- hosts ---------------------------------------------------------------------

    def refuse_wrong_host(
        self,
        version: str,
        where: Where,
        expected: str,
        *,
        method: str,
        path: str,
        api: bool,
        presented: Presented | None = None,
    ) -> NoReturn:
        """Refuse a request that reached a host its endpoint or route does not answer
        on (404, see docs/hosts.md): record a :class:`WrongHost` naming where it belongs,
        attributed to the credential it presented when this test issued it."""
        flow = self.flows[version]
        reason = flow.wrong_host_reason(where, expected, api=api)
        with self.mutex:
            username, credential = self.credentials.owner_of(presented)
            self.timeline.refuse(
                WrongHost(
                    at=to_datetime(self.now()),
                    username=username,
                    method=method,
                    path=path,
                    version=version,
                    went=where.shown,
                    expected=expected,
                    credential=credential,
                    status=WRONG_HOST_STATUS,
                    reason=reason,
                    api=api,
                ),
                WRONG_HOST_STATUS,
                reason,
                status=WRONG_HOST_STATUS,
                message="Not Found",
            )

    # -- faults --------------------------------------------------------------------

    @property
    def advance(self) -> Callable[[float], bool] | None:
        """How a scheduled ``expire`` moves the clock (set by the fake on mgmt_clock)."""
        return self.fault_runner.advance

    @advance.setter
    def advance(self, mover: Callable[[float], bool] | None) -> None:
        self.fault_runner.advance = mover

    def schedule(self, fault: ScheduledFault) -> None:
        self.fault_runner.schedule(fault)

    def protected_call_arrived(self) -> ScheduledFault | None:
        return self.fault_runner.protected_call_arrived()

    def protected_call_answered(self) -> None:
        self.fault_runner.protected_call_answered()

    def auth_call_arrived(self) -> ScheduledFault | None:
        return self.fault_runner.auth_call_arrived()

    def take_fault(
        self,
        version: str,
        method: str,
        path: str,
        username: str | None,
        scheduled: ScheduledFault | None = None,
    ) -> FiredFault | None:
        return self.fault_runner.take_fault(version, method, path, username, scheduled)

    def find_credential(self, credential: str) -> TokenRecord | SessionRecord:
        return self.fault_runner.find_credential(credential)

    def expire(self, credential: str) -> str:
        return self.fault_runner.expire(credential)

    def revoke(self, credential: str) -> str:
        return self.fault_runner.revoke(credential)
