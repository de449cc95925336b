"""Sweeps: a test that uses ``mgmt_server`` run once per fault point (docs/sweeps.md).

The ``mgmtauth_sweep`` marker (or ``--mgmtauth-sweep``) parametrizes the private
``_mgmtauth_sweep`` fixture that ``mgmt_server`` depends on: one baseline item and one
item per fault kind and point, ordinary pytest items (``-k``, ``--lf``, xdist and JUnit
work). ``mgmt_server`` schedules the item's fault (``MgmtServer.schedule_fault``); a
point the test never reached skips the item; each item's fault, point, outcome and what
the client did after the fault travel in ``user_properties`` (so the matrix can be
computed from reports, also on the xdist controller, and JUnit XML gets them).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pytest

from ._assertions import _describe
from ._domain._events import (
    ApiCall,
    AuthRejected,
    Event,
    LoggedIn,
    LoginRejected,
    ScheduledFaultFired,
    Throttled,
    TokenIssued,
)
from ._domain._faults import DEFAULT_RETRY_AFTER, SCHEDULED_KINDS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._fake import MgmtServer

MARKER = "mgmtauth_sweep"
#: The fixture the sweep parametrizes (``mgmt_server`` depends on it).
FIXTURE = "_mgmtauth_sweep"
FAULT_KINDS = tuple(SCHEDULED_KINDS)
DEFAULT_POINTS = 5
MAX_POINTS = 100
BASELINE = "baseline"

#: user_properties (JUnit XML <property>) of a sweep item.
PROP_TEST = "mgmtauth_sweep_test"
PROP_FAULT = "mgmtauth_sweep_fault"
PROP_POINT = "mgmtauth_sweep_point"
PROP_OUTCOME = "mgmtauth_sweep_outcome"
PROP_AFTER = "mgmtauth_sweep_after"
PROP_NOTE = "mgmtauth_sweep_note"

#: The item's sweep point and its fake (set when mgmt_server is set up).
_STATE = pytest.StashKey["_ItemState"]()


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One sweep item's fault: ``kind`` at point ``index`` (``None``: the baseline)."""

    kind: str | None
    index: int = 0

    @property
    def label(self) -> str:
        """``baseline``, ``expire@call3``, ``throttle@auth2``."""
        if self.kind is None:
            return BASELINE
        return f"{self.kind}@{SCHEDULED_KINDS[self.kind]}{self.index}"

    @property
    def id(self) -> str:
        return f"mgmtauth-{self.label}"


@dataclasses.dataclass
class _ItemState:
    point: SweepPoint
    fake: MgmtServer
    not_reached: str | None = None


# -- configuration ---------------------------------------------------------------------


def add_options(parser: pytest.Parser, group: Any) -> None:
    group.addoption(
        "--mgmtauth-sweep",
        default=None,
        metavar="FAULTS",
        help="sweep every test that uses mgmt_server: comma-separated fault kinds "
        f"({', '.join(FAULT_KINDS)}) or 'all' (overrides the ini; the marker still wins)",
    )
    group.addoption(
        "--mgmtauth-sweep-points",
        default=None,
        metavar="N",
        help=f"points per fault kind of a sweep without its own (default {DEFAULT_POINTS})",
    )
    parser.addini(
        "mgmtauth_sweep",
        "sweep every test that uses mgmt_server with these fault kinds (comma-separated, or 'all')",
        type="string",
        default=None,
    )
    parser.addini(
        "mgmtauth_sweep_points",
        f"points per fault kind of a sweep (default {DEFAULT_POINTS})",
        type="string",
        default=None,
    )


def check_faults(faults: object, where: str) -> tuple[str, ...]:
    """The fault kinds of a sweep, validated: ValueError naming the known kinds."""
    if isinstance(faults, str):
        faults = (faults,)
    if not isinstance(faults, (tuple, list)):
        raise ValueError(
            f"{where}: faults must be a tuple of fault kinds ({', '.join(FAULT_KINDS)}), "
            f"got {faults!r}"
        )
    kinds: list[str] = []
    for kind in faults:
        if not isinstance(kind, str) or kind not in SCHEDULED_KINDS:
            raise ValueError(
                f"{where}: unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}"
            )
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


def check_points(points: object, where: str) -> int:
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_POINTS:
        raise ValueError(
            f"{where}: points must be a positive int (at most {MAX_POINTS}): the calls "
            f"swept per fault kind, got {points!r}"
        )
    return points


def parse_faults_option(raw: str, where: str) -> tuple[str, ...]:
    text = raw.strip().lower()
    if text == "all":
        return FAULT_KINDS
    if text in ("", "none", "off"):
        return ()
    return check_faults([part.strip() for part in text.split(",") if part.strip()], where)


def parse_points_option(raw: str, where: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"{where} = {raw!r}: expected a positive whole number") from None
    return check_points(value, where)


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """The sweep of every test from the command line / ini (``faults`` empty: none)."""

    faults: tuple[str, ...] = ()
    points: int = DEFAULT_POINTS


def read_config(config: pytest.Config) -> SweepConfig:
    """``--mgmtauth-sweep`` / ``mgmtauth_sweep`` and the points; ValueError if bad."""
    faults: tuple[str, ...] = ()
    raw = config.getoption("mgmtauth_sweep") or config.getini("mgmtauth_sweep")
    if raw:
        faults = parse_faults_option(str(raw), "--mgmtauth-sweep / mgmtauth_sweep")
    points = DEFAULT_POINTS
    raw_points = config.getoption("mgmtauth_sweep_points") or config.getini("mgmtauth_sweep_points")
    if raw_points:
        points = parse_points_option(
            str(raw_points), "--mgmtauth-sweep-points / mgmtauth_sweep_points"
        )
    return SweepConfig(faults, points)


# -- expansion -------------------------------------------------------------------------


def sweep_points(faults: Sequence[str], points: int) -> list[SweepPoint]:
    """The baseline, then every point of every fault kind."""
    return [SweepPoint(None)] + [
        SweepPoint(kind, index) for kind in faults for index in range(1, points + 1)
    ]


def expand(metafunc: pytest.Metafunc, sweep: SweepConfig) -> None:
    """pytest_generate_tests: parametrize a swept test; CollectError on a bad marker."""
    marker = metafunc.definition.get_closest_marker(MARKER)
    uses_server = FIXTURE in metafunc.fixturenames
    if marker is None:
        if not sweep.faults or not uses_server:
            return
        faults, points = sweep.faults, sweep.points
    else:
        where = f"@pytest.mark.{MARKER} on {metafunc.definition.nodeid}"
        try:
            faults, points = _marker_args(marker, sweep, where)
        except ValueError as exc:
            raise pytest.Collector.CollectError(str(exc)) from None
        if not uses_server:
            raise pytest.Collector.CollectError(
                f"{where}: the test does not use the mgmt_server fixture, so there is "
                "nothing to sweep; request mgmt_server (or mgmt_account) in the test"
            )
        if not faults:
            return  # faults=(): this test opts out of a command-line sweep
    swept = sweep_points(faults, points)
    metafunc.parametrize(FIXTURE, swept, ids=[p.id for p in swept], indirect=True)


def _marker_args(
    marker: pytest.Mark, sweep: SweepConfig, where: str
) -> tuple[tuple[str, ...], int]:
    if marker.args:
        raise ValueError(
            f"{where}: takes keyword arguments only (faults=..., points=...), got "
            f"positional {marker.args!r}"
        )
    unknown = set(marker.kwargs) - {"faults", "points"}
    if unknown:
        raise ValueError(
            f"{where}: unknown argument(s) {', '.join(sorted(unknown))}; it takes "
            "faults=(...) and points=N"
        )
    faults = check_faults(marker.kwargs.get("faults", sweep.faults or FAULT_KINDS), where)
    points = check_points(marker.kwargs.get("points", sweep.points), where)
    return faults, points


def arm(item: pytest.Item, point: SweepPoint | None, fake: MgmtServer) -> None:
    """mgmt_server's setup: schedule the item's fault; its properties go to the reports."""
    if point is None:
        return
    item.stash[_STATE] = _ItemState(point, fake)
    if point.kind is not None:
        fake.schedule_fault(point.kind, at=point.index)
    item.user_properties.extend(
        [
            (PROP_TEST, _swept_test(item.nodeid, point)),
            (PROP_FAULT, point.kind or BASELINE),
            (PROP_POINT, point.label),
        ]
    )


def disarm(item: pytest.Item) -> None:
    """mgmt_server's teardown: let the item (alive until the session ends) drop the fake."""
    if _STATE in item.stash:
        del item.stash[_STATE]


def _swept_test(nodeid: str, point: SweepPoint) -> str:
    """The node id without the sweep's part of the parameter id."""
    own = point.id
    for text in (f"[{own}]", f"{own}-", f"-{own}"):
        if text in nodeid:
            return nodeid.replace(text, "", 1)
    return nodeid


def check_reached(item: pytest.Item) -> None:
    """After a passing call: skip the item when its point never came."""
    reason = _not_reached(item)
    if reason is not None:
        # Raised from a frame that holds no fake (a kept traceback must not keep it
        # alive); reported at the test's own location, as a skip mark's.
        raise pytest.skip.Exception(f"mgmtauth sweep: {reason}", _use_item_location=True)


def _not_reached(item: pytest.Item) -> str | None:
    state = item.stash.get(_STATE, None)
    if state is None or state.point.kind is None:
        return None
    fake, point, kind = state.fake, state.point, state.point.kind
    # Reached when that call was made (an expire before call 3 fires once call 2 is
    # answered: if no call 3 follows, the client never met it).
    if SCHEDULED_KINDS[kind] == "call":
        count = fake.protected_calls
        made = f"{count} protected call{'s' if count != 1 else ''}"
    else:
        count = fake.auth_calls
        made = f"{count} authentication{'s' if count != 1 else ''}"
    if count >= point.index:
        return None
    state.not_reached = f"{point.label} not reached: the test made only {made}"
    return state.not_reached


def after_call(item: pytest.Item, report: pytest.TestReport) -> None:
    """The call report of a sweep item: its outcome and what the client did after the
    fault, as properties; for a failure, the ``mgmtauth sweep`` report section."""
    state = item.stash.get(_STATE, None)
    if state is None:
        return
    if state.not_reached is not None:
        outcome = "not reached"
    elif report.failed:
        outcome = "failed"
    elif report.passed:
        outcome = "passed"
    else:
        outcome = "skipped"
    props: list[tuple[str, object]] = [(PROP_OUTCOME, outcome)]
    point = state.point
    if point.kind is not None and state.not_reached is None:
        after = analyse(point.kind, state.fake.events, failed=report.failed)
        if after.summary:
            props.append((PROP_AFTER if report.failed else PROP_NOTE, after.summary))
        if report.failed:
            report.sections.append(("mgmtauth sweep", _section(point, state.fake, after)))
    elif point.kind is not None and report.failed:
        report.sections.append(
            ("mgmtauth sweep", f"fault: {point.label}, not reached: {state.not_reached}")
        )
    item.user_properties.extend(props)
    report.user_properties.extend(props)


# -- what the client did after the fault -----------------------------------------------


@dataclasses.dataclass(frozen=True)
class After:
    """What followed a fault: a one-line ``summary`` (empty: nothing worth saying) and
    the events after it."""

    summary: str
    fired: ScheduledFaultFired | None
    events: tuple[Event, ...]


_AUTH_EVENTS = (TokenIssued, AuthRejected, LoggedIn, LoginRejected, Throttled)


def analyse(kind: str, events: Sequence[Event], *, failed: bool) -> After:
    """Read the timeline after the fault of ``kind`` fired (pure: no pytest)."""
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
            elif kind == "expire":
                summary = (
                    f"lost a call: it sent {first.method} {first.path} with the expired "
                    "credential and re-authenticated only after the 401 (renew before "
                    "the credential expires)"
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
    elif kind == "reset":
        if not any(isinstance(e, ApiCall) for e in rest):
            summary = "the client never retried after the connection was reset"
        elif failed:
            summary = "the test failed after the connection reset (see its failure)"
    if kind == "expire" and failed and "the clock cannot move" in fired.detail:
        # No client could have seen this expiry coming: say how to make it fair.
        summary = (summary + "; " if summary else "") + (
            "the credential ended early on cue because the test does not run on "
            "mgmt_clock: request mgmt_clock, so the clock moves to the credential's end "
            "and a client that renews in time survives"
        )
    return After(summary, fired, rest)


def _section(point: SweepPoint, fake: MgmtServer, after: After) -> str:
    scene = fake.scene()
    lines = [f"fault: {point.label}"]
    if after.fired is not None:
        lines.append(f"fired: {after.fired.detail}")
    if after.summary:
        lines.append(f"after it: {after.summary}")
    lines.append("what the client did after the fault:")
    shown = after.events[:12]
    for event in shown:
        lines.append(f"  {scene.offset(event.at.timestamp())}  {_describe(event, scene)}")
    if not shown:
        lines.append("  nothing: no request reached the fake after it")
    elif len(after.events) > len(shown):
        lines.append(f"  ... and {len(after.events) - len(shown)} more events")
    return "\n".join(lines)


# -- the matrix (computed from reports: works on the xdist controller) -----------------


@dataclasses.dataclass
class _Cell:
    outcome: str = "passed"
    after: str = ""
    note: str = ""


class SweepReport:
    """Collects sweep items' outcomes from their reports; prints the ``mgmtauth sweep``
    terminal section."""

    def __init__(self) -> None:
        # test -> point label -> cell, in the order reports arrive
        self._tests: dict[str, dict[str, _Cell]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        test, label = props.get(PROP_TEST), props.get(PROP_POINT)
        if not isinstance(test, str) or not isinstance(label, str):
            return
        cell = self._tests.setdefault(test, {}).setdefault(label, _Cell())
        outcome = props.get(PROP_OUTCOME)
        if report.failed:
            cell.outcome = "failed"
        elif isinstance(outcome, str) and cell.outcome != "failed":
            cell.outcome = outcome
        elif report.skipped and cell.outcome != "failed":
            cell.outcome = "skipped"
        for prop, attr in ((PROP_AFTER, "after"), (PROP_NOTE, "note")):
            value = props.get(prop)
            if isinstance(value, str):
                setattr(cell, attr, value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self._tests:
            return
        terminalreporter.write_sep("=", "mgmtauth sweep")
        for test in sorted(self._tests):
            for line in format_matrix(test, self._tests[test]):
                terminalreporter.write_line(line)
            terminalreporter.write_line("")


_SYMBOL = {
    "passed": "ok",
    "failed": "FAIL",
    "not reached": "-",
    "skipped": "skip",
}


def _symbol(cell: _Cell) -> str:
    text = _SYMBOL.get(cell.outcome, cell.outcome)
    if cell.outcome == "passed" and cell.note:
        text += "*"
    return text


def format_matrix(test: str, cells: dict[str, _Cell]) -> list[str]:
    """One swept test: rows = fault kinds, columns = points, then a one-line verdict."""
    rows: dict[str, dict[int, _Cell]] = {}
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
    lines.append("  (ok: passed, FAIL: failed, -: point not reached, *: passed with a note)")
    lines.append(f"  verdict: {verdict(base, rows)}")
    return lines


def verdict(base: _Cell | None, rows: dict[str, dict[int, _Cell]]) -> str:
    """``survives expire at 8/8 points; revoke fails from call 1: ...``."""
    parts = []
    if base is not None and base.outcome == "failed":
        parts.append("the baseline (no fault) fails: fix it first, the sweep says little")
    for kind in (k for k in FAULT_KINDS if k in rows):
        row = rows[kind]
        on = SCHEDULED_KINDS[kind]
        reached = {i: c for i, c in row.items() if c.outcome in ("passed", "failed")}
        failed = sorted(i for i, c in reached.items() if c.outcome == "failed")
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
        why = row[failed[0]].after or "see the failures"
        parts.append(f"{kind} fails {where} ({len(failed)}/{len(reached)} points): {why}")
    return "; ".join(parts) if parts else "nothing was swept"


def _points(indexes: Sequence[int]) -> str:
    return ", ".join(str(i) for i in indexes)
