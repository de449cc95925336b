"""What a sweep found: what the client did after its fault (:func:`analyse`, read from
the timeline) and, per swept test, the matrix of outcomes with a one-line verdict
(:func:`format_matrix`, built from the items' report properties, so it works on the
xdist controller too).

Pure: no pytest. The glue (``_glue/sweep.py``) feeds these from the items and their reports.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .._service.events import (
    ApiCall,
    AuthRejected,
    Event,
    LoggedIn,
    LoginRejected,
    ScheduledFaultFired,
    SessionExpired,
    Throttled,
    TokenIssued,
    flow_credential,
    shown,
)
from .._service.faults import DEFAULT_RETRY_AFTER, SCHEDULED_KINDS
from .evidence import grant_label
from .sweep_plan import BASELINE, FAULT_KINDS

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class After:
    """What followed a fault: a one-line ``summary`` (empty: nothing worth saying) and
    the events after it."""

    summary: str
    fired: ScheduledFaultFired | None
    events: tuple[Event, ...]


_AUTH_EVENTS = (TokenIssued, AuthRejected, LoggedIn, LoginRejected, Throttled)


def analyse(kind: str, events: Sequence[Event], *, failed: bool) -> After:
    """Read the timeline after the fault of ``kind`` fired."""
    index = next((i for i, e in enumerate(events) if isinstance(e, ScheduledFaultFired)), None)
    if index is None:
        return After("", None, ())
    fired = events[index]
    assert isinstance(fired, ScheduledFaultFired)
    rest = tuple(events[index + 1 :])
    grants = [e for e in rest if isinstance(e, (TokenIssued, LoggedIn))]
    auths = [e for e in rest if isinstance(e, _AUTH_EVENTS)]
    refused = [e for e in rest if isinstance(e, ApiCall) and e.return_code == 1401]
    summary = ""
    if kind in ("expire", "revoke"):
        if refused:
            first = refused[0]
            regained = [g for g in grants if g.at >= first.at]
            if not regained:
                summary = "the client never re-authenticates after a 401 with 1401"
            elif (
                kind == "expire"
                and first.credential != _granted_in_flight(events, index)
                # A session ends after an idle timeout the service does not announce:
                # learning of it from the 401 and logging in again is all a client can do.
                and flow_credential(first.version) != "session"
            ):
                summary = (
                    f"lost a call: it sent {shown(first.method)} {shown(first.path)} with the "
                    "expired credential and re-authenticated only after the 401 (renew "
                    "before the credential expires)"
                )
        elif failed:
            summary = "the test failed after the fault, without a refused call (see its failure)"
    elif kind in ("throttle", "unavailable"):
        status = "429" if kind == "throttle" else "503"
        if not auths:
            summary = f"the client never retried authentication after a {status}"
        elif kind == "throttle":
            waited = (auths[0].at - fired.at).total_seconds()
            if waited < DEFAULT_RETRY_AFTER:
                summary = (
                    f"the client retried authentication {waited:g} s after a 429 with "
                    f"Retry-After {DEFAULT_RETRY_AFTER} s: honour Retry-After"
                )
        if failed and not summary:
            summary = f"the test failed after the {status} (see its failure)"
    elif kind in ("reset", "busy"):
        after = "the connection was reset" if kind == "reset" else "a 503"
        if not any(isinstance(e, ApiCall) for e in rest):
            summary = f"the client never retried after {after}"
        elif failed:
            after = "the connection reset" if kind == "reset" else "the 503"
            summary = f"the test failed after {after} (see its failure)"
    if kind == "expire" and failed and "the clock cannot move" in fired.detail:
        # No client could have seen this expiry coming: say how to make it fair.
        summary = (summary + "; " if summary else "") + (
            "the credential ended early on cue because the test does not run on "
            "mgmt_clock: request mgmt_clock, so the clock moves to the credential's end "
            "and a client that renews in time survives"
        )
    return After(summary, fired, rest)


def _granted_in_flight(events: Sequence[Event], fired: int) -> str | None:
    """The label of the credential whose grant was still being answered when the fault
    at ``fired`` ended it (a fault before call 1 fires at the first grant): a client
    sends such a credential without a chance to see its end, and recovering on the 401
    is all it can do."""
    for event in reversed(events[:fired]):
        if not isinstance(event, SessionExpired):
            return grant_label(event) if isinstance(event, (TokenIssued, LoggedIn)) else None
    return None


@dataclasses.dataclass
class Cell:
    """One point of one swept test in the matrix: its outcome, and what the client did
    after the fault (``after``: the failure's cause, ``note``: worth saying on a pass)."""

    outcome: str = "passed"
    after: str = ""
    note: str = ""


_SYMBOL = {
    "passed": "ok",
    "failed": "FAIL",
    "xfailed": "xfail",
    "xpassed": "XPASS",
    "not reached": "-",
    "skipped": "skip",
}
#: Outcomes of a point whose fault fired, and those of them that are failures.
_REACHED = ("passed", "failed", "xfailed", "xpassed")
_FAILED = ("failed", "xfailed")


def _symbol(cell: Cell) -> str:
    text = _SYMBOL.get(cell.outcome, cell.outcome)
    if cell.outcome == "passed" and cell.note:
        text += "*"
    return text


def format_matrix(test: str, cells: dict[str, Cell]) -> list[str]:
    """One swept test: rows = fault kinds, columns = points, then a one-line verdict."""
    rows: dict[str, dict[int, Cell]] = {}
    for label, cell in cells.items():
        if label == BASELINE:
            continue
        kind, _, point = label.partition("@")
        rows.setdefault(kind, {})[int(point[len(SCHEDULED_KINDS[kind]) :])] = cell
    width = max([len(k) + 5 for k in rows] + [len(BASELINE)])
    columns = max((max(r) for r in rows.values()), default=0)
    lines = [test]
    lines.append(f"  {'':<{width}}" + "".join(f"{index:>6}" for index in range(1, columns + 1)))
    base = cells.get(BASELINE)
    if base is not None:
        lines.append(f"  {BASELINE:<{width}}{_symbol(base):>6}")
    for kind in (k for k in FAULT_KINDS if k in rows):
        row = rows[kind]
        title = f"{kind} {SCHEDULED_KINDS[kind]}"
        lines.append(
            f"  {title:<{width}}"
            + "".join(f"{_symbol(row[i]) if i in row else '':>6}" for i in range(1, columns + 1))
        )
    shown_outcomes = {cell.outcome for cell in cells.values()}
    legend = "ok: passed, FAIL: failed"
    if "xfailed" in shown_outcomes or "xpassed" in shown_outcomes:
        legend += ", xfail: failed as xfail expects, XPASS: passed though marked xfail"
    if "skipped" in shown_outcomes:
        legend += ", skip: skipped"
    lines.append(f"  ({legend}, -: point not reached, *: passed with a note)")
    lines.append(f"  verdict: {verdict(base, rows)}")
    return lines


def verdict(base: Cell | None, rows: dict[str, dict[int, Cell]]) -> str:
    """``survives expire at 8/8 points; revoke fails from call 1: ...``."""
    parts = []
    if base is not None and base.outcome == "failed":
        parts.append("the baseline (no fault) fails: fix it first, the sweep says little")
    for kind in (k for k in FAULT_KINDS if k in rows):
        row = rows[kind]
        on = SCHEDULED_KINDS[kind]
        reached = {i: c for i, c in row.items() if c.outcome in _REACHED}
        failed = sorted(i for i, c in reached.items() if c.outcome in _FAILED)
        if not reached:
            parts.append(f"{kind} not reached at any point")
            continue
        if not failed:
            text = f"survives {kind} at {len(reached)}/{len(reached)} points"
            noted = sorted(i for i, c in reached.items() if c.note)
            if noted:
                text += f", but at {on} {_points(noted)} {row[noted[0]].note}"
            parts.append(text)
            continue
        later = [i for i in reached if i >= failed[0]]
        where = (
            f"from {on} {failed[0]}" if len(failed) == len(later) else f"at {on} {_points(failed)}"
        )
        expected = sum(1 for i in failed if row[i].outcome == "xfailed")
        if expected == len(failed):
            where += ", as xfail expects"
        elif expected:
            where += f", {expected} of them as xfail expects"
        why = row[failed[0]].after or "see the failures"
        parts.append(f"{kind} fails {where} ({len(failed)}/{len(reached)} points): {why}")
    return "; ".join(parts) if parts else "nothing was swept"


def _points(indexes: Sequence[int]) -> str:
    return ", ".join(str(i) for i in indexes)
