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

from typing import TYPE_CHECKING

from .._service.events import ApiCall, DeprecatedVersionCall, WrongHost, shown
from .evidence import format_timeline

if TYPE_CHECKING:
    from .evidence import Evidence

#: Successors named in the fix before "and N more".
_FIX_LIMIT = 3


def _callers(evidence: Evidence) -> list[tuple[DeprecatedVersionCall, str | None]]:
    """Each call past Active with the client that made it: the account or OAuth client
    of the route's own event for it (recorded after it, with the same method and path),
    ``None`` when the fake knows none."""
    calls: list[DeprecatedVersionCall] = []
    callers: list[str | None] = []
    waiting: list[int] = []  # answered calls whose route's event is still to come
    for e in evidence.events:
        if isinstance(e, DeprecatedVersionCall):
            if e.status is None:
                waiting.append(len(calls))
            calls.append(e)
            callers.append(None)
        elif isinstance(e, (ApiCall, WrongHost)):
            match = next(
                (i for i in waiting if (calls[i].method, calls[i].path) == (e.method, e.path)), None
            )
            if match is not None:
                callers[match] = e.username
                waiting.remove(match)
    return list(zip(calls, callers, strict=True))


def _family(call: DeprecatedVersionCall) -> str:
    """The API family of the call's path (``cdp`` of ``/v2026-06/cdp/audiences``)."""
    parts = call.path.split("/")
    return parts[2] if len(parts) > 2 else ""


def deprecated_calls(evidence: Evidence) -> list[DeprecatedVersionCall]:
    """The calls of the evidence that are findings: to a version at End of Life (410),
    or to a version in End of Support after an earlier answer to the same client (the
    same account or OAuth client, or the same unknown one) said so for the same API."""
    told: set[tuple[str | None, str, str]] = set()
    found = []
    for call, caller in _callers(evidence):
        key = (caller, call.api_version, _family(call))
        if call.status is not None or key in told:
            found.append(call)
        told.add(key)
    return found


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
