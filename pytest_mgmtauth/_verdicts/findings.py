"""Verdicts: the findings the teardown check, the report section and the control
API's /check give, and the warnings they are raised as. The checks of credentials are in
``checks.py``; the check of hosts is here: requests sent to a host of the service that
does not serve them (a v3 API call at the v3 auth host instead of the ``host`` of the
auth answer, a v2 call at the region host...), one finding of kind ``wrong_host`` per
account."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .._service.events import ApiCall, LoggedIn, TokenIssued, WrongHost, grants
from .checks import (
    churn_message,
    expired_use_message,
    expired_uses,
    open_session_message,
    open_sessions,
    refused_call_message,
    refused_calls,
)
from .evidence import (
    Evidence,
    event_text,
    format_timeline,
    is_rejection,
    premature_grants,
    principal,
    summarize,
    timeline_lines,
)
from .versions import deprecated_calls, deprecated_version_message

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from .._service.options import Options

# -- the check of hosts ---------------------------------------------------------------

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
        + ' (see the page "Hosts and interception" of pytest-mgmtauth\'s documentation).'
    )


def wrong_host_findings(evidence: Evidence) -> list[tuple[str | None, str]]:
    """``(username, message)`` per account that sent a request to the wrong host, in
    order of first appearance (``None`` last: requests that named no known account)."""
    names = list(dict.fromkeys(e.username for e in wrong_hosts(evidence)))
    names.sort(key=lambda u: u is None)
    return [(u, m) for u in names if (m := wrong_host_message(evidence, u)) is not None]


# -- verdicts: what the teardown check and the report section say ---------------------

#: How each kind of finding is named in the report section.
_KIND_TITLES = {
    "churn": "churn",
    "expired_use": "expired-credential use",
    "refused_call": "refused calls (wrong credential)",
    "open_session": "open v1 sessions",
    "wrong_host": "wrong host",
    "deprecated_version": "API versions past Active",
    "drift": "drift from the service's recording",
}
#: The kinds of finding, in the order they are reported.
KINDS: tuple[str, ...] = tuple(_KIND_TITLES)

#: The kinds an option turns off: whether the options do, and why it is not counted then.
_OFF: dict[str, tuple[Callable[[Options], bool], str]] = {
    "open_session": (lambda options: not options.require_logout, "require_logout is off"),
    "deprecated_version": (lambda options: options.sunset_check == "off", "sunset_check is off"),
}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One mistake the service punishes, for one account: its ``kind`` (:data:`KINDS`)
    and the ``message`` of the matching assertion for that account: the diagnosis, the
    timeline and the fix. ``username`` is ``None`` where the fake could tie it to no
    account (an unknown or malformed credential, a request that named none)."""

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
    "refused_call": refused_call_message,
    "open_session": open_session_message,
}


def _accounts_of(evidence: Evidence, kind: str) -> list[str]:
    """The accounts that may have a finding of ``kind``, in order of first appearance."""
    if kind == "churn":
        found = [g.username for g in premature_grants(evidence.events)]
    elif kind == "expired_use":
        found = [
            e.username for e in evidence.events if isinstance(e, ApiCall) and e.credential_expired
        ]
    elif kind == "refused_call":
        found = [e.username for e in refused_calls(evidence)]
    else:
        found = [g.username for g in grants(evidence.events) if isinstance(g, LoggedIn)]
    return list(dict.fromkeys(u for u in found if u is not None))


def default_kinds(options: Options) -> tuple[str, ...]:
    """The kinds the teardown check counts: churn, expired-credential use, refused
    calls and requests to the wrong host always, open v1 sessions with
    ``require_logout``, calls to API versions past Active unless ``sunset_check`` is
    ``"off"``."""
    return tuple(k for k in KINDS if k not in _OFF or not _OFF[k][0](options))


def failing_kinds(options: Options) -> tuple[str, ...]:
    """The kinds that fail a test at teardown instead of warning: all with ``strict``,
    calls to API versions past Active with ``sunset_check="fail"``."""
    if options.strict:
        return KINDS
    return ("deprecated_version",) if options.sunset_check == "fail" else ()


def findings(evidence: Evidence, *, kinds: Collection[str] | None = None) -> list[Finding]:
    """The verdicts of one timeline: one :class:`Finding` per kind and account, in the
    order of :data:`KINDS`. ``kinds`` selects which count (default: :func:`default_kinds`
    of the evidence's options)."""
    wanted = default_kinds(evidence.options) if kinds is None else tuple(kinds)
    unknown = [k for k in wanted if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown finding kind(s) {unknown!r}; known: {', '.join(KINDS)}")
    found = []
    for kind in KINDS:
        if kind not in wanted or kind == "drift":  # drift: a comparison, not the events
            continue
        if kind == "wrong_host":
            found += [Finding(kind, u, m) for u, m in wrong_host_findings(evidence)]
            continue
        if kind == "deprecated_version":
            message = deprecated_version_message(evidence)
            found += [Finding(kind, None, message)] if message is not None else []
            continue
        for username in _accounts_of(evidence, kind):
            message = _MESSAGES[kind](evidence, username=username)
            if message is not None:
                found.append(Finding(kind, username, message))
        if kind == "refused_call":
            # Refusals the fake could tie to no account: one finding of their own.
            message = refused_call_message(evidence, unattributed=True)
            if message is not None:
                found.append(Finding(kind, None, message))
    return found


def finding_counts(evidence: Evidence) -> dict[str, int]:
    """How many of each thing :func:`findings` looks at, whether it counts or not, with
    the figures of :func:`summarize` (for ``GET /_mgmtauth/check``)."""
    summary = summarize(evidence.events)
    return {
        **{f.name: getattr(summary, f.name) for f in dataclasses.fields(summary)},
        "expired_use": len(expired_uses(evidence)),
        "refused_call": len(refused_calls(evidence)),
        "open_session": len(open_sessions(evidence)),
        "wrong_host": len(wrong_hosts(evidence)),
        "deprecated_version": len(deprecated_calls(evidence)),
    }


#: A timeline of up to this many lines is shown whole in the report section.
_SECTION_LINES = 80
#: Rejections listed under an elided timeline.
_SECTION_REJECTIONS = 10


#: The drift verdict of a test that no snapshot records.
NO_RECORDING = "not checked: no snapshot records this test (page Checked against the service)"


def report_section(
    evidence: Evidence,
    *,
    counted: Collection[str] | None = None,
    drift: Sequence[str] | str = NO_RECORDING,
) -> str:
    """The text of a test's ``mgmtauth timeline`` report section: the timeline of every
    account (grants, calls with their credential, rejections with their diagnosis), the
    credentials, and the verdicts of every kind, saying which the teardown check counts
    (``counted``, default :func:`default_kinds`). ``drift``: the lines of the comparison
    with the test's recording (none: no drift), or why there was none to make."""
    counts = default_kinds(evidence.options) if counted is None else tuple(counted)
    everything = findings(evidence, kinds=KINDS)
    lines = timeline_lines(evidence, None)
    whole = len(lines) <= _SECTION_LINES
    first_issue = next(
        (
            e
            for e in evidence.events
            if (isinstance(e, (TokenIssued, LoggedIn)) and e.while_valid) or is_rejection(e)
        ),
        None,
    )
    parts = [format_timeline(evidence, focus=first_issue, whole=whole)]
    if not whole:
        rejected = [e for e in evidence.events if is_rejection(e)]
        if rejected:
            parts.append(f"Rejections ({len(rejected)}):")
            parts += [
                f"  {evidence.offset(e.at.timestamp())}  {event_text(e, evidence)}"
                for e in rejected[:_SECTION_REJECTIONS]
            ]
            if len(rejected) > _SECTION_REJECTIONS:
                parts.append(f"  ... {len(rejected) - _SECTION_REJECTIONS} more")
    parts.append("Verdicts:")
    for kind in KINDS:
        title = _KIND_TITLES[kind]
        if kind == "drift":  # the comparison with a snapshot, not the events
            if isinstance(drift, str) or not drift:
                parts.append(f"  {title}: {drift or 'none'}")
            else:
                parts.append(f"  {title}: {drift[0].removeprefix('drift: ')}")
                parts += [f"    {line.strip()}" for line in drift[1:]]
            continue
        mine = [f for f in everything if f.kind == kind]
        if not mine:
            parts.append(f"  {title}: none")
            continue
        note = "" if kind in counts else f" (not checked: {_OFF.get(kind, (None, 'off'))[1]})"
        for finding in mine:
            headline = finding.headline.removeprefix("pytest-mgmtauth: ")
            parts.append(f"  {title}{note}: {headline}")
            if finding.fix and kind in counts:
                parts.append(f"    {finding.fix}")
    return "\n".join(parts)


class AuthFindingWarning(UserWarning):
    """Base of the teardown check's warnings: filter this one to treat them all alike."""


class TokenChurnWarning(AuthFindingWarning):
    """A test's client was granted new credentials while it still held valid ones.

    Emitted at the end of a test that uses ``mgmt_server`` (unless it called
    ``assert_token_reused`` itself); the message carries the account's timeline. With
    ``strict`` the test fails instead.
    """


class ExpiredCredentialWarning(AuthFindingWarning):
    """A test's client sent a call with a bearer token that had expired or a v1 session
    that had ended (logout, idle timeout), and the service refused it.

    Emitted at the end of a test that uses ``mgmt_server`` (unless it called
    ``assert_no_expired_token_used`` itself); with ``strict`` the test fails instead.
    """


class RefusedCallWarning(AuthFindingWarning):
    """The service refused a protected call because the client sent the wrong
    credential: none, a malformed or unknown one, another account's or profile's token,
    a v1 call without its session (refusals the test brought about on cue do not count).

    Emitted at the end of a test that uses ``mgmt_server`` (unless it called
    ``assert_no_refused_calls`` or ``expect_refusals`` itself); with ``strict`` the test
    fails instead.
    """


class WrongHostWarning(AuthFindingWarning):
    """A test's client sent a request to a host of the service that does not serve it
    (a v3 API call to the v3 auth host instead of the ``host`` of the auth answer).

    Emitted at the end of a test that uses ``mgmt_server``; with ``strict`` the test
    fails instead. See docs/hosts.md.
    """


class OpenSessionWarning(AuthFindingWarning):
    """A v1 session opened in the test was not ended with ``/v1/logout``.

    Only with ``require_logout``, at the end of a test that uses ``mgmt_server`` (unless it
    called ``assert_logged_out`` itself); with ``strict`` the test fails instead.
    """


class DeprecatedVersionWarning(AuthFindingWarning):
    """A test's client called an API version in End of Support (its answers carried
    ``Sunset`` and ``Deprecation``) or at End of Life (410).

    Emitted at the end of a test that uses ``mgmt_server`` with ``sunset_check="warn"``
    (the default); ``sunset_check="fail"`` (or ``strict``) fails the test instead,
    ``"off"`` says nothing. See docs/oauth.md.
    """


class DriftWarning(AuthFindingWarning):
    """The fake answered one of a test's exchanges unlike the service did when the test
    was recorded (its snapshot in ``mgmtauth_snapshots/``).

    Emitted at the end of a test that has a snapshot; with ``strict`` the test fails
    instead. The message names the exchange, the field, both values, the recording's date
    and the option that makes the fake answer like the service. See docs/live.md.
    """


#: The warning class of each kind of finding.
WARNINGS: dict[str, type[AuthFindingWarning]] = {
    "churn": TokenChurnWarning,
    "expired_use": ExpiredCredentialWarning,
    "refused_call": RefusedCallWarning,
    "open_session": OpenSessionWarning,
    "wrong_host": WrongHostWarning,
    "deprecated_version": DeprecatedVersionWarning,
    "drift": DriftWarning,
}
# Shown in tracebacks and used in filterwarnings by their public names.
for _warning in (AuthFindingWarning, *WARNINGS.values()):
    _warning.__module__ = "pytest_mgmtauth"
