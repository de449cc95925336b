"""The check of API versions: calls to a calendar-versioned API whose version was past
Active (``_service/api_versions.py``), one finding of kind ``deprecated_version`` per
test. "Monitor deprecation headers: Set up monitoring to alert when responses start
including Sunset headers" (dev-portal-api-versioning): a client that never notices them
is what the check catches, before End of Life turns its calls into 410s.

Only an answer can tell a client that its version is in End of Support (``Sunset``,
``Deprecation``, ``Link rel="successor-version"``), as only a refusal tells it that an
idle v1 session expired: the call whose answer says so first is no finding. A finding is
a call to a version the same client had been told about by an earlier answer, or a call
at End of Life (410)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .._service.events import ApiCall, DeprecatedVersionCall, WrongHost, shown
from .evidence import format_timeline

if TYPE_CHECKING:
    from .evidence import Evidence

#: Successors named in the fix before "and N more".
_FIX_LIMIT = 3


@dataclasses.dataclass
class _Call:
    """A call past Active, where it stands in the events, and what the route's own
    event for it (recorded after it, with the same method and path) says: the client
    that made it (the account or OAuth client; ``None`` when the fake knows none) and
    where its answer was made."""

    event: DeprecatedVersionCall
    arrived: int
    caller: str | None = None
    answered: int | None = None

    @property
    def key(self) -> tuple[str | None, str, str]:
        """The client, the version and its API (``cdp`` of ``/v2026-06/cdp/audiences``)."""
        parts = self.event.path.split("/")
        return (self.caller, self.event.api_version, parts[2] if len(parts) > 2 else "")


def deprecated_calls(evidence: Evidence) -> list[DeprecatedVersionCall]:
    """The calls of the evidence that are findings: to a version at End of Life (410),
    or to a version in End of Support that arrived after an answer to the same client
    (the same account or OAuth client, or the same unknown one) had said so for the same
    API. Calls in flight together when the version entered End of Support were told
    nothing yet: none of them is a finding."""
    calls: list[_Call] = []
    waiting: list[_Call] = []  # answered calls whose route's event is still to come
    for i, e in enumerate(evidence.events):
        if isinstance(e, DeprecatedVersionCall):
            call = _Call(e, i)
            calls.append(call)
            if e.status is None:
                waiting.append(call)
            else:  # refused with 410 before any authentication: answered at once
                call.answered = i
        elif isinstance(e, (ApiCall, WrongHost)):
            match = next(
                (c for c in waiting if (c.event.method, c.event.path) == (e.method, e.path)), None
            )
            if match is not None:
                match.caller, match.answered = e.username, i
                waiting.remove(match)
    told: dict[tuple[str | None, str, str], int] = {}
    for call in calls:
        if call.answered is not None:
            told[call.key] = min(told.get(call.key, call.answered), call.answered)
    return [
        c.event
        for c in calls
        if c.event.status is not None or told.get(c.key, len(evidence.events)) < c.arrived
    ]


def deprecated_version_message(evidence: Evidence) -> str | None:
    """What went to versions past Active after the client had been told (or at End of
    Life), the timeline, and where each call belongs; ``None`` if nothing did."""
    calls = deprecated_calls(evidence)
    if not calls:
        return None
    first = calls[0]
    gone = sum(1 for c in calls if c.status is not None)
    told = len(calls) - gone
    n = len(calls)
    counted = "1 call" if n == 1 else f"{n} calls"
    why = []
    if told:
        why.append(
            f"{told} after an earlier answer to the same client said its version ends "
            "(Sunset, Deprecation, Link)"
        )
    if gone:
        why.append(f"{gone} at End of Life (410)")
    # Paths come from requests: escaped, so that no character of one starts a line.
    moves = list(
        dict.fromkeys(f"{shown(c.method)} {shown(c.path)} to {shown(c.successor)}" for c in calls)
    )
    more = f" and {len(moves) - _FIX_LIMIT} more" if len(moves) > _FIX_LIMIT else ""
    return (
        f"pytest-mgmtauth: {counted} went to API versions past Active: "
        f"{' and '.join(why)}; first: "
        f"{first.line(evidence.when)} at {evidence.offset(first.at.timestamp())}\n\n"
        + format_timeline(evidence, focus=first)
        + "\n\nFix: move "
        + "; ".join(moves[:_FIX_LIMIT])
        + more
        + ". The first answer in End of Support carries Sunset, Deprecation and "
        'Link rel="successor-version": a client that reads them sends its later calls to '
        "the successor, and one that has not moved by End of Life gets 410 (the section "
        '"The lifecycle of API versions" of the documentation\'s page OAuth client '
        "credentials)."
    )
