"""What an exploration runs and what it tells: its settings (the ``mgmtauth_explore``
marker's arguments, checked), the events of a schedule (the sweeps' faults at their
points, and clock moves before a protected call), the clock moves worth trying, the
replay text, and the story of a failing run in the timeline's words.

Also where schedules come from: drawn at random from the space a baseline run
described until one fails (``Space``, ``draw``, ``search``), and shrunk through simpler
ones (``simpler``, ``shrink``).

Pure: no pytest. The marker's and property's names are ``sweep_plan.py``'s (imported
by every run of pytest); this module is imported when a test explores, and imports the
events and the fault table where they are used. The glue (``_glue/explore.py``) runs
the test's body once per schedule and reports with these texts.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING

from .sweep_plan import EXPLORE_KINDS, EXPLORE_MARKER as MARKER

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from random import Random

    from .._service.events import Event, ScheduledFaultFired
    from .._service.options import Options

#: The event that moves ``mgmt_clock`` on (not a fault: it counts apart from max_faults).
CLOCK = "clock"
DEFAULT_RUNS = 100
MAX_RUNS = 100_000
DEFAULT_MAX_FAULTS = 2
MAX_FAULTS = 10
#: The arguments the marker takes.
ARGUMENTS = ("runs", "max_faults", "faults", "seed", "replay")


@dataclasses.dataclass(frozen=True, order=True)
class ExploreEvent:
    """One event of a schedule: a fault ``kind`` (a sweep's) or ``clock`` at a point
    (``on`` ``"call"`` or ``"auth"``, ``index`` from 1); ``seconds``: a clock move's."""

    index: int
    on: str
    kind: str
    seconds: int = 0

    @property
    def point(self) -> str:
        return f"{self.on}{self.index}"

    @property
    def label(self) -> str:
        """``expire@call2``, ``clock+1790@call1``: the replay's words."""
        if self.kind == CLOCK:
            return f"{CLOCK}+{self.seconds}@{self.point}"
        return f"{self.kind}@{self.point}"

    def as_json(self) -> dict[str, object]:
        data: dict[str, object] = {"point": self.point, "event": self.kind}
        if self.kind == CLOCK:
            data["seconds"] = self.seconds
        return data

    def describe(self) -> str:
        """What it does, in a few words (before it fired)."""
        if self.kind == CLOCK:
            return f"the clock moves on {self.seconds} s just before protected call {self.index}"
        from .._service.faults import scheduled

        return scheduled(self.kind, self.point).describe()


Schedule = tuple[ExploreEvent, ...]


def schedule(events: Iterable[ExploreEvent], *, keep_order: bool = False) -> Schedule:
    """A schedule in its one order (by point, then kind; or as given, ``keep_order``),
    each event once; at most one answer per authentication (a 429 and a 503 at the
    same call: the first kind's)."""
    seen: dict[tuple[int, str, str], ExploreEvent] = {}
    for event in events if keep_order else sorted(events):
        key = (event.index, event.on, event.kind if event.on == "call" else "answer")
        seen.setdefault(key, event)
    return tuple(seen.values())


def replay_text(events: Schedule) -> str:
    return ", ".join(event.label for event in events)


_LABEL = re.compile(r"\s*([a-z]+)(?:\+([0-9]+))?@(call|auth)([1-9][0-9]*)\s*")


def parse_replay(text: object, where: str) -> Schedule:
    """The schedule a ``replay="..."`` names; ValueError saying what is accepted."""
    if not isinstance(text, str):
        raise ValueError(
            f"{where}: replay must be a str like 'expire@call2, clock+1790@call1' (as an "
            f"exploration prints it), got {text!r}"
        )
    from .._service.faults import SCHEDULED_KINDS

    events: list[ExploreEvent] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = _LABEL.fullmatch(part)
        if match is None:
            raise ValueError(
                f"{where}: replay event {part!r} is not one of 'KIND@callK', 'KIND@authK' "
                f"or 'clock+SECONDS@callK' (kinds: {', '.join(EXPLORE_KINDS)})"
            )
        kind, seconds, on, index = match.groups()
        if kind == CLOCK:
            if seconds is None or on != "call":
                raise ValueError(
                    f"{where}: replay event {part!r}: a clock move is written "
                    "'clock+SECONDS@callK' (before protected call K)"
                )
            events.append(ExploreEvent(int(index), on, CLOCK, int(seconds)))
            continue
        if kind not in EXPLORE_KINDS:
            raise ValueError(
                f"{where}: replay event {part!r}: unknown fault kind {kind!r}; known: "
                f"{', '.join(EXPLORE_KINDS)}, clock"
            )
        if seconds is not None or SCHEDULED_KINDS[kind] != on:
            raise ValueError(
                f"{where}: replay event {part!r}: {kind} is written "
                f"'{kind}@{SCHEDULED_KINDS[kind]}K'"
            )
        events.append(ExploreEvent(int(index), on, kind))
    return schedule(events)


@dataclasses.dataclass(frozen=True)
class ExploreConfig:
    """The checked arguments of one ``mgmtauth_explore`` marker."""

    runs: int = DEFAULT_RUNS
    max_faults: int = DEFAULT_MAX_FAULTS
    faults: tuple[str, ...] = EXPLORE_KINDS
    seed: int | None = None
    replay: Schedule | None = None


def check_config(args: Sequence[object], kwargs: dict[str, object], where: str) -> ExploreConfig:
    """The marker's arguments, checked; ValueError naming what is wrong and the fix."""
    if args:
        raise ValueError(
            f"{where}: takes keyword arguments only ({', '.join(ARGUMENTS)}), got "
            f"positional {args!r}"
        )
    unknown = sorted(set(kwargs) - set(ARGUMENTS))
    if unknown:
        raise ValueError(
            f"{where}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(ARGUMENTS)}"
        )
    runs = kwargs.get("runs", DEFAULT_RUNS)
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        raise ValueError(
            f"{where}: runs must be an int from 1 to {MAX_RUNS} (how many times the "
            f"test's body runs), got {runs!r}"
        )
    max_faults = kwargs.get("max_faults", DEFAULT_MAX_FAULTS)
    if (
        isinstance(max_faults, bool)
        or not isinstance(max_faults, int)
        or not 1 <= max_faults <= MAX_FAULTS
    ):
        raise ValueError(
            f"{where}: max_faults must be an int from 1 to {MAX_FAULTS} (faults per run), "
            f"got {max_faults!r}"
        )
    from .sweep_plan import check_faults

    faults = check_faults(kwargs.get("faults", EXPLORE_KINDS), where, EXPLORE_KINDS)
    if not faults:
        raise ValueError(
            f"{where}: faults is empty; name at least one of {', '.join(EXPLORE_KINDS)}"
        )
    seed = kwargs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"{where}: seed must be an int, got {seed!r}")
    replay = kwargs.get("replay")
    return ExploreConfig(
        runs=runs,
        max_faults=max_faults,
        faults=faults,
        seed=seed,
        replay=None if replay is None else parse_replay(replay, where),
    )


@dataclasses.dataclass(frozen=True)
class Space:
    """Where events may go: the points a baseline run reached, the fault kinds at each
    (in the marker's order: a shrink tries the first ones first), the clock moves."""

    calls: int
    auths: int
    call_kinds: tuple[str, ...]
    auth_kinds: tuple[str, ...]
    max_faults: int
    moves: tuple[int, ...]

    @property
    def empty(self) -> bool:
        return not (self.call_kinds or self.auth_kinds or self.moves)


def draw(space: Space, rng: Random) -> Schedule:
    """One schedule at random: how many faults first, evenly from none to
    ``max_faults`` (combined faults are what a sweep cannot try), each at a point and
    of a kind drawn evenly; then clock moves, from none to ``max_faults`` the same
    way."""
    places = [
        (on, kinds, top)
        for on, kinds, top in (
            ("call", space.call_kinds, space.calls),
            ("auth", space.auth_kinds, space.auths),
        )
        if kinds
    ]
    events = []
    for _ in range(rng.randint(0, space.max_faults) if places else 0):
        on, kinds, top = rng.choice(places)
        events.append(ExploreEvent(rng.randint(1, top), on, rng.choice(kinds)))
    for _ in range(rng.randint(0, space.max_faults) if space.moves else 0):
        events.append(
            ExploreEvent(rng.randint(1, space.calls), "call", CLOCK, rng.choice(space.moves))
        )
    return schedule(events)


#: Draws in a row that only repeat schedules already run: the space is exhausted.
_MISSES = 1000


def search(
    space: Space, rng: Random, examples: int, fails: Callable[[Schedule], bool]
) -> Schedule | None:
    """Up to ``examples`` schedules drawn with ``rng``, each new (none twice, nor the
    baseline's), until one ``fails``; that one shrunk (``shrink``), or None. Fewer when
    every schedule there is has run."""
    known: dict[Schedule, bool] = {(): False}
    misses = 0
    while examples > 0 and misses < _MISSES:
        events = draw(space, rng)
        if events in known:
            misses += 1
            continue
        misses, examples = 0, examples - 1
        known[events] = fails(events)
        if known[events]:
            return shrink(events, space, fails, known)
    return None


def shrink(
    found: Schedule,
    space: Space,
    fails: Callable[[Schedule], bool],
    known: dict[Schedule, bool] | None = None,
) -> Schedule:
    """The first of the ``simpler`` schedules that still fails, again and again until
    none does: the fewest events, the earliest points, the first kinds, the smallest
    clock moves. Each schedule is tried once (``known``: those tried already)."""
    known = {} if known is None else known
    shorter = True
    while shorter:
        shorter = False
        for events in simpler(found, space):
            if events not in known:
                known[events] = fails(events)
            if known[events]:
                found, shorter = events, True
                break
    return found


def simpler(events: Schedule, space: Space) -> Iterator[Schedule]:
    """The schedules one step simpler than ``events``, the simplest steps first: one
    event fewer, then one event at an earlier point, of an earlier kind, or a smaller
    clock move. A shrink takes the first that still fails and starts again, until none
    does: each step shortens the schedule or lowers one of its figures, so it ends."""
    for i in range(len(events)):
        yield events[:i] + events[i + 1 :]
    for i, event in enumerate(events):
        others = events[:i] + events[i + 1 :]
        for index in range(1, event.index):
            yield schedule([*others, dataclasses.replace(event, index=index)])
        kinds = space.call_kinds if event.on == "call" else space.auth_kinds
        if event.kind in kinds:
            for kind in kinds[: kinds.index(event.kind)]:
                yield schedule([*others, dataclasses.replace(event, kind=kind)])
        for seconds in space.moves if event.kind == CLOCK else ():
            if seconds >= event.seconds:
                break
            yield schedule([*others, dataclasses.replace(event, seconds=seconds)])


def moments(options: Options, margins: Iterable[float]) -> tuple[int, ...]:
    """Clock moves worth trying, smallest first: just before, at and just after a
    credential's end (the tokens' lifetimes, the v1 idle timeout), the same around the
    start of each flow's churn margin (``margins``), and a throttle's Retry-After."""
    from .._service.faults import DEFAULT_RETRY_AFTER

    found = {DEFAULT_RETRY_AFTER, DEFAULT_RETRY_AFTER + 1}
    for end in (options.token_ttl, options.oauth_token_ttl, options.session_timeout):
        whole = int(end)
        found.update((whole - 1, whole, whole + 1))
        for margin in margins:
            start = whole - int(margin)
            if start > 0:
                found.update((start - 1, start, start + 1))
    return tuple(sorted(s for s in found if s > 0))


def fired_schedule(events: Sequence[Event]) -> Schedule:
    """The events of a schedule that fired in a run, in the order they fired, read
    from its timeline."""
    from .._service.events import ScheduledFaultFired

    fired = [_event_of(e) for e in events if isinstance(e, ScheduledFaultFired)]
    return schedule(fired, keep_order=True)


def _event_of(fired: ScheduledFaultFired) -> ExploreEvent:
    on = "auth" if fired.point.startswith("auth") else "call"
    seconds = 0
    if fired.fault == CLOCK:
        match = re.search(r"([0-9]+) s", fired.detail)
        seconds = int(match.group(1)) if match else 0
    return ExploreEvent(int(fired.point[len(on) :]), on, fired.fault, seconds)


def story(events: Sequence[Event], *, failure: str) -> list[str]:
    """A failing run told in the timeline's words: each event of its schedule as it
    fired, then what the client did after the last fault, then the failure."""
    from .._service.events import ScheduledFaultFired
    from .sweep_verdict import analyse

    fired = [e for e in events if isinstance(e, ScheduledFaultFired)]
    lines = []
    for number, event in enumerate(fired, 1):
        lines.append(f"{number}. {_event_of(event).label}: {event.detail}")
    faults = [e for e in fired if e.fault != CLOCK]
    if faults:
        last = faults[-1]
        # Read as a sweep reads one fault: the timeline with only the last one in it.
        after = analyse(
            last.fault,
            [e for e in events if not isinstance(e, ScheduledFaultFired) or e is last],
            failed=True,
        )
        if after.summary:
            lines.append(f"then: {after.summary}")
    if not fired:
        lines.append("no event: the test fails without any fault or clock move")
    if failure:
        lines.append(f"the test failed: {failure}")
    return lines


@dataclasses.dataclass
class Outcome:
    """An exploration's result: ``runs`` of the body, the distinct schedules that ran
    (as fired), the distinct ones that failed, the shortest failing one (``None``: none
    failed), and the warnings counted over all runs."""

    runs: int = 0
    distinct: set[Schedule] = dataclasses.field(default_factory=set)
    failing: set[Schedule] = dataclasses.field(default_factory=set)
    shortest: Schedule | None = None
    story: list[str] = dataclasses.field(default_factory=list)

    def add(self, fired: Schedule, *, failed: bool) -> None:
        self.runs += 1
        self.distinct.add(fired)
        if failed:
            self.failing.add(fired)

    def as_json(self) -> str:
        chosen = self.shortest or ()
        return json.dumps(
            {
                "runs": self.runs,
                "distinct": len(self.distinct),
                "failures": len(self.failing),
                "schedule": [event.as_json() for event in chosen],
                "replay": replay_text(chosen) if self.shortest is not None else None,
                "story": self.story,
            }
        )


def replay_marker(replay: str) -> str:
    return f'@pytest.mark.{MARKER}(replay="{replay}")'


def section_text(data: dict[str, object]) -> list[str]:
    """The lines of one explored test in the ``mgmtauth explore`` terminal section and
    its failure's report section, from its property's JSON."""
    runs, distinct, failures = data.get("runs"), data.get("distinct"), data.get("failures")
    lines = [f"{runs} runs, {distinct} distinct schedules, {failures} failing"]
    replay = data.get("replay")
    if isinstance(replay, str):
        lines.append(f"shortest failing schedule: {replay or '(no event)'}")
        story_lines = data.get("story")
        if isinstance(story_lines, list):
            lines.extend(f"  {line}" for line in story_lines)
        lines.append(f"replay it: {replay_marker(replay)}")
    else:
        lines.append("no schedule failed")
    return lines
