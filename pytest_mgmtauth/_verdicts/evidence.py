"""What the checks look at and how they show it: the events of one test placed in time
(Evidence), the grants among them and the figures of the summary; and the timeline a
failure message shows: one line per event (rendered by the event itself), repeats
folded, the credentials table, long timelines cut around the line they are about."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from .._service.events import (
    ApiCall,
    AuthRejected,
    BadRequest,
    CredentialExpired,
    CredentialRevoked,
    Event,
    Grant,
    LoggedIn,
    LoggedOut,
    LoginRejected,
    LogoutRejected,
    RateLimited,
    SessionExpired,
    Throttled,
    TokenIssued,
    TunnelClosed,
    WrongHost,
    format_moment,
    grants,
    timeline_origin,
)
from .._service.flows.registry import FLOWS
from .._service.records import AUTH_FAILED

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from .._service.options import Options


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
        """``HH:MM:SS`` since time zero, or the date and time 100 hours or more away."""
        return format_moment(timestamp, self.origin)

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
            RateLimited,
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


#: Lines of a timeline shown before and after the line it is about; the rest is elided.
_CONTEXT_BEFORE = 12
_CONTEXT_AFTER = 8
_HEAD = 4

# -- the timeline --------------------------------------------------------------------


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def list_labels(labels: Sequence[str], limit: int = 4) -> str:
    """``T1, T2, T3`` or, for a long churn, ``T1, T2, T3, T4 and 196 more``."""
    if len(labels) <= limit + 1:
        return ", ".join(labels)
    return f"{', '.join(labels[:limit])} and {len(labels) - limit} more"


def issued(labels: Sequence[str]) -> str:
    """``T2 was issued``, ``T2, T3 were issued``."""
    return f"{list_labels(labels)} {'was' if len(labels) == 1 else 'were'} issued"


def times_text(n: int) -> str:
    return f"{n} time" if n == 1 else f"{n} times"


def event_text(event: Event, evidence: Evidence) -> str:
    """One timeline line for an event, without its time."""
    return event.line(evidence.when)


@dataclasses.dataclass
class _Line:
    at: float
    text: str
    marks: list[str] = dataclasses.field(default_factory=list)
    repeat: int = 1
    until: float | None = None


def _annotate(grant: Grant, evidence: Evidence) -> list[str]:
    marks = []
    if grant.while_valid:
        held = list_labels(grant.while_valid)
        expiries = evidence.expiries
        known = [h for h in grant.while_valid if h in expiries]
        left = ""
        if known:
            soonest = min(known, key=lambda h: expiries[h])
            more = _duration(expiries[soonest] - grant.at.timestamp())
            left = f" ({soonest} for another {more})" if len(known) > 1 else f" for another {more}"
        marks.append(f"PREMATURE: {held} still valid{left}")
    if grant.concurrent_with:
        marks.append(
            f"CONCURRENT: requested before {issued(grant.concurrent_with)} (thundering herd)"
        )
    return marks


def timeline_lines(evidence: Evidence, username: str | None) -> list[_Line]:
    lines: list[_Line] = []
    # Expiry is not an event (nothing happens on the wire); shown where it falls, after
    # the events of the same moment.
    expiries: list[_Line] = []
    for e in evidence.events:
        if username is not None and e.username not in (username, None):
            continue  # another account's
        marks = _annotate(e, evidence) if isinstance(e, (TokenIssued, LoggedIn)) else []
        lines.append(_Line(e.at.timestamp(), event_text(e, evidence), marks))
        if isinstance(e, TokenIssued) and e.expires_at.timestamp() <= evidence.now:
            used = times_text(evidence.uses.get(e.token, 0))
            expiries.append(_Line(e.expires_at.timestamp(), f"{e.token} expired (used {used})"))
    lines = sorted(lines + expiries, key=lambda line: line.at)
    # A client in a loop makes the same call many times: one line with a count.
    merged: list[_Line] = []
    for line in lines:
        last = merged[-1] if merged else None
        if last is not None and not line.marks and not last.marks and last.text == line.text:
            last.repeat += 1
            last.until = line.at
        else:
            merged.append(line)
    return merged


def _render(line: _Line, evidence: Evidence) -> str:
    text = f"  {evidence.offset(line.at)}  {line.text}"
    if line.repeat > 1:
        until = (
            f", until {evidence.offset(line.until)}" if line.until not in (None, line.at) else ""
        )
        text += f"  (x{line.repeat}{until})"
    for mark in line.marks:
        text += f"\n            <-- {mark}"
    return text


def _credentials_table(evidence: Evidence, username: str | None) -> list[str]:
    """Each credential of the account: issued, used N times, how it ended."""
    rows = []
    # What ended each credential, first occurrence of each kind, with its time.
    ends: dict[str, dict[str, float]] = {}
    for e in evidence.events:
        at = e.at.timestamp()
        if isinstance(e, LoggedOut):
            ends.setdefault(e.session, {}).setdefault("logged out", at)
        elif isinstance(e, SessionExpired):
            ends.setdefault(e.session, {}).setdefault("timed out", at)
        elif isinstance(e, ApiCall) and e.credential and e.return_code == AUTH_FAILED:
            ends.setdefault(e.credential, {}).setdefault("first refused", at)
        elif isinstance(e, CredentialExpired):
            ends.setdefault(e.credential, {}).setdefault("expired on cue", at)
        elif isinstance(e, CredentialRevoked):
            ends.setdefault(e.credential, {}).setdefault("revoked", at)
    for g in grants(evidence.events, username=username):
        label = grant_label(g)
        marks = dict(ends.get(label, {}))
        if isinstance(g, TokenIssued) and g.expires_at.timestamp() <= evidence.now:
            marks["expired"] = g.expires_at.timestamp()
        if marks:
            state = ", ".join(
                f"{what} {evidence.offset(at)}"
                for what, at in sorted(marks.items(), key=lambda m: m[1])
            )
        else:
            state = "still valid" if isinstance(g, TokenIssued) else "still active"
        flags = "".join(
            f"  [{flag}]"
            for flag, on in (("premature", g.while_valid), ("concurrent", g.concurrent_with))
            if on
        )
        owner = f" {g.username}" if username is None else ""
        rows.append(
            f"  {label:<4} {g.fingerprint}{owner}  issued {evidence.offset(g.at.timestamp())}, "
            f"used {times_text(evidence.uses.get(label, 0))}, {state}{flags}"
        )
    return rows


def principal(events: Sequence[Event], username: str) -> str:
    """How texts name ``username``: ``account``, or the word of the flow whose
    credentials it was granted or presented (an OAuth client)."""
    for event in events:
        flow = FLOWS.get(str(getattr(event, "version", "")))
        if event.username == username and flow is not None:
            return flow.principal
    return "account"


def format_timeline(
    evidence: Evidence,
    *,
    username: str | None = None,
    focus: Event | None = None,
    whole: bool = False,
) -> str:
    """The timeline of one account (or of all), around ``focus`` when it is long (every
    line when ``whole``)."""
    lines = timeline_lines(evidence, username)
    who = f"{principal(evidence.events, username)} {username!r}" if username else "all accounts"
    header = f"Timeline of {who} (simulated time since the test started):"
    if not lines:
        return f"{header}\n  (nothing happened)"
    index = 0
    if focus is not None:
        focus_text = event_text(focus, evidence)
        index = next(
            (i for i, line in enumerate(lines) if line.text == focus_text and line.marks),
            next((i for i, line in enumerate(lines) if line.text == focus_text), 0),
        )
    start = 0 if whole else max(0, index - _CONTEXT_BEFORE)
    end = (
        len(lines)
        if whole
        else min(len(lines), max(index + _CONTEXT_AFTER + 1, start + _CONTEXT_BEFORE + 9))
    )
    start = start if start > _HEAD else 0  # eliding no more than the head would show
    shown = [_render(line, evidence) for line in lines[start:end]]
    if start:
        head = (_render(line, evidence) for line in lines[:_HEAD])
        shown = [*head, f"  ... {start - _HEAD} more line(s) ...", *shown]
    if end < len(lines):
        shown.append(
            f"  ... {len(lines) - end} more line(s): {evidence.whole_timeline} shows them all"
        )
    table = _credentials_table(evidence, username)
    parts = [header, *shown]
    if table:
        parts += ["Credentials:", *table]
    return "\n".join(parts)


def preceding_call(evidence: Evidence, grant: Grant) -> ApiCall | None:
    index = next(i for i, e in enumerate(evidence.events) if e is grant)
    for e in reversed(evidence.events[:index]):
        if isinstance(e, ApiCall) and e.username == grant.username:
            return e
    return None
