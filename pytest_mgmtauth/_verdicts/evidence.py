"""What the checks look at: the events of one test placed in time (Evidence), the
grants among them and the figures of the summary."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from .._service.call_events import ApiCall, BadRequest, TunnelClosed, WrongHost
from .._service.events import (
    AuthRejected,
    Event,
    Grant,
    LoggedIn,
    LoginRejected,
    LogoutRejected,
    Throttled,
    TokenIssued,
    format_offset,
    grants,
    timeline_origin,
)
from .._service.records import AUTH_FAILED

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from .._service.options import Options

#: Lines of a timeline shown before and after the line it is about; the rest is elided.


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a check looks at: the events of one test and how to place them in time."""

    events: Sequence[Event]
    options: Options
    #: When the test's fake was created (seconds since the epoch, simulated).
    started_at: float
    #: The simulated time of the check.
    now: float
    #: Where the whole timeline is, named where a long one is cut: for a test
    #: ``mgmt_server.timeline()``; for the standalone server its control endpoint.
    whole_timeline: str = "mgmt_server.timeline()"

    @functools.cached_property
    def origin(self) -> float:
        """Time zero of the timeline: the test's start, or an earlier event if the clock
        was moved back (``mgmt_clock.move_to``), so offsets stay readable."""
        return timeline_origin(self.events, self.started_at)

    def offset(self, timestamp: float) -> str:
        return format_offset(timestamp - self.origin)

    def when(self, value: datetime) -> str:
        """The :data:`TimeFormat` of this timeline: offsets from its origin."""
        return self.offset(value.timestamp())

    # Computed once per evidence: a churning test has hundreds of grants and calls.

    @functools.cached_property
    def uses(self) -> dict[str, int]:
        """Per credential label, the calls the service accepted it for (a 1469 is still
        an accepted credential)."""
        counts: dict[str, int] = {}
        for e in self.events:
            if isinstance(e, ApiCall) and e.credential and e.return_code != AUTH_FAILED:
                counts[e.credential] = counts.get(e.credential, 0) + 1
        return counts

    @functools.cached_property
    def expiries(self) -> dict[str, float]:
        return {
            e.token: e.expires_at.timestamp() for e in self.events if isinstance(e, TokenIssued)
        }


# -- findings ------------------------------------------------------------------------


def _is_grant(event: Event) -> bool:
    return isinstance(event, (TokenIssued, LoggedIn))


def grant_label(grant: Grant) -> str:
    return grant.token if isinstance(grant, TokenIssued) else grant.session


def premature_grants(events: Sequence[Event], *, username: str | None = None) -> list[Grant]:
    """Grants made while the account still held a valid credential: churn."""
    return [g for g in grants(events, username=username) if g.while_valid]


def concurrent_grants(events: Sequence[Event], *, username: str | None = None) -> list[Grant]:
    """Grants whose request was in flight while another grant to the account was made."""
    return [g for g in grants(events, username=username) if g.concurrent_with]


def is_rejection(event: Event) -> bool:
    if isinstance(event, ApiCall):
        return event.return_code is not None
    return isinstance(
        event,
        (
            AuthRejected,
            LoginRejected,
            LogoutRejected,
            Throttled,
            BadRequest,
            WrongHost,
            TunnelClosed,
        ),
    )


@dataclasses.dataclass(frozen=True)
class AuthSummary:
    """The figures of one test for the terminal summary and JUnit XML properties."""

    grants: int
    api_calls: int
    rejections: int
    churn: int
    concurrent: int

    def as_properties(self) -> list[tuple[str, int]]:
        return [(f"mgmtauth_{f.name}", getattr(self, f.name)) for f in dataclasses.fields(self)]


def summarize(events: Sequence[Event]) -> AuthSummary:
    return AuthSummary(
        grants=len(grants(events)),
        api_calls=sum(1 for e in events if isinstance(e, ApiCall)),
        rejections=sum(1 for e in events if is_rejection(e)),
        churn=len(premature_grants(events)),
        concurrent=len(concurrent_grants(events)),
    )
