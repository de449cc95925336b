"""The timeline part of the service: the state, recording with masking, ordering and
the time origin; the records of calls that reach no desk."""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any, NoReturn

from .clock import Clock, system_clock, to_datetime
from .events import (
    ApiCall,
    BadRequest,
    Event,
    UnknownRoute,
    format_offset,
    timeline_origin,
)
from .faults import FaultPlan
from .records import Authorization, Refusal, SessionRecord, TokenRecord
from .redact import SecretMasker

if TYPE_CHECKING:
    from collections import deque
    from collections.abc import Callable

    from .accounts import (
        Account,
    )
    from .options import Options
    from .tokens import TokenSigner


class ServiceState:
    """The state of one test's service, guarded by ``_lock``; each part (the classes
    between this and :class:`AuthService`) owns the fields its comment names."""

    def __init__(
        self,
        options: Options,
        signer: TokenSigner,
        clock: Clock = system_clock,
        *,
        first_username: str | None = None,
    ) -> None:
        self.options = options
        self._signer = signer
        self._clock = clock
        #: The username of the first account added without one, drawn (and its first
        #: token anticipated) before this service existed (SessionPool.anticipate_next_account).
        self._first_username = first_username
        self._lock = threading.RLock()
        self.started_at = clock()
        self.accounts: dict[str, Account] = {}
        self.tokens: dict[str, TokenRecord] = {}  # by jti
        # The same records by the exact token string: a token this test was issued is
        # known without verifying its signature again (PyJWT's checks cost ~1 ms per
        # call on a 4096-bit token, most of a protected call; see docs/benchmarks.md).
        self._by_token: dict[str, TokenRecord] = {}
        self.sessions: dict[str, SessionRecord] = {}  # by JSESSIONID
        self._events: list[Event] = []
        self._failed_logins: dict[str, int] = {}
        self._lockouts: dict[str, tuple[float, float]] = {}  # username -> (start, end)
        # Premature bearer grants in the throttling window, per (username, version).
        self._premature: dict[tuple[str, str], deque[float]] = {}
        # The serial of the last grant before a protected call by the account last got a
        # 1401, per version: credentials granted up to then may be replaced without it
        # counting as churn. Serials, not times: under a frozen clock everything happens
        # at one instant.
        self._last_refusal: dict[tuple[str, str], int] = {}
        self._serial = 0
        # Ticks order request arrivals and grants, for thundering-herd detection.
        self._tick = 0
        # Login attempts per account during its current lockout.
        self._attempts_while_locked: dict[str, int] = {}
        #: Scripted faults for the next /v2/auth and /v1/login calls (see _faults.py).
        self.faults = FaultPlan()
        # Locks set by lock(): username -> (start, end); end is inf until unlock().
        self._manual_locks: dict[str, tuple[float, float]] = {}
        # Secrets replaced by rotate_*(): (username, "API key"/"password") -> [(old, when)].
        self._rotated: dict[tuple[str, str], list[tuple[str, float]]] = {}
        # Every secret this service holds or handed out, masked wherever text leaves it.
        self._masker = SecretMasker()
        # Times of the diagnosed failures, per (username, "API key"/"password").
        self._diagnosed: dict[tuple[str, str], deque[float]] = {}
        #: Moves the clock forward by that many seconds and returns True, or returns
        #: False when the clock cannot be moved (the test does not run on mgmt_clock):
        #: a scheduled ``expire`` lets the credential's lifetime pass, or else ends it
        #: early on cue.
        self.advance: Callable[[float], bool] | None = None


class Timeline(ServiceState):
    # -- time and events -----------------------------------------------------------

    def now(self) -> float:
        return self._clock()

    def _record(self, event: Event) -> None:
        self._events.append(self._masked_event(event))

    def _refuse(
        self,
        event: Event,
        code: int,
        reason: str,
        *,
        status: int = 401,
        message: str | None = None,
        retry_after: int | None = None,
        then: Event | None = None,
    ) -> NoReturn:
        """Say no: record ``event`` (and ``then`` after it), then raise the
        :class:`Refusal` the transport renders as ``status`` with ``code`` and ``reason``.
        The one way every part refuses."""
        self._record(event)
        if then is not None:
            self._record(then)
        raise Refusal(status, code, reason, message=message, retry_after=retry_after)

    def redact(self, text: str) -> str:
        """``text`` with every secret of this test's accounts, tokens and sessions (also
        rotated-out and ended ones) replaced by its fingerprint: apply it to anything
        that quotes what a client sent before it leaves the fake."""
        return self._masker.mask(text)

    def keep_masking(self, previous: Timeline) -> None:
        """Mask the secrets of ``previous`` too (the standalone server's state before a
        reset: its clients may still send the old sessions' ids)."""
        self._masker.add_all(previous._masker)

    def _masked_event(self, event: Event) -> Event:
        changes: dict[str, Any] = {}
        for field in dataclasses.fields(event):
            value = getattr(event, field.name)
            if isinstance(value, str):
                masked = self._masker.mask(value)
                if masked != value:
                    changes[field.name] = masked
        return dataclasses.replace(event, **changes) if changes else event

    def _hold_secrets(self, *values: str) -> None:
        for value in values:
            self._masker.add(value)

    @property
    def events(self) -> list[Event]:
        """The timeline, oldest first (a copy). Reading writes nothing: what has come
        due since the last write (a session's idle expiry) is computed here and recorded
        by the next write."""
        with self._lock:
            due = [self._masked_event(e) for e in self._due_events(self.now())]
            return sorted([*self._events, *due], key=lambda e: e.at)

    def _due_events(self, now: float) -> list[Event]:
        """Events that happened by ``now`` without a request (expiries), not yet
        recorded; the parts that know of them override this."""
        return []

    def record_call(self, auth: Authorization, method: str, path: str, status: int) -> None:
        """An authenticated call reached its route's handler and got ``status``."""
        with self._lock:
            self._record(
                ApiCall(
                    at=to_datetime(self.now()),
                    username=auth.username,
                    method=method,
                    path=path,
                    version=auth.version,
                    credential=auth.credential,
                    status=status,
                )
            )

    def record_bad_request(self, method: str, path: str, status: int, reason: str) -> None:
        with self._lock:
            self._record(
                BadRequest(
                    at=to_datetime(self.now()),
                    username=None,
                    method=method,
                    path=path,
                    status=status,
                    reason=reason,
                )
            )

    def record_unknown_route(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self._record(
                UnknownRoute(
                    at=to_datetime(self.now()),
                    username=None,
                    method=method,
                    path=path,
                    status=status,
                )
            )

    def _offset(self, timestamp: float) -> str:
        """``HH:MM:SS`` from the same origin as the assertions' timelines."""
        return format_offset(timestamp - timeline_origin(self._events, self.started_at))
