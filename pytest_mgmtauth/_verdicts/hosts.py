"""The verdict on hosts: requests sent to a host of the service that does not serve
them (a v3 API call at the v3 auth host instead of the ``host`` of the auth answer, a
v2 call at the region host...), one finding of kind ``wrong_host`` per account."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.call_events import WrongHost
from .timeline_text import format_timeline, principal

if TYPE_CHECKING:
    from .evidence import Evidence

#: Requests named in a finding's fix before "and N more".
_FIX_LIMIT = 3


def wrong_hosts(evidence: Evidence) -> list[WrongHost]:
    """Every request of the evidence refused for its host, oldest first."""
    return [e for e in evidence.events if isinstance(e, WrongHost)]


def wrong_host_message(evidence: Evidence, username: str | None) -> str | None:
    """What went to the wrong host for ``username`` (``None``: the requests that named
    no known account), the timeline, and where each belongs; ``None`` if nothing did."""
    wrong = [e for e in wrong_hosts(evidence) if e.username == username]
    if not wrong:
        return None
    first = wrong[0]
    where = list(dict.fromkeys(f"{e.method} {e.path} to {e.expected}" for e in wrong))
    more = f" and {len(where) - _FIX_LIMIT} more" if len(where) > _FIX_LIMIT else ""
    n = len(wrong)
    requests = "1 request" if n == 1 else f"{n} requests"
    who = (
        f"of {principal(evidence.events, username)} {username!r}"
        if username
        else "that named no known account"
    )
    them = "it" if n == 1 else "them"
    return (
        f"pytest-mgmtauth: {requests} {who} went to a host that does not serve {them}; "
        f"first: {first.method} {first.path} at {first.went} at "
        f"{evidence.offset(first.at.timestamp())} -> {first.status} ({first.reason})\n\n"
        + format_timeline(evidence, username=username, focus=first)
        + "\n\nFix: send "
        + "; ".join(where[:_FIX_LIMIT])
        + more
        + " (see docs/hosts.md)."
    )


def wrong_host_findings(evidence: Evidence) -> list[tuple[str | None, str]]:
    """``(username, message)`` per account that sent a request to the wrong host, in
    order of first appearance (``None`` last: requests that named no known account)."""
    names = list(dict.fromkeys(e.username for e in wrong_hosts(evidence)))
    names.sort(key=lambda u: u is None)
    found = []
    for username in names:
        message = wrong_host_message(evidence, username)
        if message is not None:
            found.append((username, message))
    return found
