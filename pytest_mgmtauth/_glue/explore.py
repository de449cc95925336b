"""Exploration: one pytest item runs the test's body many times, each run under its own
schedule of faults and clock moves, drawn at random and shrunk (docs/explore.md).

Each run is pytest's own protocol for the item (``runtestprotocol``, as
pytest-rerunfailures reruns a test): the item's function-scoped fixtures are set up and
torn down again, its module, class and session fixtures stay (the teardown of a run
that is not the last is given the item's parent as the next item, so only the item is
torn down). Those runs log nothing; the last run (the shortest failing schedule, or the
baseline when none failed) is logged as the item's reports, with the story of the
failure, the exploration's figures as a ``user_properties`` entry, and the warnings of
all runs counted once. While the drawn runs of a test that uses ``mgmt_clock`` run,
freezegun's patches are held in place (``clock.time_held``), so that each run's clock
starts without freezegun's search of every loaded module.

The schedules (drawn, and the simpler ones a shrink tries), the replay text and the
story are ``_verdicts/explore_plan.py``'s (pure). Hypothesis is not used: its engine,
and the modules it brings that freezegun scans at every ``mgmt_clock`` start, cost each
run more than pytest's own work for a parametrized test (docs/explore.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import warnings
from random import Random
from typing import TYPE_CHECKING, Any

import pytest

# pytest has no public API to run an item's protocol again (pytest-rerunfailures uses
# the same function); everything else here is public.
from _pytest.runner import runtestprotocol

from .._verdicts.explore_plan import (
    CLOCK,
    ExploreConfig,
    Outcome,
    Schedule,
    Space,
    check_config,
    fired_schedule,
    moments,
    parse_replay,
    replay_text,
    search,
    section_text,
    story,
)
from .._verdicts.sweep_plan import (
    EXPLORE_MARKER as MARKER,
    EXPLORE_PROP as PROP,
    MARKER as SWEEP_MARKER,
)
from .clock import time_held

if TYPE_CHECKING:
    from .._fake.server import MgmtServer

__all__ = ["ExploreReport", "arm", "check", "run"]

SECTION = "mgmtauth explore"
#: The schedule of the run about to start, and its fake once mgmt_server is set up.
_RUN = pytest.StashKey["_Run"]()


@dataclasses.dataclass
class _Run:
    events: Schedule
    fake: MgmtServer | None = None


def check(definition: pytest.Function, fixturenames: list[str]) -> None:
    """At collection: the marker's arguments, no sweep marker beside it, the fake in
    use; CollectError saying what to change."""
    where = f"@pytest.mark.{MARKER} on {definition.nodeid}"
    marker = definition.get_closest_marker(MARKER)
    assert marker is not None
    try:
        check_config(marker.args, dict(marker.kwargs), where)
    except ValueError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    if definition.get_closest_marker(SWEEP_MARKER) is not None:
        raise pytest.Collector.CollectError(
            f"{where}: the test is marked {SWEEP_MARKER} too; an exploration already "
            "tries every sweep fault, combined, at every point: keep one of the two markers"
        )
    if "mgmt_server" not in fixturenames:
        raise pytest.Collector.CollectError(
            f"{where}: the test does not use the mgmt_server fixture, so there is nothing "
            "to explore; request mgmt_server (or mgmt_account) in the test"
        )


def _config(item: pytest.Item) -> ExploreConfig:
    marker = item.get_closest_marker(MARKER)
    assert marker is not None
    return check_config(marker.args, dict(marker.kwargs), f"@pytest.mark.{MARKER}")


def arm(item: pytest.Item, fake: MgmtServer) -> bool:
    """mgmt_server's setup: schedule the events of the run about to start; whether it
    has any (a snapshot's drift check then leaves it alone)."""
    run = item.stash.get(_RUN, None)
    if run is None:
        return False
    run.fake = fake
    for event in run.events:
        if event.kind == CLOCK:
            fake.schedule_clock_move(event.seconds, at=event.index)
        else:
            fake.schedule_fault(event.kind, at=event.point)
    return bool(run.events)


class _Explorer:
    """The runs of one explored item."""

    def __init__(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        self.item = item
        self.nextitem = nextitem
        self.outcome = Outcome()
        self.properties = list(item.user_properties)
        #: (category, file, line) -> (first message, runs that warned it)
        self.warned: dict[tuple[type[Warning], str, int], list[Any]] = {}

    def once(
        self, events: Schedule, *, last: bool = False
    ) -> tuple[list[pytest.TestReport], MgmtServer | None]:
        """Run the item once under ``events``: its reports and fake (None: no fake)."""
        item = self.item
        item.user_properties[:] = self.properties  # each run adds the fake's figures
        run = item.stash[_RUN] = _Run(events)
        # Not the last run: only the item is torn down (its parent stays set up).
        nextitem: Any = self.nextitem if last else item.parent
        with warnings.catch_warnings(record=True) as caught:
            reports = runtestprotocol(item, log=False, nextitem=nextitem)
        del item.stash[_RUN]
        self._count_warnings(caught)
        fake, run.fake = run.fake, None
        fired = fired_schedule(fake.events) if fake is not None else ()
        failed = any(map(_failed, reports))
        self.outcome.add(fired, failed=failed)
        return reports, fake

    def _count_warnings(self, caught: list[warnings.WarningMessage]) -> None:
        seen = set()
        for message in caught:
            key = (message.category, message.filename, message.lineno)
            entry = self.warned.setdefault(key, [str(message.message), 0])
            if key not in seen:
                seen.add(key)
                entry[1] += 1

    def warn_once(self) -> None:
        """The warnings of all runs, each once, with how many runs gave it."""
        runs = self.outcome.runs
        for (category, filename, lineno), (text, count) in self.warned.items():
            where = "the run" if runs == 1 else f"{count} of {runs} runs"
            # An error only by a filter of the repeated text: shown already.
            with contextlib.suppress(Warning):
                warnings.warn_explicit(
                    f"{text}\n(pytest-mgmtauth explore: in {where})", category, filename, lineno
                )

    def space(self, fake: MgmtServer | None, config: ExploreConfig) -> Space:
        from .._service.faults import SCHEDULED_KINDS
        from .._service.flows.registry import FLOWS

        calls = fake.protected_calls if fake is not None else 0
        auths = fake.auth_calls if fake is not None else 0
        call_kinds = tuple(k for k in config.faults if SCHEDULED_KINDS[k] == "call")
        auth_kinds = tuple(k for k in config.faults if SCHEDULED_KINDS[k] == "auth")
        moves: tuple[int, ...] = ()
        if calls and fake is not None and "mgmt_clock" in getattr(self.item, "fixturenames", ()):
            margins = [flow.churn_margin(fake.options) for flow in FLOWS.values()]
            moves = moments(fake.options, margins)
        return Space(
            calls=calls,
            # Faults bring authentications of their own (a revoke, a 503): room for them.
            auths=auths + config.max_faults if auths else 0,
            call_kinds=call_kinds if calls else (),
            auth_kinds=auth_kinds if auths else (),
            max_faults=config.max_faults,
            moves=moves,
        )

    def _cache_key(self) -> str:
        digest = hashlib.sha256(self.item.nodeid.encode()).hexdigest()[:16]
        return f"mgmtauth/explore/{digest}"

    def remembered(self) -> Schedule | None:
        """The shortest failing schedule of this test's last exploration, if any: it is
        tried first, as Hypothesis's example database would."""
        cache = getattr(self.item.config, "cache", None)
        text = None if cache is None else cache.get(self._cache_key(), None)
        if not isinstance(text, str):
            return None
        try:
            return parse_replay(text, "the remembered schedule")
        except ValueError:
            return None  # written by another version: explore afresh

    def remember(self, found: Schedule | None) -> None:
        cache = getattr(self.item.config, "cache", None)
        if cache is not None:
            cache.set(self._cache_key(), None if found is None else replay_text(found))

    def fails(self, events: Schedule) -> bool:
        """Whether a run under ``events`` fails; False without a run once -x or
        --maxfail stops the session (it may stop while an item explores)."""
        session = self.item.session
        if session.shouldstop or session.shouldfail:
            return False
        return any(map(_failed, self.once(events)[0]))


def run(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """pytest_runtest_protocol of an explored item: explore, then log the last run."""
    config = _config(item)
    explorer = _Explorer(item, nextitem)
    outcome = explorer.outcome
    final: Schedule = ()
    if config.replay is not None:
        final = config.replay
    elif config.runs > 1:
        final = _explore(explorer, config)
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports, fake = explorer.once(final, last=True)
    failed = next(filter(_failed, reports), None)
    fired = fired_schedule(fake.events) if fake is not None else final
    if failed is not None or outcome.shortest is not None:
        outcome.shortest = fired
        outcome.story = story(fake.events if fake is not None else [], failure=_failure(failed))
    del fake
    text = outcome.as_json()
    if outcome.shortest is not None and failed is None:
        # Found failing, but its replay passed: the item fails all the same, and says so.
        failed = next(r for r in reports if r.when in ("call", "setup"))
        failed.outcome = "failed"
        failed.longrepr = (
            f"pytest-mgmtauth explore: the schedule {replay_text(outcome.shortest) or '(none)'}"
            " failed during the exploration, but not when run again: the test is flaky "
            "under it"
        )
    if failed is not None:
        failed.sections.append((SECTION, "\n".join(section_text(json.loads(text)))))
    item.user_properties.append((PROP, text))
    reports[-1].user_properties.append((PROP, text))
    explorer.warn_once()
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _explore(explorer: _Explorer, config: ExploreConfig) -> Schedule:
    """A baseline run, then the drawn ones and the shrink: the schedule the logged run
    is to replay (the shortest failing one, or none)."""
    reports, fake = explorer.once(())
    if any(map(_failed, reports)):
        explorer.outcome.shortest = ()  # it fails without any event: nothing to explore
        return ()
    if any(report.skipped for report in reports):
        return ()
    space = explorer.space(fake, config)
    del fake
    if space.empty or config.runs <= 2:
        return ()
    uses_clock = "mgmt_clock" in getattr(explorer.item, "fixturenames", ())
    with time_held() if uses_clock else contextlib.nullcontext():
        return _search(explorer, config, space)


def _search(explorer: _Explorer, config: ExploreConfig, space: Space) -> Schedule:
    """The remembered schedule, else new ones drawn; the one to replay, or none."""
    remembered = explorer.remembered()
    if remembered is not None and explorer.fails(remembered):
        found: Schedule | None = remembered  # as Hypothesis replays its database first
    else:
        examples = config.runs - 3 if remembered else config.runs - 2
        found = search(space, Random(config.seed), examples, explorer.fails)
    explorer.remember(found)
    if found is None:
        return ()
    explorer.outcome.shortest = found
    return found


def _failed(report: pytest.TestReport) -> bool:
    """Whether a run's report says the test failed, also where xfail turned that round:
    a failure xfail expects is reported as skipped, a pass of a strict xfail as failed
    (``[XPASS(strict)]``, pytest's text since 3.x)."""
    if hasattr(report, "wasxfail"):
        return report.skipped
    if isinstance(report.longrepr, str) and report.longrepr.startswith("[XPASS(strict)]"):
        return False
    return report.failed


def _failure(report: pytest.TestReport | None) -> str:
    """The first line worth showing of a failed report."""
    if report is None:
        return ""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = getattr(crash, "message", None) or str(report.longrepr)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    where = "" if report.when == "call" else f" (at {report.when})"
    return first[:300] + where


class ExploreReport:
    """Collects explored items' figures from their reports (also on the xdist
    controller); prints the ``mgmtauth explore`` terminal section."""

    def __init__(self) -> None:
        self._tests: dict[str, dict[str, object]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROP and isinstance(value, str):
                self._tests[report.nodeid] = json.loads(value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self._tests:
            return
        terminalreporter.write_sep("=", SECTION)
        for test in sorted(self._tests):
            terminalreporter.write_line(test)
            for line in section_text(self._tests[test]):
                terminalreporter.write_line(f"  {line}")
            terminalreporter.write_line("")
