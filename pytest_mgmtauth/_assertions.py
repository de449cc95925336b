"""Checks in auth terms over one test's timeline, and the messages that explain them.

Pure functions of the events (no pytest): each ``check_*`` raises ``AssertionError``
with a message that reads like a diagnosis, in this order: what went wrong in one
sentence naming the account and the first offending credential, the account's
credential timeline in simulated time since the test started, then the fix. The
plugin decides whether a finding fails a test or becomes a warning.

Credentials appear as their per-test labels (``T1``, ``S2``) and fingerprints, never
whole; the reasons on events are written the same way by the service.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from ._domain._diagnosis import diagnose_reauth_after, fix_after_forbidden
from ._domain._events import (
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
    SessionExpired,
    Throttled,
    TokenIssued,
    format_offset,
    grant_version,
    grants,
    timeline_origin,
)
from ._domain._records import AUTH_FAILED

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence
    from datetime import datetime

    from ._domain._options import Options

#: Lines of a timeline shown before and after the line it is about; the rest is elided.
_CONTEXT_BEFORE = 12
_CONTEXT_AFTER = 8
_HEAD = 4


@dataclasses.dataclass(frozen=True)
class Scene:
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

    # Computed once per scene: a churning test has hundreds of grants and calls.

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


def _label(grant: Grant) -> str:
    return grant.token if isinstance(grant, TokenIssued) else grant.session


_version = grant_version


def premature_grants(events: Sequence[Event], *, username: str | None = None) -> list[Grant]:
    """Grants made while the account still held a valid credential: churn."""
    return [g for g in grants(events, username=username) if g.while_valid]


def concurrent_grants(events: Sequence[Event], *, username: str | None = None) -> list[Grant]:
    """Grants whose request was in flight while another grant to the account was made."""
    return [g for g in grants(events, username=username) if g.concurrent_with]


def _is_rejection(event: Event) -> bool:
    if isinstance(event, ApiCall):
        return event.return_code is not None
    return isinstance(event, (AuthRejected, LoginRejected, LogoutRejected, Throttled, BadRequest))


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
        rejections=sum(1 for e in events if _is_rejection(e)),
        churn=len(premature_grants(events)),
        concurrent=len(concurrent_grants(events)),
    )


# -- the timeline --------------------------------------------------------------------


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _labels(labels: Sequence[str], limit: int = 4) -> str:
    """``T1, T2, T3`` or, for a long churn, ``T1, T2, T3, T4 and 196 more``."""
    if len(labels) <= limit + 1:
        return ", ".join(labels)
    return f"{', '.join(labels[:limit])} and {len(labels) - limit} more"


def _times(n: int) -> str:
    return f"{n} time" if n == 1 else f"{n} times"


def _describe(event: Event, scene: Scene) -> str:
    """One timeline line for an event, without its time."""
    return event.line(scene.when)


@dataclasses.dataclass
class _Line:
    at: float
    text: str
    marks: list[str] = dataclasses.field(default_factory=list)
    repeat: int = 1
    until: float | None = None


def _annotate(grant: Grant, scene: Scene) -> list[str]:
    marks = []
    if grant.while_valid:
        held = _labels(grant.while_valid)
        expiries = scene.expiries
        known = [h for h in grant.while_valid if h in expiries]
        left = ""
        if known:
            soonest = min(known, key=lambda h: expiries[h])
            more = _duration(expiries[soonest] - grant.at.timestamp())
            left = f" ({soonest} for another {more})" if len(known) > 1 else f" for another {more}"
        marks.append(f"PREMATURE: {held} still valid{left}")
    if grant.concurrent_with:
        marks.append(
            f"CONCURRENT: requested before {_labels(grant.concurrent_with)} was issued "
            "(thundering herd)"
        )
    return marks


def _involves(event: Event, username: str | None) -> bool:
    return username is None or event.username in (username, None)


def _lines(scene: Scene, username: str | None) -> list[_Line]:
    events = [e for e in scene.events if _involves(e, username)]
    lines: list[_Line] = []
    for e in events:
        marks = _annotate(e, scene) if isinstance(e, (TokenIssued, LoggedIn)) else []
        lines.append(_Line(e.at.timestamp(), _describe(e, scene), marks))
    # Expiry is not an event (nothing happens on the wire); show it where it falls.
    used_after: dict[str, int] = {}
    for e in events:
        if isinstance(e, TokenIssued) and e.expires_at.timestamp() <= scene.now:
            used_after[e.token] = scene.uses.get(e.token, 0)
            lines.append(
                _Line(
                    e.expires_at.timestamp(),
                    f"{e.token} expired (used {_times(used_after[e.token])})",
                )
            )
    lines.sort(key=lambda line: line.at)
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


def _render(line: _Line, scene: Scene) -> str:
    text = f"  {scene.offset(line.at)}  {line.text}"
    if line.repeat > 1:
        until = f", until {scene.offset(line.until)}" if line.until not in (None, line.at) else ""
        text += f"  (x{line.repeat}{until})"
    for mark in line.marks:
        text += f"\n            <-- {mark}"
    return text


def _credentials_table(scene: Scene, username: str | None) -> list[str]:
    """Each credential of the account: issued, used N times, how it ended."""
    rows = []
    # What ended each credential, first occurrence of each kind, with its time.
    ends: dict[str, dict[str, float]] = {}
    for e in scene.events:
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
    for g in grants(scene.events, username=username):
        label = _label(g)
        marks = dict(ends.get(label, {}))
        if isinstance(g, TokenIssued) and g.expires_at.timestamp() <= scene.now:
            marks["expired"] = g.expires_at.timestamp()
        if marks:
            state = ", ".join(
                f"{what} {scene.offset(at)}"
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
            f"  {label:<4} {g.fingerprint}{owner}  issued {scene.offset(g.at.timestamp())}, "
            f"used {_times(scene.uses.get(label, 0))}, {state}{flags}"
        )
    return rows


def format_timeline(
    scene: Scene,
    *,
    username: str | None = None,
    focus: Event | None = None,
    whole: bool = False,
) -> str:
    """The timeline of one account (or of all), around ``focus`` when it is long (every
    line when ``whole``)."""
    lines = _lines(scene, username)
    who = f"account {username!r}" if username else "all accounts"
    header = f"Timeline of {who} (simulated time since the test started):"
    if not lines:
        return f"{header}\n  (nothing happened)"
    index = 0
    if focus is not None:
        focus_text = _describe(focus, scene)
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
    shown = [_render(line, scene) for line in lines[start:end]]
    if start > _HEAD:
        skipped = start - _HEAD
        shown = [
            *(_render(line, scene) for line in lines[:_HEAD]),
            f"  ... {skipped} more line(s) ...",
            *shown,
        ]
    elif start:
        shown = [*(_render(line, scene) for line in lines[:start]), *shown]
    if end < len(lines):
        shown.append(
            f"  ... {len(lines) - end} more line(s): {scene.whole_timeline} shows them all"
        )
    table = _credentials_table(scene, username)
    parts = [header, *shown]
    if table:
        parts += ["Credentials:", *table]
    return "\n".join(parts)


def _preceding_call(scene: Scene, grant: Grant) -> ApiCall | None:
    index = next(i for i, e in enumerate(scene.events) if e is grant)
    for e in reversed(scene.events[:index]):
        if isinstance(e, ApiCall) and e.username == grant.username:
            return e
    return None


# -- the fixes -------------------------------------------------------------------------


def _fix_churn(options: Options, versions: set[str], herd: bool) -> str:
    fixes = []
    if "v2" in versions:
        fixes.append(
            "keep the token from /v2/auth and send it with every call; authenticate again "
            f"only within refresh_margin ({options.refresh_margin:g} s) of its expiry (the "
            f"JWT's exp claim, {options.token_ttl:g} s after issue) or after a call was "
            "answered 401 with returnCode 1401"
        )
    if "v3" in versions:
        fixes.append(
            "keep one v3 token per account and profile (from POST /v3/auth/accounts/"
            "{account}/profiles/{profile}) and send it with every call for that profile; "
            f"authenticate again only within refresh_margin ({options.refresh_margin:g} s) "
            "of its expiry or after a 401 with returnCode 1401"
        )
    if "v1" in versions:
        fixes.append(
            "keep the JSESSIONID and utk of one /v1/login for every v1 call; log in again "
            "only after /v1/logout, or after a call was answered 401 with returnCode 1401"
        )
    fixes.append(
        "threads and clients that use one account should share one credential (churn is "
        "counted per account, whichever client asked)"
    )
    if herd:
        fixes.append(
            "refresh in single flight: one thread or task refreshes under a lock while the "
            "others wait for its result, instead of all refreshing together"
        )
    return "Fix: " + "; ".join(fixes) + "."


# -- the checks ----------------------------------------------------------------------


def churn_message(scene: Scene, *, username: str | None = None) -> str | None:
    """Why the test churned credentials, or ``None`` if it reused them."""
    premature = premature_grants(scene.events, username=username)
    if not premature:
        return None
    by_account: dict[str, list[Grant]] = {}
    for g in premature:
        by_account.setdefault(g.username or "?", []).append(g)
    parts = []
    herd = False
    forbidden: list[bool] = []
    for account, found in by_account.items():
        first = found[0]
        label = _label(first)
        held = _labels(first.while_valid)
        call = _preceding_call(scene, first)
        code = f" ({call.return_code})" if call is not None and call.return_code else ""
        before = (
            f"the call before it: {call.method} {call.path} with {call.credential or '?'} -> "
            f"{call.status}{code} at {scene.offset(call.at.timestamp())}"
            if call is not None
            else "no API call was made by this account before it"
        )
        why = diagnose_reauth_after(call.return_code if call is not None else None)
        forbidden.append(why is not None)
        if why is not None:
            before += f": {why}"
        total = len(grants(scene.events, username=account))
        concurrent = [g for g in found if g.concurrent_with]
        herd = herd or bool(concurrent)
        herd_note = (
            f" {len(concurrent)} of them were requested at the same moment as another grant "
            "(a thundering herd: several threads or tasks refreshing together)."
            if concurrent
            else ""
        )
        parts.append(
            f"account {account!r} was granted {len(found)} new credential(s) while it still "
            f"held a valid one ({total} grants in all). First premature grant: {label} "
            f"({first.fingerprint}) at {scene.offset(first.at.timestamp())}, while {held} was "
            f"still valid; {before}.{herd_note}\n\n"
            + format_timeline(scene, username=account, focus=first)
        )
    versions = {_version(g) for g in premature}
    if all(forbidden):
        # Not the generic churn advice: keeping the credential would not have helped.
        fix = f"Fix: {fix_after_forbidden()}."
    else:
        fix = _fix_churn(scene.options, versions, herd)
        if any(forbidden):
            fix += f" Where a 1469 came before the new credential: {fix_after_forbidden()}."
    return "pytest-mgmtauth: token churn: " + "\n\n".join(parts) + "\n\n" + fix


def check_token_reused(scene: Scene, *, username: str | None = None) -> None:
    __tracebackhide__ = True
    message = churn_message(scene, username=username)
    if message is not None:
        raise AssertionError(message)


def check_single_flight(scene: Scene, *, username: str | None = None) -> None:
    """Fails when grants to one account were made while another was in flight."""
    __tracebackhide__ = True
    found = concurrent_grants(scene.events, username=username)
    if not found:
        return
    first = found[0]
    account = first.username or "?"
    raise AssertionError(
        f"pytest-mgmtauth: thundering herd: {len(found)} grant(s) to account {account!r} "
        f"were requested while another grant to it was in flight; first: {_label(first)} at "
        f"{scene.offset(first.at.timestamp())}, requested before "
        f"{_labels(first.concurrent_with)} was issued, so its client could not have "
        "reused it.\n\n"
        + format_timeline(scene, username=account, focus=first)
        + "\n\nFix: refresh in single flight: one thread or task refreshes under a lock "
        "while the others wait and then use its credential."
    )


def check_auth_count(
    scene: Scene, expected: int, *, version: str | None = None, username: str | None = None
) -> None:
    __tracebackhide__ = True
    if version not in (None, "v1", "v2", "v3"):
        raise ValueError(f"version must be 'v1', 'v2', 'v3' or None, got {version!r}")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise TypeError(f"assert_auth_count(n): n must be an int >= 0, got {expected!r}")
    found = grants(scene.events, version=version, username=username)
    if len(found) == expected:
        return
    what = {
        None: "credential grants",
        "v2": "/v2/auth tokens",
        "v3": "v3 tokens",
        "v1": "/v1/login sessions",
    }[version]
    scope = f" for account {username!r}" if username else ""
    listed = ", ".join(f"{_label(g)} at {scene.offset(g.at.timestamp())}" for g in found[:10])
    if len(found) > 10:
        listed += f", ... ({len(found) - 10} more)"
    hint = ""
    if len(found) > expected and premature_grants(scene.events, username=username):
        hint = "\n\nSome grants were premature (churn): " + _fix_churn(
            scene.options,
            {_version(g) for g in premature_grants(scene.events, username=username)},
            bool(concurrent_grants(scene.events, username=username)),
        )
    elif not found:
        hint = (
            "\n\nNo credential was granted: did the client reach "
            f"{ {'v1': '/v1/login', 'v3': 'v3 auth'}.get(version or '', '/v2/auth') } at all? "
            "Rejections are in the timeline above."
        )
    raise AssertionError(
        f"pytest-mgmtauth: expected {expected} {what}{scope}, got {len(found)}"
        + (f": {listed}" if listed else "")
        + "\n\n"
        + format_timeline(
            scene, username=username, focus=found[expected] if len(found) > expected else None
        )
        + hint
    )


def check_no_expired_credential_used(scene: Scene, *, username: str | None = None) -> None:
    """Fails when the client presented an expired bearer token or an ended session."""
    __tracebackhide__ = True
    message = expired_use_message(scene, username=username)
    if message is not None:
        raise AssertionError(message)


def expired_use_message(scene: Scene, *, username: str | None = None) -> str | None:
    """Why the client presented an expired bearer token or an ended v1 session, or
    ``None`` if it never did (a credential revoked or expired on cue does not count)."""
    stale = [
        e
        for e in scene.events
        if isinstance(e, ApiCall)
        and e.credential_expired
        and (username is None or e.username == username)
    ]
    if not stale:
        return None
    first = stale[0]
    account = first.username
    versions = {e.version for e in stale}
    fixes = []
    if versions & {"v2", "v3"}:
        fixes.append(
            "refresh proactively: before a call, authenticate again when the token is "
            f"within refresh_margin ({scene.options.refresh_margin:g} s) of its exp claim, "
            "instead of sending it until the service answers 401"
        )
    if "v1" in versions:
        fixes.append(
            "after /v1/logout or an idle timeout the session is gone: log in again before "
            "the next call instead of presenting the old JSESSIONID"
        )
    return (
        f"pytest-mgmtauth: the client presented an expired credential {_times(len(stale))}; "
        f"first: {first.method} {first.path} with {first.credential} at "
        f"{scene.offset(first.at.timestamp())} -> {first.status} ({first.reason})\n\n"
        + format_timeline(scene, username=account, focus=first)
        + "\n\nFix: "
        + "; ".join(fixes)
        + "."
    )


def check_logged_out(scene: Scene, *, username: str | None = None) -> None:
    """Fails when a v1 session opened in the test was not ended with /v1/logout."""
    __tracebackhide__ = True
    message = open_session_message(scene, username=username)
    if message is not None:
        raise AssertionError(message)


def _open_sessions(scene: Scene, username: str | None = None) -> list[LoggedIn]:
    """v1 sessions started in the scene and never ended with /v1/logout."""
    logged_out = {e.session for e in scene.events if isinstance(e, LoggedOut)}
    # A session the test itself ended (mgmt_server.expire / revoke) cannot be logged out.
    logged_out |= {
        e.credential
        for e in scene.events
        if isinstance(e, (CredentialExpired, CredentialRevoked)) and e.version == "v1"
    }
    return [
        g
        for g in grants(scene.events, version="v1", username=username)
        if isinstance(g, LoggedIn) and g.session not in logged_out
    ]


def open_session_message(scene: Scene, *, username: str | None = None) -> str | None:
    """Which v1 sessions opened in the test were not ended with /v1/logout, or ``None``."""
    timed_out = {e.session: e for e in scene.events if isinstance(e, SessionExpired)}
    open_sessions = _open_sessions(scene, username)
    if not open_sessions:
        return None
    described = []
    for g in open_sessions:
        ended = timed_out.get(g.session)
        state = (
            f"timed out idle at {scene.offset(ended.at.timestamp())}"
            if ended is not None
            else "still active"
        )
        described.append(
            f"{g.session} of {g.username!r} (started {scene.offset(g.at.timestamp())}, used "
            f"{_times(scene.uses.get(g.session, 0))}, {state})"
        )
    first = open_sessions[0]
    accounts = {g.username for g in open_sessions}
    return (
        f"pytest-mgmtauth: {len(open_sessions)} v1 session(s) were not ended with "
        f"/v1/logout: {'; '.join(described)}\n\n"
        + format_timeline(scene, username=first.username if len(accounts) == 1 else None)
        + "\n\nFix: when done, POST /v1/logout with 'Cookie: JSESSIONID=<id>' (in a "
        "finally: block or a context manager's __exit__), so the session does not linger "
        "until its idle timeout."
    )


# -- verdicts: what the teardown check and the report section say ---------------------

#: The kinds of finding, in the order they are reported.
KINDS: tuple[str, ...] = ("churn", "expired_use", "open_session")

#: How each kind is named in the report section.
_KIND_TITLES = {
    "churn": "churn",
    "expired_use": "expired-credential use",
    "open_session": "open v1 sessions",
}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One mistake the service punishes, for one account: ``kind`` is ``"churn"``,
    ``"expired_use"`` or ``"open_session"``; ``message`` is what the matching assertion
    (``assert_token_reused``, ``assert_no_expired_token_used``, ``assert_logged_out``)
    says for that account: the diagnosis, the timeline and the fix."""

    kind: str
    username: str | None
    message: str

    @property
    def headline(self) -> str:
        """The message's first paragraph: what went wrong, without the timeline."""
        return self.message.split("\n\n", 1)[0]

    @property
    def fix(self) -> str:
        """The message's last paragraph when it is the fix, else ''."""
        last = self.message.rsplit("\n\n", 1)[-1]
        return last if last.startswith("Fix:") else ""


_MESSAGES = {
    "churn": churn_message,
    "expired_use": expired_use_message,
    "open_session": open_session_message,
}


def _accounts_of(scene: Scene, kind: str) -> list[str]:
    """The accounts that may have a finding of ``kind``, in order of first appearance."""
    if kind == "churn":
        found = [g.username for g in premature_grants(scene.events)]
    elif kind == "expired_use":
        found = [
            e.username for e in scene.events if isinstance(e, ApiCall) and e.credential_expired
        ]
    else:
        found = [g.username for g in grants(scene.events, version="v1")]
    return list(dict.fromkeys(u for u in found if u is not None))


def default_kinds(options: Options) -> tuple[str, ...]:
    """The kinds the teardown check counts: churn and expired-credential use always,
    open v1 sessions with ``require_logout``."""
    return KINDS if options.require_logout else KINDS[:2]


def findings(scene: Scene, *, kinds: Collection[str] | None = None) -> list[Finding]:
    """The verdicts of one timeline: one :class:`Finding` per kind and account, in the
    order of :data:`KINDS`. ``kinds`` selects which count (default: :func:`default_kinds`
    of the scene's options)."""
    wanted = default_kinds(scene.options) if kinds is None else tuple(kinds)
    unknown = [k for k in wanted if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown finding kind(s) {unknown!r}; known: {', '.join(KINDS)}")
    found = []
    for kind in KINDS:
        if kind not in wanted:
            continue
        for username in _accounts_of(scene, kind):
            message = _MESSAGES[kind](scene, username=username)
            if message is not None:
                found.append(Finding(kind, username, message))
    return found


def finding_counts(scene: Scene) -> dict[str, int]:
    """How many of each thing :func:`findings` looks at, whether it counts or not:
    premature grants (``churn``), calls with an expired credential, sessions not logged
    out, and the figures of :func:`summarize` (for ``GET /_mgmtauth/check``)."""
    summary = summarize(scene.events)
    return {
        **{f.name: getattr(summary, f.name) for f in dataclasses.fields(summary)},
        "expired_use": sum(
            1 for e in scene.events if isinstance(e, ApiCall) and e.credential_expired
        ),
        "open_session": len(_open_sessions(scene)),
    }


#: A timeline of up to this many lines is shown whole in the report section.
_SECTION_LINES = 80
#: Rejections listed under an elided timeline.
_SECTION_REJECTIONS = 10


def report_section(scene: Scene, *, counted: Collection[str] | None = None) -> str:
    """The text of a test's ``mgmtauth timeline`` report section: the timeline of every
    account (grants, calls with their credential, rejections with their diagnosis), the
    credentials, and the verdicts of every kind, saying which the teardown check counts
    (``counted``, default :func:`default_kinds`)."""
    counts = default_kinds(scene.options) if counted is None else tuple(counted)
    everything = findings(scene, kinds=KINDS)
    lines = _lines(scene, None)
    whole = len(lines) <= _SECTION_LINES
    first_issue = next(
        (
            e
            for e in scene.events
            if (isinstance(e, (TokenIssued, LoggedIn)) and e.while_valid) or _is_rejection(e)
        ),
        None,
    )
    parts = [format_timeline(scene, focus=first_issue, whole=whole)]
    if not whole:
        rejected = [e for e in scene.events if _is_rejection(e)]
        if rejected:
            parts.append(f"Rejections ({len(rejected)}):")
            parts += [
                f"  {scene.offset(e.at.timestamp())}  {_describe(e, scene)}"
                for e in rejected[:_SECTION_REJECTIONS]
            ]
            if len(rejected) > _SECTION_REJECTIONS:
                parts.append(f"  ... {len(rejected) - _SECTION_REJECTIONS} more")
    parts.append("Verdicts:")
    for kind in KINDS:
        title = _KIND_TITLES[kind]
        mine = [f for f in everything if f.kind == kind]
        if not mine:
            parts.append(f"  {title}: none")
            continue
        note = "" if kind in counts else " (not checked: require_logout is off)"
        for finding in mine:
            headline = finding.headline.removeprefix("pytest-mgmtauth: ")
            parts.append(f"  {title}{note}: {headline}")
            if finding.fix and kind in counts:
                parts.append(f"    {finding.fix}")
    return "\n".join(parts)


class AuthFindingWarning(UserWarning):
    """Base of the teardown check's warnings: filter this one to treat them all alike."""

    __module__ = "pytest_mgmtauth"


class TokenChurnWarning(AuthFindingWarning):
    """A test's client was granted new credentials while it still held valid ones.

    Emitted at the end of a test that uses ``mgmt_server`` (unless it called
    ``assert_token_reused`` itself); the message carries the account's timeline. With
    ``strict`` the test fails instead.
    """

    # Shown in tracebacks and used in filterwarnings as its public name.
    __module__ = "pytest_mgmtauth"


class ExpiredCredentialWarning(AuthFindingWarning):
    """A test's client sent a call with a bearer token that had expired or a v1 session
    that had ended (logout, idle timeout), and the service refused it.

    Emitted at the end of a test that uses ``mgmt_server`` (unless it called
    ``assert_no_expired_token_used`` itself); with ``strict`` the test fails instead.
    """

    __module__ = "pytest_mgmtauth"


class OpenSessionWarning(AuthFindingWarning):
    """A v1 session opened in the test was not ended with ``/v1/logout``.

    Only with ``require_logout``, at the end of a test that uses ``mgmt_server`` (unless it
    called ``assert_logged_out`` itself); with ``strict`` the test fails instead.
    """

    __module__ = "pytest_mgmtauth"


#: The warning class of each kind of finding.
WARNINGS: dict[str, type[AuthFindingWarning]] = {
    "churn": TokenChurnWarning,
    "expired_use": ExpiredCredentialWarning,
    "open_session": OpenSessionWarning,
}
