"""The checks (reuse, single flight, counts, expiry, logout) and their messages:
what was expected, what came, the timeline, how to fix it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.events import (
    ApiCall,
    CredentialExpired,
    CredentialRevoked,
    Grant,
    LoggedIn,
    LoggedOut,
    SessionExpired,
    grants,
    shown,
)
from .._service.flows.registry import DEFAULT_FLOW, FLOWS, check_grants
from .._service.options import setting_names
from .._service.records import AUTH_FAILED
from .._service.secret_text import diagnose_reauth_after, fix_after_forbidden
from .evidence import (
    Evidence,
    concurrent_grants,
    format_timeline,
    grant_label,
    issued,
    list_labels,
    preceding_call,
    premature_grants,
    principal,
    times_text,
)

if TYPE_CHECKING:
    from .._service.options import Options

# -- the fixes -------------------------------------------------------------------------


def margin_note(options: Options, versions: set[str] | None = None) -> str:
    """What every churn message ends with: the margin that decides what is early, each
    flow's own (``Flow.churn_margin``)."""
    margins = {
        name: flow.churn_margin(options)
        for name, flow in FLOWS.items()
        if versions is not None and name in versions
    }
    if not margins or set(margins.values()) == {options.margin}:
        within = f"within refresh_margin ({options.margin:g} s)"
    else:
        within = (
            "within its flow's refresh margin ("
            + "; ".join(f"{name}: {margin:g} s" for name, margin in margins.items())
            + ")"
        )
    return (
        f"A new credential {within} of the old one's expiry is reuse, not churn; if the "
        "client renews earlier on purpose, widen it with " + setting_names("refresh_margin") + "."
    )


def _fix_churn(
    options: Options, versions: set[str], herd: bool, *, with_margin: bool = True
) -> str:
    fixes = [flow.fix_churn(options) for name, flow in FLOWS.items() if name in versions]
    whom = " or ".join(
        dict.fromkeys(flow.principal for flow in FLOWS.values() if flow.name in versions)
    )
    fixes.append(
        f"threads and clients that use one {whom or 'account'} should share one credential "
        f"(churn is counted per {whom or 'account'}, whichever client asked)"
    )
    if herd:
        fixes.append(
            "refresh in single flight: one thread or task refreshes under a lock while the "
            "others wait for its result, instead of all refreshing together"
        )
    fix = "Fix: " + "; ".join(fixes) + "."
    return f"{fix} {margin_note(options, versions)}" if with_margin else fix


# -- the checks ----------------------------------------------------------------------


def _fail(message: str | None) -> None:
    __tracebackhide__ = True
    if message is not None:
        raise AssertionError(message)


def churn_message(evidence: Evidence, *, username: str | None = None) -> str | None:
    """Why the test churned credentials, or ``None`` if it reused them."""
    premature = premature_grants(evidence.events, username=username)
    if not premature:
        return None
    by_account: dict[str, list[Grant]] = {}
    for g in premature:
        by_account.setdefault(g.username or "?", []).append(g)
    parts = []
    herd = False
    forbidden: list[bool] = []
    forbidden_statuses: set[int] = set()
    for account, found in by_account.items():
        first = found[0]
        label = grant_label(first)
        held = list_labels(first.while_valid)
        call = preceding_call(evidence, first)
        # A flow's own error code where its refusals have one (OAuth's invalid_token).
        code = (
            f" ({call.error or call.return_code})" if call is not None and call.return_code else ""
        )
        before = (
            f"the call before it: {shown(call.method)} {shown(call.path)} with "
            f"{call.credential or '?'} -> {call.status}{code} at "
            f"{evidence.offset(call.at.timestamp())}"
            if call is not None
            else "no API call was made by this account before it"
        )
        why = diagnose_reauth_after(call.return_code, call.status) if call is not None else None
        forbidden.append(why is not None)
        if why is not None and call is not None:
            forbidden_statuses.add(call.status)
            before += f": {why}"
        total = len(grants(evidence.events, username=account))
        concurrent = [g for g in found if g.concurrent_with]
        herd = herd or bool(concurrent)
        herd_note = (
            f" {len(concurrent)} of them were requested at the same moment as another grant "
            "(a thundering herd: several threads or tasks refreshing together)."
            if concurrent
            else ""
        )
        parts.append(
            f"{principal(evidence.events, account)} {account!r} was granted {len(found)} new "
            "credential(s) while it still "
            f"held a valid one ({total} grants in all). First premature grant: {label} "
            f"({first.fingerprint}) at {evidence.offset(first.at.timestamp())}, while {held} was "
            f"still valid; {before}.{herd_note}\n\n"
            + format_timeline(evidence, username=account, focus=first)
        )
    versions = {g.version for g in premature}
    if all(forbidden):
        # Not the generic churn advice: keeping the credential would not have helped.
        fix = f"Fix: {fix_after_forbidden(forbidden_statuses)}."
    else:
        fix = _fix_churn(evidence.options, versions, herd, with_margin=False)
        if any(forbidden):
            fix += (
                " Where a missing permission came before the new credential: "
                f"{fix_after_forbidden(forbidden_statuses)}."
            )
    fix += " " + margin_note(evidence.options, versions)
    return "pytest-mgmtauth: token churn: " + "\n\n".join(parts) + "\n\n" + fix


def check_token_reused(evidence: Evidence, *, username: str | None = None) -> None:
    __tracebackhide__ = True
    _fail(churn_message(evidence, username=username))


def check_single_flight(evidence: Evidence, *, username: str | None = None) -> None:
    """Fails when grants to one account were made while another was in flight."""
    __tracebackhide__ = True
    found = concurrent_grants(evidence.events, username=username)
    if not found:
        return
    first = found[0]
    account = first.username or "?"
    raise AssertionError(
        f"pytest-mgmtauth: thundering herd: {len(found)} grant(s) to "
        f"{principal(evidence.events, account)} {account!r} "
        f"were requested while another grant to it was in flight; first: {grant_label(first)} at "
        f"{evidence.offset(first.at.timestamp())}, requested before "
        f"{issued(first.concurrent_with)}, so its client could not have reused "
        f"{'it' if len(first.concurrent_with) == 1 else 'them'}.\n\n"
        + format_timeline(evidence, username=account, focus=first)
        + "\n\nFix: refresh in single flight: one thread or task refreshes under a lock "
        "while the others wait and then use its credential."
    )


def check_auth_count(
    evidence: Evidence, expected: int, *, version: str | None = None, username: str | None = None
) -> None:
    __tracebackhide__ = True
    check_grants(version, what="assert_auth_count")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise TypeError(f"assert_auth_count(n): n must be an int >= 0, got {expected!r}")
    found = grants(evidence.events, version=version, username=username)
    if len(found) == expected:
        return
    what = FLOWS[version].grants_phrase if version else "credential grants"
    scope = f" for {principal(evidence.events, username)} {username!r}" if username else ""
    listed = ", ".join(
        f"{grant_label(g)} at {evidence.offset(g.at.timestamp())}" for g in found[:10]
    )
    if len(found) > 10:
        listed += f", ... ({len(found) - 10} more)"
    hint = ""
    if len(found) > expected and premature_grants(evidence.events, username=username):
        hint = "\n\nSome grants were premature (churn): " + _fix_churn(
            evidence.options,
            {g.version for g in premature_grants(evidence.events, username=username)},
            bool(concurrent_grants(evidence.events, username=username)),
        )
    elif not found:
        hint = (
            "\n\nNo credential was granted: did the client reach "
            f"{FLOWS[version or DEFAULT_FLOW].title} at all? "
            "Rejections are in the timeline above."
        )
    raise AssertionError(
        f"pytest-mgmtauth: expected {expected} {what}{scope}, got {len(found)}"
        + (f": {listed}" if listed else "")
        + "\n\n"
        + format_timeline(
            evidence, username=username, focus=found[expected] if len(found) > expected else None
        )
        + hint
    )


def check_no_expired_credential_used(evidence: Evidence, *, username: str | None = None) -> None:
    """Fails when the client presented an expired bearer token or an ended session."""
    __tracebackhide__ = True
    _fail(expired_use_message(evidence, username=username))


def expired_uses(evidence: Evidence, username: str | None = None) -> list[ApiCall]:
    """Calls that presented an expired bearer token or an ended v1 session, except the
    one a client could not foresee and recovered from: the first call with a session
    the service ended idle (the interface document: "The user is logged out
    automatically; logout call is optional"), when the account logs in again before
    presenting that session again. A credential revoked or expired on cue never counts
    (the service does not mark those calls)."""
    events = evidence.events
    timed_out = {e.session for e in events if isinstance(e, SessionExpired)}
    stale = [
        (i, e)
        for i, e in enumerate(events)
        if isinstance(e, ApiCall)
        and e.credential_expired
        and (username is None or e.username == username)
    ]
    by_credential: dict[str | None, list[int]] = {}
    for i, e in stale:
        by_credential.setdefault(e.credential, []).append(i)
    forgiven = set()
    for label, indexes in by_credential.items():
        if label not in timed_out or len(indexes) != 1:
            continue
        first = events[indexes[0]]
        if any(
            isinstance(later, LoggedIn) and later.username == first.username
            for later in events[indexes[0] + 1 :]
        ):
            forgiven.add(indexes[0])
    return [e for i, e in stale if i not in forgiven]


def expired_use_message(evidence: Evidence, *, username: str | None = None) -> str | None:
    """Why the client presented an expired bearer token or an ended v1 session, or
    ``None`` if it never did (see :func:`expired_uses` for what does not count)."""
    stale = expired_uses(evidence, username)
    if not stale:
        return None
    first = stale[0]
    account = first.username
    versions = {e.version for e in stale}
    fixes = list(
        dict.fromkeys(
            flow.fix_expired(evidence.options) for name, flow in FLOWS.items() if name in versions
        )
    )
    return (
        f"pytest-mgmtauth: the client presented an expired credential {times_text(len(stale))}; "
        f"first: {call_text(first)} at {evidence.offset(first.at.timestamp())} -> {first.status} "
        f"({shown(first.reason or '')})\n\n"
        + format_timeline(evidence, username=account, focus=first)
        + "\n\nFix: "
        + "; ".join(fixes)
        + "."
    )


def call_text(call: ApiCall) -> str:
    """``GET /path with T1``: a call as messages name it (what came from the request
    escaped, so that it cannot pass for a line of the message)."""
    credential = call.credential or "no known credential"
    return f"{shown(call.method)} {shown(call.path)} with {credential}"


def refused_calls(
    evidence: Evidence, username: str | None = None, *, unattributed: bool = False
) -> list[ApiCall]:
    """Protected calls refused because the client sent the wrong credential (none, a
    malformed or unknown one, another account's or profile's, a v1 call without its
    session): of ``username`` (``None``: of every account), or with ``unattributed``
    only those the fake could tie to no account."""
    return [
        e
        for e in evidence.events
        if isinstance(e, ApiCall)
        and e.wrong_credential
        and (e.username is None if unattributed else (username is None or e.username == username))
    ]


def check_no_refused_calls(evidence: Evidence, *, username: str | None = None) -> None:
    """Fails when the service refused a protected call for the wrong credential."""
    __tracebackhide__ = True
    _fail(refused_call_message(evidence, username=username))


#: How a test says it sends wrong credentials on purpose (the messages name it).
EXPECT_REFUSALS = "mgmt_server.expect_refusals()"


def refused_call_message(
    evidence: Evidence, *, username: str | None = None, unattributed: bool = False
) -> str | None:
    """Why protected calls were refused for the wrong credential, or ``None``."""
    refused = refused_calls(evidence, username, unattributed=unattributed)
    if not refused:
        return None
    first = refused[0]
    who = (
        ""
        if first.username is None
        else f" of {principal(evidence.events, first.username)} {first.username!r}"
    )
    return (
        f"pytest-mgmtauth: {len(refused)} protected call(s){who} were refused because the "
        f"client sent the wrong credential; first: {call_text(first)} at "
        f"{evidence.offset(first.at.timestamp())} -> {first.status} "
        f"({first.error or first.return_code}: "
        f"{shown(first.reason or '')})\n\n"
        + format_timeline(evidence, username=first.username, focus=first)
        + "\n\nFix: send every call the credential the service granted for it (each "
        "refusal above says what arrived and what was expected): "
        + "; ".join(dict.fromkeys(FLOWS[call.version].fix_refused() for call in refused))
        + ". If the test sends a wrong credential on "
        f"purpose, say so with {EXPECT_REFUSALS} (or the ?refused_call=false switch of "
        "mgmtauth-server's GET /_mgmtauth/check)."
    )


def check_logged_out(evidence: Evidence, *, username: str | None = None) -> None:
    """Fails when a v1 session opened in the test was not ended with /v1/logout."""
    __tracebackhide__ = True
    _fail(open_session_message(evidence, username=username))


def open_sessions(evidence: Evidence, username: str | None = None) -> list[LoggedIn]:
    """v1 sessions started in the evidence that the client still held at the end and never
    ended with /v1/logout. Not open: a session the service ended (idle timeout; logout
    is optional then), one the test ended (``mgmt_server.expire`` / ``revoke``), and one
    released by a refused call of its account (a 1401 after it was granted: the client
    lost it, and that refusal is the finding)."""
    ended = {e.session for e in evidence.events if isinstance(e, (LoggedOut, SessionExpired))}
    ended |= {
        e.credential
        for e in evidence.events
        if isinstance(e, (CredentialExpired, CredentialRevoked))
        and FLOWS[e.version].credential == "session"
    }
    still: list[LoggedIn] = []
    for i, g in enumerate(evidence.events):
        if not isinstance(g, LoggedIn) or g.session in ended:
            continue
        if username is not None and g.username != username:
            continue
        released = any(
            isinstance(e, ApiCall)
            and e.version == g.version
            and e.username == g.username
            and e.return_code == AUTH_FAILED
            and e.credential in (g.session, None)
            for e in evidence.events[i + 1 :]
        )
        if not released:
            still.append(g)
    return still


def open_session_message(evidence: Evidence, *, username: str | None = None) -> str | None:
    """Which v1 sessions opened in the test were not ended with /v1/logout, or ``None``."""
    still_open = open_sessions(evidence, username)
    if not still_open:
        return None
    described = [
        f"{g.session} of {g.username!r} (started {evidence.offset(g.at.timestamp())}, used "
        f"{times_text(evidence.uses.get(g.session, 0))}, still active)"
        for g in still_open
    ]
    first = still_open[0]
    accounts = {g.username for g in still_open}
    return (
        f"pytest-mgmtauth: {len(still_open)} v1 session(s) were not ended with "
        f"/v1/logout: {'; '.join(described)}\n\n"
        + format_timeline(evidence, username=first.username if len(accounts) == 1 else None)
        + "\n\nFix: when done, POST /v1/logout with 'Cookie: JSESSIONID=<id>' (in a "
        "finally: block or a context manager's __exit__), so the session does not linger "
        "until its idle timeout."
    )
