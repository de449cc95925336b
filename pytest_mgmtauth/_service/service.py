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
from .credentials import Call, Credentials
from .events import WrongHost, grants
from .fault_runner import FaultRunner
from .flows.base import normalized_path
from .flows.registry import FLOWS, WRONG_HOST_STATUS, check_endpoints, check_grants
from .grants import Grants
from .lockout import Lockout
from .rate_limits import RateLimits
from .timeline import Clock, Timeline, system_clock, to_datetime

if TYPE_CHECKING:
    from .flows.base import Credential, Flow, Received, Where
    from .options import Options
    from .records import Authorization
    from .tokens import TokenSigner

F = TypeVar("F", bound="Flow")


class AuthService:
    """One test's service. It holds its parts (the timeline, the accounts, the
    credentials, the faults) and one instance of each auth flow of the registry, which
    grant and authorize on those parts; its methods are what the transport, the fake
    and the verdicts call. One lock guards it all.

    ``first_username``: the username its first generated account takes, reserved before
    the test so that its first token could be signed ahead (``account_book.py``)."""

    def __init__(
        self,
        options: Options,
        signer: TokenSigner,
        clock: Clock = system_clock,
        *,
        first_username: str | None = None,
    ) -> None:
        check_endpoints(options)
        self.options = options
        self.signer = signer
        self.mutex = threading.RLock()
        self.timeline = Timeline(clock, self.mutex)
        self.accounts = AccountBook(
            self.timeline, options, signer, self.mutex, first_username=first_username
        )
        self.credentials = Credentials(self.timeline, self.accounts, options, self.mutex)
        self.lockout = Lockout(self.timeline, self.accounts, options, self.mutex)
        #: The rate-limit rule of API calls the transport asks before a route answers.
        self.rate_limits = RateLimits(self.timeline, options, self.mutex)
        self.fault_runner = FaultRunner(
            self.timeline, self.accounts, self.credentials, options, self.mutex
        )
        #: The grant rule every flow calls.
        self.grants = Grants(
            self.timeline, self.credentials, self.fault_runner, options, self.mutex
        )
        self.flows: dict[str, Flow] = {name: flow(self) for name, flow in FLOWS.items()}

    @overload
    def flow(self, which: type[F]) -> F: ...
    @overload
    def flow(self, which: str) -> Flow: ...
    def flow(self, which: type[Flow] | str) -> Flow:
        """This service's instance of a flow, by its class or its name."""
        name = which if isinstance(which, str) else which.name
        return self.flows[name]

    # -- accounts and credentials ------------------------------------------------------

    def principals(self) -> list[str]:
        """Whom credentials are granted to: the accounts' usernames, then those the
        flows know besides (OAuth's client ids)."""
        with self.mutex:
            found = list(self.accounts)
            for flow in self.flows.values():
                found += flow.principals()
            return found

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        """How many credentials were granted (to ``username``, by the flow ``version``).
        ValueError for a flow that grants none: its calls present the secret itself."""
        check_grants(version, what="auth_count")
        return len(grants(self.timeline.events, version=version, username=username))

    def admit(
        self,
        version: str,
        received: Received,
        *,
        permission: str | None,
        scope: str | None = None,
        wrong_host: str | None = None,
    ) -> tuple[Authorization, str | None]:
        """The one door of a protected call of a route declared for the flow ``version``:
        its credential read from ``received`` and authorized (``permission``, ``scope``);
        ``wrong_host``: the hosts the route answers on, as the client can reach them,
        when ``received`` arrived elsewhere (then refused, naming its credential). Returns
        the authorization and the host to name in the timeline (``None`` where it is the
        flow's usual one, the first of its API hosts); :class:`Refusal` if not admitted."""
        flow = self.flows[version]
        credential = flow.read(received)
        where = received.where
        if wrong_host is not None:
            self.refuse_wrong_host(
                version,
                where,
                wrong_host,
                method=received.method,
                path=received.path,
                api=True,
                credential=credential,
            )
        host = where.host
        if host is not None and host == flow.api_host_names(self.options)[0]:
            host = None
        with self.mutex:
            call = Call(
                version,
                received.method,
                received.path,
                self.timeline.now(),
                received.normalized or normalized_path(received.path),
                host=host,
                scope=scope,
            )
            return flow.authorize(credential, call, permission), host

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
        credential: Credential | None = None,
    ) -> NoReturn:
        """Refuse a request that reached a host its endpoint or route does not answer
        on (404, see docs/hosts.md): record a :class:`WrongHost` naming where it belongs,
        attributed to the credential it presented when this test issued it."""
        flow = self.flows[version]
        reason = flow.wrong_host_reason(where, expected, api=api)
        with self.mutex:
            username, label = flow.owner(credential) if credential is not None else (None, None)
            self.timeline.refuse(
                WrongHost(
                    at=to_datetime(self.timeline.now()),
                    username=username,
                    method=method,
                    path=path,
                    version=version,
                    went=where.shown,
                    expected=expected,
                    credential=label,
                    status=WRONG_HOST_STATUS,
                    reason=reason,
                    api=api,
                ),
                WRONG_HOST_STATUS,
                reason,
                status=WRONG_HOST_STATUS,
                message="Not Found",
            )
