"""The exploration's domain, directly: the marker's arguments, the replay text, the
clock moves worth trying, the schedules drawn and their shrink, the schedule read back
from a timeline, and the story."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from random import Random

import pytest

from pytest_mgmtauth._service.events import ApiCall, ScheduledFaultFired, TokenIssued
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._verdicts.explore_plan import (
    CLOCK,
    ExploreEvent,
    Outcome,
    Schedule,
    Space,
    check_config,
    draw,
    fired_schedule,
    moments,
    parse_replay,
    replay_text,
    schedule,
    search,
    section_text,
    shrink,
    simpler,
    story,
)
from pytest_mgmtauth._verdicts.sweep_plan import EXPLORE_KINDS, FAULT_KINDS

WHERE = "@pytest.mark.mgmtauth_explore on test_x.py::test_x"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_the_replay_text_reads_back_as_the_same_schedule() -> None:
    events = schedule(
        [
            ExploreEvent(2, "call", "expire"),
            ExploreEvent(1, "call", CLOCK, 1790),
            ExploreEvent(2, "auth", "throttle"),
        ]
    )
    text = replay_text(events)
    assert text == "clock+1790@call1, throttle@auth2, expire@call2"
    assert parse_replay(text, WHERE) == events
    assert [e.as_json() for e in events] == [
        {"point": "call1", "event": "clock", "seconds": 1790},
        {"point": "auth2", "event": "throttle"},
        {"point": "call2", "event": "expire"},
    ]


def test_a_schedule_holds_each_event_once_and_one_answer_per_authentication() -> None:
    events = schedule(
        [
            ExploreEvent(2, "auth", "unavailable"),
            ExploreEvent(2, "auth", "throttle"),
            ExploreEvent(1, "call", "reset"),
            ExploreEvent(1, "call", "reset"),
            ExploreEvent(1, "call", "revoke"),
        ]
    )
    assert replay_text(events) == "reset@call1, revoke@call1, throttle@auth2"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("melt@call2", "unknown fault kind 'melt'; known: expire, revoke"),
        ("throttle@call2", "throttle is written 'throttle@authK'"),
        ("expire@auth1", "expire is written 'expire@callK'"),
        ("clock@call1", "a clock move is written 'clock+SECONDS@callK'"),
        ("clock+5@auth1", "a clock move is written 'clock+SECONDS@callK'"),
        ("expire@call0", "is not one of 'KIND@callK'"),
        ("expire call2", "is not one of 'KIND@callK'"),
    ],
)
def test_a_bad_replay_says_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="replay") as info:
        parse_replay(text, WHERE)
    assert message in str(info.value)
    assert str(info.value).startswith(WHERE)


def test_the_marker_defaults() -> None:
    config = check_config((), {}, WHERE)
    assert (config.runs, config.max_faults, config.faults) == (100, 2, EXPLORE_KINDS)
    # The sweep's kinds, and a 503 on a protected call.
    assert (*FAULT_KINDS, "busy") == EXPLORE_KINDS
    assert config.seed is None
    assert config.replay is None


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((200,), {}, "takes keyword arguments only"),
        ((), {"run": 5}, "unknown argument(s) run; it takes runs, max_faults"),
        ((), {"runs": 0}, "runs must be an int from 1 to 100000"),
        ((), {"runs": True}, "runs must be an int"),
        ((), {"max_faults": 0}, "max_faults must be an int from 1 to 10"),
        ((), {"faults": ["melt"]}, "unknown fault kind 'melt'"),
        ((), {"faults": []}, "faults is empty"),
        ((), {"seed": "x"}, "seed must be an int"),
        ((), {"replay": 3}, "replay must be a str like"),
    ],
)
def test_bad_marker_arguments_are_named(args, kwargs, message: str) -> None:
    with pytest.raises(ValueError, match="mgmtauth_explore") as info:
        check_config(args, kwargs, WHERE)
    assert message in str(info.value)


def test_clock_moves_sit_around_the_moments_that_matter() -> None:
    options = Options(token_ttl=1800, session_timeout=900, oauth_token_ttl=7200)
    found = moments(options, [300.0])
    # Retry-After, the churn margin's start, the credentials' ends: just before, at, after.
    for expected in (1, 2, 1499, 1500, 1501, 1799, 1800, 1801, 899, 900, 901, 6899, 7199):
        assert expected in found
    assert list(found) == sorted(set(found))
    assert min(found) > 0


def _fired(fault: str, point: str, detail: str, second: int = 0) -> ScheduledFaultFired:
    at = T0.replace(second=second)
    return ScheduledFaultFired(at=at, username=None, fault=fault, point=point, detail=detail)


def test_the_schedule_that_fired_is_read_from_the_timeline_in_its_order() -> None:
    events = [
        _fired("revoke", "call2", "token T1 revoked on cue"),
        _fired("clock", "call3", "the clock moved on 1790 s"),
        _fired("throttle", "auth2", "POST /v2/auth answered error 429, Retry-After 1s"),
    ]
    assert replay_text(fired_schedule(events)) == ("revoke@call2, clock+1790@call3, throttle@auth2")


def test_the_story_tells_each_event_then_what_the_client_did_then_the_failure() -> None:
    issued = TokenIssued(at=T0, username="u", token="T1", fingerprint="#abc", expires_at=T0)
    call = ApiCall(
        at=T0,
        username="u",
        method="GET",
        path="/v2/devices",
        version="v2",
        credential="T1",
        status=401,
        return_code=1401,
    )
    events = [
        issued,
        _fired("revoke", "call1", "token T1 revoked on cue"),
        call,
        _fired("throttle", "auth2", "POST /v2/auth answered error 429, Retry-After 1s"),
    ]
    lines = story(events, failure="HTTPError: 429")
    assert lines == [
        "1. revoke@call1: token T1 revoked on cue",
        "2. throttle@auth2: POST /v2/auth answered error 429, Retry-After 1s",
        "then: the client never retried authentication after a 429",
        "the test failed: HTTPError: 429",
    ]


def test_a_test_that_fails_without_events_says_so() -> None:
    assert story([], failure="AssertionError") == [
        "no event: the test fails without any fault or clock move",
        "the test failed: AssertionError",
    ]


def test_the_figures_count_runs_distinct_schedules_and_failing_ones() -> None:
    outcome = Outcome()
    failing = (ExploreEvent(1, "call", "revoke"),)
    outcome.add((), failed=False)
    outcome.add(failing, failed=True)
    outcome.add(failing, failed=True)
    outcome.shortest = failing
    outcome.story = ["1. revoke@call1: token T1 revoked on cue"]
    data = json.loads(outcome.as_json())
    assert data["runs"] == 3
    assert data["distinct"] == 2
    assert data["failures"] == 1
    assert data["schedule"] == [{"point": "call1", "event": "revoke"}]
    assert data["replay"] == "revoke@call1"
    lines = section_text(data)
    assert lines[0] == "3 runs, 2 distinct schedules, 1 failing"
    assert lines[-1] == """replay it: @pytest.mark.mgmtauth_explore(replay="revoke@call1")"""


def test_figures_without_a_failure() -> None:
    outcome = Outcome()
    outcome.add((), failed=False)
    data = json.loads(outcome.as_json())
    assert data["replay"] is None
    assert data["schedule"] == []
    assert section_text(data)[-1] == "no schedule failed"


SPACE = Space(
    calls=3,
    auths=3,
    call_kinds=("expire", "revoke", "reset"),
    auth_kinds=("throttle", "unavailable"),
    max_faults=2,
    moves=(1, 1799, 1800),
)


def test_a_seed_draws_the_same_schedules() -> None:
    first = [draw(SPACE, Random(7)) for _ in range(50)]
    again = [draw(SPACE, Random(7)) for _ in range(50)]
    assert first == again
    assert [draw(SPACE, Random(8)) for _ in range(50)] != first


def test_drawn_schedules_stay_in_their_space() -> None:
    rng = Random(1)
    drawn = [draw(SPACE, rng) for _ in range(2000)]
    counts: Counter[int] = Counter()
    for events in drawn:
        faults = [e for e in events if e.kind != CLOCK]
        moves = [e for e in events if e.kind == CLOCK]
        assert len(faults) <= 2
        assert len(moves) <= 2
        assert events == schedule(events)  # in their one order
        for event in events:
            top = SPACE.calls if event.on == "call" else SPACE.auths
            assert 1 <= event.index <= top
            kinds = SPACE.call_kinds if event.on == "call" else SPACE.auth_kinds
            assert event.kind in (*kinds, CLOCK)
            assert event.kind != CLOCK or event.seconds in SPACE.moves
        counts[len(faults)] += 1
    # How many faults is drawn evenly: two-fault schedules, what a sweep cannot try,
    # are a third of them (a few fewer: two answers at one authentication are one).
    assert counts[0] > 500
    assert counts[2] > 500
    # Every kind at every point comes up.
    seen = {(e.on, e.index, e.kind) for events in drawn for e in events}
    assert len(seen) == 3 * 3 + 3 * 2 + 3


def test_no_clock_moves_without_moments_and_no_faults_without_kinds() -> None:
    calm = Space(calls=2, auths=1, call_kinds=(), auth_kinds=(), max_faults=3, moves=(5,))
    assert all(e.kind == CLOCK for _ in range(100) for e in draw(calm, Random(1)))
    still = Space(calls=2, auths=1, call_kinds=("revoke",), auth_kinds=(), max_faults=3, moves=())
    assert all(e.kind == "revoke" for _ in range(100) for e in draw(still, Random(1)))


def _key(events: Schedule) -> tuple[int, int, int]:
    return (len(events), sum(e.index for e in events), sum(e.seconds for e in events))


def test_each_simpler_schedule_is_simpler() -> None:
    events = schedule(
        [
            ExploreEvent(3, "call", "reset"),
            ExploreEvent(2, "auth", "unavailable"),
            ExploreEvent(2, "call", CLOCK, 1800),
        ]
    )
    candidates = list(simpler(events, SPACE))
    # The fewest events first: each event left out, in turn.
    assert candidates[:3] == [events[1:], events[:1] + events[2:], events[:2]]
    for candidate in candidates:
        assert candidate != events
        kinds = sorted(e.kind for e in candidate)
        smaller = _key(candidate) < _key(events)
        earlier_kind = kinds != sorted(e.kind for e in events)
        assert smaller or earlier_kind, candidate


def test_a_shrink_ends_at_the_shortest_failing_schedule() -> None:
    # The client fails when its token is lost (revoke or expire, at any call) and the
    # authentication that follows answers 429.
    def fails(events: Schedule) -> bool:
        lost = [e for e in events if e.kind in ("expire", "revoke")]
        throttled = [e for e in events if e.kind == "throttle"]
        return bool(lost and throttled and throttled[0].index >= 2)

    found = schedule(
        [
            ExploreEvent(3, "call", "revoke"),
            ExploreEvent(3, "auth", "throttle"),
            ExploreEvent(2, "call", CLOCK, 1800),
            ExploreEvent(1, "call", "reset"),
        ]
    )
    tried: list[Schedule] = []

    def counted(events: Schedule) -> bool:
        tried.append(events)
        return fails(events)

    shortest = shrink(found, SPACE, counted)
    assert replay_text(shortest) == "expire@call1, throttle@auth2"
    assert len(tried) == len(set(tried))  # each schedule tried once


def test_a_search_draws_new_schedules_until_one_fails_then_shrinks_it() -> None:
    runs: list[Schedule] = []

    def fails(events: Schedule) -> bool:
        runs.append(events)
        return any(e.kind == "unavailable" for e in events) and any(
            e.kind == "reset" for e in events
        )

    found = search(SPACE, Random(3), 200, fails)
    assert found is not None
    assert replay_text(found) == "unavailable@auth1, reset@call1"
    assert () not in runs  # the baseline ran already
    assert len(runs) == len(set(runs))


def test_a_search_stops_at_its_runs_or_when_every_schedule_has_run() -> None:
    runs: list[Schedule] = []

    def passes(events: Schedule) -> bool:
        runs.append(events)
        return False

    assert search(SPACE, Random(1), 30, passes) is None
    assert len(runs) == 30
    tiny = Space(calls=1, auths=0, call_kinds=("revoke",), auth_kinds=(), max_faults=2, moves=())
    runs.clear()
    assert search(tiny, Random(1), 30, passes) is None
    assert runs == [schedule([ExploreEvent(1, "call", "revoke")])]
