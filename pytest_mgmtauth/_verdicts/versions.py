"""The check of API versions: calls to a calendar-versioned API whose version was past
Active (``_service/api_versions.py``), one finding of kind ``deprecated_version`` per
test. "Monitor deprecation headers: Set up monitoring to alert when responses start
including Sunset headers" (dev-portal-api-versioning): a client that never notices them
is what the check catches, before End of Life turns its calls into 410s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.events import DeprecatedVersionCall
from .evidence import format_timeline

if TYPE_CHECKING:
    from .evidence import Evidence

#: Successors named in the fix before "and N more".
_FIX_LIMIT = 3


def deprecated_calls(evidence: Evidence) -> list[DeprecatedVersionCall]:
    """Every call of the evidence to a version in End of Support or at End of Life."""
    return [e for e in evidence.events if isinstance(e, DeprecatedVersionCall)]


def deprecated_version_message(evidence: Evidence) -> str | None:
    """What went to versions past Active, the timeline, and where each call belongs;
    ``None`` if nothing did."""
    calls = deprecated_calls(evidence)
    if not calls:
        return None
    first = calls[0]
    gone = sum(1 for c in calls if c.status is not None)
    n = len(calls)
    counted = "1 call" if n == 1 else f"{n} calls"
    at_end = f", {gone} of them at End of Life (410)" if gone else ""
    moves = list(dict.fromkeys(f"{c.method} {c.path} to {c.successor}" for c in calls))
    more = f" and {len(moves) - _FIX_LIMIT} more" if len(moves) > _FIX_LIMIT else ""
    return (
        f"pytest-mgmtauth: {counted} went to API versions past Active{at_end}; first: "
        f"{first.line(evidence.when)} at {evidence.offset(first.at.timestamp())}\n\n"
        + format_timeline(evidence, focus=first)
        + "\n\nFix: move "
        + "; ".join(moves[:_FIX_LIMIT])
        + more
        + ", and have the client watch its answers for the Sunset and Deprecation headers "
        'and follow Link rel="successor-version" (the section "The lifecycle of API '
        "versions\" of the documentation's page OAuth client credentials)."
    )
