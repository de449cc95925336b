"""The checks (reuse, single flight, counts, expiry, logout) and their messages:
what was expected, what came, the timeline, how to fix it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.diagnosis import diagnose_reauth_after, fix_after_forbidden
from .._service.events import (
    ApiCall,
    CredentialExpired,
    CredentialRevoked,
    Grant,
    LoggedIn,
    LoggedOut,
    SessionExpired,
    grant_version,
    grants,
)
from .._service.flows.registry import DEFAULT_FLOW, FLOWS, check_version, flow_class

if TYPE_CHECKING:
    from .._service.options import Options

#: Lines of a timeline shown before and after the line it is about; the rest is elided.
from .scene import (
    Scene,
    concurrent_grants,
    grant_label,
    premature_grants,
)
from .timeline_text import (
    format_timeline,
    list_labels,
    preceding_call,
    times_text,
)

# -- the fixes -------------------------------------------------------------------------


def _fix_churn(options: Options, versions: set[str], herd: bool) -> str:
    fixes = [flow.fix_churn(options) for name, flow in FLOWS.items() if name in versions]
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
        label = grant_label(first)
        held = list_labels(first.while_valid)
        call = preceding_call(scene, first)
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
    versions = {grant_version(g) for g in premature}
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
        f"were requested while another grant to it was in flight; first: {grant_label(first)} at "
        f"{scene.offset(first.at.timestamp())}, requested before "
        f"{list_labels(first.concurrent_with)} was issued, so its client could not have "
        "reused it.\n\n"
        + format_timeline(scene, username=account, focus=first)
        + "\n\nFix: refresh in single flight: one thread or task refreshes under a lock "
        "while the others wait and then use its credential."
    )


def check_auth_count(
    scene: Scene, expected: int, *, version: str | None = None, username: str | None = None
) -> None:
    __tracebackhide__ = True
    check_version(version, what="version", none="every flow")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise TypeError(f"assert_auth_count(n): n must be an int >= 0, got {expected!r}")
    found = grants(scene.events, version=version, username=username)
    if len(found) == expected:
        return
    what = flow_class(version).grants_phrase if version else "credential grants"
    scope = f" for account {username!r}" if username else ""
    listed = ", ".join(f"{grant_label(g)} at {scene.offset(g.at.timestamp())}" for g in found[:10])
    if len(found) > 10:
        listed += f", ... ({len(found) - 10} more)"
    hint = ""
    if len(found) > expected and premature_grants(scene.events, username=username):
        hint = "\n\nSome grants were premature (churn): " + _fix_churn(
            scene.options,
            {grant_version(g) for g in premature_grants(scene.events, username=username)},
            bool(concurrent_grants(scene.events, username=username)),
        )
    elif not found:
        hint = (
            "\n\nNo credential was granted: did the client reach "
            f"{flow_class(version or DEFAULT_FLOW).title} at all? "
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
    fixes = list(
        dict.fromkeys(
            flow.fix_expired(scene.options) for name, flow in FLOWS.items() if name in versions
        )
    )
    return (
        f"pytest-mgmtauth: the client presented an expired credential {times_text(len(stale))}; "
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


def open_sessions(scene: Scene, username: str | None = None) -> list[LoggedIn]:
    """v1 sessions started in the scene and never ended with /v1/logout."""
    logged_out = {e.session for e in scene.events if isinstance(e, LoggedOut)}
    # A session the test itself ended (mgmt_server.expire / revoke) cannot be logged out.
    logged_out |= {
        e.credential
        for e in scene.events
        if isinstance(e, (CredentialExpired, CredentialRevoked))
        and flow_class(e.version).credential == "session"
    }
    return [
        g
        for g in grants(scene.events, username=username)
        if isinstance(g, LoggedIn) and g.session not in logged_out
    ]


def open_session_message(scene: Scene, *, username: str | None = None) -> str | None:
    """Which v1 sessions opened in the test were not ended with /v1/logout, or ``None``."""
    timed_out = {e.session: e for e in scene.events if isinstance(e, SessionExpired)}
    still_open = open_sessions(scene, username)
    if not still_open:
        return None
    described = []
    for g in still_open:
        ended = timed_out.get(g.session)
        state = (
            f"timed out idle at {scene.offset(ended.at.timestamp())}"
            if ended is not None
            else "still active"
        )
        described.append(
            f"{g.session} of {g.username!r} (started {scene.offset(g.at.timestamp())}, used "
            f"{times_text(scene.uses.get(g.session, 0))}, {state})"
        )
    first = still_open[0]
    accounts = {g.username for g in still_open}
    return (
        f"pytest-mgmtauth: {len(still_open)} v1 session(s) were not ended with "
        f"/v1/logout: {'; '.join(described)}\n\n"
        + format_timeline(scene, username=first.username if len(accounts) == 1 else None)
        + "\n\nFix: when done, POST /v1/logout with 'Cookie: JSESSIONID=<id>' (in a "
        "finally: block or a context manager's __exit__), so the session does not linger "
        "until its idle timeout."
    )
