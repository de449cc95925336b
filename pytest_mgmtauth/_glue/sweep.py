"""Sweeps: a test that uses ``mgmt_server`` run once per fault point (docs/sweeps.md).

The ``mgmtauth_sweep`` marker (or ``--mgmtauth-sweep``) parametrizes the private
``_mgmtauth_sweep`` fixture that ``mgmt_server`` depends on: one baseline item and one
item per fault kind and point, ordinary pytest items (``-k``, ``--lf``, xdist and JUnit
work). ``mgmt_server`` schedules the item's fault (``MgmtServer.schedule_fault``); a
point the test never reached skips the item; each item's fault, point, outcome and what
the client did after the fault travel in ``user_properties`` (so the matrix can be
computed from reports, also on the xdist controller, and JUnit XML gets them).

The points and their settings are ``_verdicts/sweep_plan.py``'s, the reading of what happened
after a fault and the matrix ``_verdicts/sweep_verdict.py``'s (both pure); the flags and ini
settings are read by ``_glue/settings.py``. This module is what touches pytest's items:
parametrization, the items' stash and reports, the terminal section. It is imported only
by a run that sweeps or uses ``mgmt_server``: ``plugin.py`` asks it nothing for a test
that neither uses the fixture nor carries the marker.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pytest

from .._service.faults import SCHEDULED_KINDS
from .._verdicts.sweep_plan import (
    BASELINE,
    FAULT_KINDS,
    FIXTURE,
    MARKER,
    PROP_AFTER,
    PROP_FAULT,
    PROP_NOTE,
    PROP_OUTCOME,
    PROP_POINT,
    PROP_TEST,
    SweepConfig,
    SweepPoint,
    check_faults,
    check_points,
    sweep_points,
)

if TYPE_CHECKING:
    from .._fake.server import MgmtServer
    from .._verdicts.sweep_verdict import After, Cell


#: The item's sweep point and its fake (set when mgmt_server is set up).
_STATE = pytest.StashKey["_ItemState"]()


@dataclasses.dataclass
class _ItemState:
    point: SweepPoint
    fake: MgmtServer
    not_reached: str | None = None


# -- expansion -------------------------------------------------------------------------


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
    # Direct: each item gets its point as the value of FIXTURE, in place of the fixture
    # (which would need ``request`` for it). Function scope: the fixture is
    # session-scoped for the items nobody sweeps (plugin.py).
    metafunc.parametrize(FIXTURE, swept, ids=[p.id for p in swept], scope="function")


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
        count, made = fake.protected_calls, "protected call"
    else:
        count, made = fake.auth_calls, "authentication"
    if count >= point.index:
        return None
    plural = "s" if count != 1 else ""
    state.not_reached = f"{point.label} not reached: the test made only {count} {made}{plural}"
    return state.not_reached


def after_call(item: pytest.Item, report: pytest.TestReport) -> None:
    """The call report of a sweep item: its outcome and what the client did after the
    fault, as properties; for a failure, the ``mgmtauth sweep`` report section."""
    state = item.stash.get(_STATE, None)
    if state is None:
        return
    xfail = hasattr(report, "wasxfail")
    if state.not_reached is None and report.skipped and xfail:
        # An expected failure: the test function raised, so check_reached did not run.
        _not_reached(item)
    if state.not_reached is not None:
        outcome = "not reached"
    elif report.failed:
        outcome = "failed"
    elif report.skipped and xfail:
        outcome = "xfailed"  # pytest reports an xfail as skipped: the fault fired
    elif report.passed:
        outcome = "xpassed" if xfail else "passed"
    else:
        outcome = "skipped"
    # What followed the fault is read as after a failure when the test failed as expected.
    failed = report.failed or outcome == "xfailed"
    props: list[tuple[str, object]] = [(PROP_OUTCOME, outcome)]
    point = state.point
    if point.kind is not None and state.not_reached is None:
        from .._verdicts.sweep_verdict import analyse  # the event classes: only for a sweep item

        after = analyse(point.kind, state.fake.events, failed=failed)
        if after.summary:
            props.append((PROP_AFTER if failed else PROP_NOTE, after.summary))
        if report.failed:
            report.sections.append(("mgmtauth sweep", _section(point, state.fake, after)))
    elif point.kind is not None and report.failed:
        report.sections.append(
            ("mgmtauth sweep", f"fault: {point.label}, not reached: {state.not_reached}")
        )
    item.user_properties.extend(props)
    report.user_properties.extend(props)


def _section(point: SweepPoint, fake: MgmtServer, after: After) -> str:
    from .._verdicts.evidence import event_text

    evidence = fake.evidence()
    lines = [f"fault: {point.label}"]
    if after.fired is not None:
        lines.append(f"fired: {after.fired.detail}")
    if after.summary:
        lines.append(f"after it: {after.summary}")
    lines.append("what the client did after the fault:")
    shown = after.events[:12]
    for event in shown:
        lines.append(f"  {evidence.offset(event.at.timestamp())}  {event_text(event, evidence)}")
    if not shown:
        lines.append("  nothing: no request reached the fake after it")
    elif len(after.events) > len(shown):
        lines.append(f"  ... and {len(after.events) - len(shown)} more events")
    return "\n".join(lines)


# -- the matrix (computed from reports: works on the xdist controller) -----------------


class SweepReport:
    """Collects sweep items' outcomes from their reports; prints the ``mgmtauth sweep``
    terminal section."""

    def __init__(self) -> None:
        # test -> point label -> cell, in the order reports arrive
        self._tests: dict[str, dict[str, Cell]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        test, label = props.get(PROP_TEST), props.get(PROP_POINT)
        if not isinstance(test, str) or not isinstance(label, str):
            return
        # The event classes: only for a sweep item's report.
        from .._verdicts.sweep_verdict import Cell

        cell = self._tests.setdefault(test, {}).setdefault(label, Cell())
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
        from .._verdicts.sweep_verdict import format_matrix

        terminalreporter.write_sep("=", "mgmtauth sweep")
        for test in sorted(self._tests):
            for line in format_matrix(test, self._tests[test]):
                terminalreporter.write_line(line)
            terminalreporter.write_line("")
