"""The time seam (system_clock, ManualClock) and the simulated clock users get (MgmtClock)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import freezegun
import pytest
from domain_support import admitted

from pytest_mgmtauth import MgmtClock
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock, OffsetClock, system_clock, to_datetime
from pytest_mgmtauth._service.tokens import TokenSigner

MOMENT = datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc)


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(start=100.0)
    assert clock() == 100.0
    assert clock() == 100.0
    clock.advance(2.5)
    assert clock() == 102.5


def test_to_datetime_is_aware_utc() -> None:
    assert to_datetime(MOMENT.timestamp()) == MOMENT
    assert to_datetime(0).tzinfo is timezone.utc


def test_system_clock_reads_time_at_each_call_so_freezegun_moves_it() -> None:
    with freezegun.freeze_time(MOMENT) as frozen:
        assert system_clock() == MOMENT.timestamp()
        frozen.tick(timedelta(seconds=30))
        assert system_clock() == MOMENT.timestamp() + 30
    assert abs(system_clock() - time.time()) < 5


def test_service_on_the_system_clock_follows_a_frozen_clock(signer: TokenSigner) -> None:
    # What mgmt_clock relies on: the service has no clock of its own.
    with freezegun.freeze_time(MOMENT) as frozen:
        service = AuthService(Options(token_ttl=120), signer)
        account = service.accounts.add_account()
        token, record = service.flow(V2Flow).grant(account.username, account.api_key)
        assert record.claims.iat == int(MOMENT.timestamp())
        frozen.tick(timedelta(seconds=120))
        with pytest.raises(Refusal, match="token T1 expired 0 s ago"):
            admitted(service, "v2", token=token, path="/p")


# -- MgmtClock -----------------------------------------------------------------------


@pytest.fixture
def sim() -> Iterator[MgmtClock]:
    clock = MgmtClock(MOMENT).start()
    yield clock
    clock.stop()


def test_mgmt_clock_now_is_aware_utc_and_frozen(sim: MgmtClock) -> None:
    assert sim.now() == MOMENT
    assert sim.now().tzinfo is timezone.utc
    assert time.time() == MOMENT.timestamp()
    assert datetime.now(timezone.utc) == MOMENT


def test_mgmt_clock_advance_takes_keywords_or_a_timedelta(sim: MgmtClock) -> None:
    assert sim.advance(seconds=30) == MOMENT + timedelta(seconds=30)
    assert sim.advance(minutes=2, hours=1) == MOMENT + timedelta(hours=1, minutes=2, seconds=30)
    assert sim.advance(timedelta(seconds=10), seconds=5) == MOMENT + timedelta(
        hours=1, minutes=2, seconds=45
    )
    assert time.time() == sim.now().timestamp()


def test_mgmt_clock_moves_monotonic_time_too(sim: MgmtClock) -> None:
    # Clients cache tokens against time.monotonic(); it must move with the clock.
    before = time.monotonic()
    sim.advance(minutes=31)
    assert time.monotonic() - before == pytest.approx(31 * 60)


def test_hypothesis_keeps_its_real_perf_counter_under_mgmt_clock(sim: MgmtClock) -> None:
    # Hypothesis saves time.perf_counter for a gc callback that may run in any thread.
    # Patched by freezegun, a collection in another thread (the fake's) while the clock
    # stops raised IndexError in freezegun: an explored run's teardown failed at random.
    junkdrawer = pytest.importorskip("hypothesis.internal.conjecture.junkdrawer")
    saved = getattr(junkdrawer, "_perf_counter", None)
    if saved is None:
        pytest.skip("this Hypothesis keeps no perf_counter of its own")
    assert saved is freezegun.api.real_perf_counter


def test_mgmt_clock_refuses_to_go_backwards_with_advance(sim: MgmtClock) -> None:
    with pytest.raises(ValueError, match=r"forward only .*use move_to\(\) to jump back"):
        sim.advance(seconds=-1)
    with pytest.raises(TypeError, match="advance\\(\\) takes a timedelta"):
        sim.advance(30)  # type: ignore[arg-type]


def test_mgmt_clock_move_to_jumps_and_takes_naive_as_utc(sim: MgmtClock) -> None:
    earlier = datetime(2020, 1, 1, 12, 0, 0)
    assert sim.move_to(earlier) == earlier.replace(tzinfo=timezone.utc)
    other_zone = datetime(2030, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert sim.move_to(other_zone) == datetime(2030, 1, 1, 10, 0, tzinfo=timezone.utc)
    with pytest.raises(TypeError, match="move_to\\(\\) takes a datetime"):
        sim.move_to("2030-01-01")  # type: ignore[arg-type]


def test_asyncio_keeps_working_while_time_is_frozen(sim: MgmtClock) -> None:
    async def sleeper() -> str:
        await asyncio.sleep(0.01)
        return "woke"

    async def timeout() -> bool:
        try:
            await asyncio.wait_for(asyncio.Event().wait(), timeout=0.01)
        except asyncio.TimeoutError:
            return True
        return False

    assert asyncio.run(sleeper()) == "woke"
    assert asyncio.run(timeout()) is True
    assert sim.now() == MOMENT


def test_stopped_mgmt_clock_says_its_test_has_ended() -> None:
    clock = MgmtClock(MOMENT).start()
    clock.stop()
    assert "stopped" in repr(clock)
    with pytest.raises(RuntimeError, match="its test has ended"):
        clock.now()
    assert time.time() != MOMENT.timestamp()


# -- issue 9: a clock never moves to where it cannot be shown ------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"seconds": 1e300},
        {"hours": 1e305},
        {"minutes": float("nan")},
        {"seconds": float("inf")},
        {"seconds": 10**400},
        {"seconds": True},
        {"seconds": "60"},
        {"seconds": -0.0},
        {"hours": 876_001},
        {"seconds": 3_153_600_000, "minutes": 1},
    ],
)
def test_mgmt_clock_refuses_absurd_advances_and_stays_put(
    sim: MgmtClock, kwargs: dict[str, object]
) -> None:
    before = sim.now()
    with pytest.raises((TypeError, ValueError), match=r"advance\(\)"):
        sim.advance(**kwargs)  # type: ignore[arg-type]
    assert sim.now() == before


def test_mgmt_clock_stops_before_the_year_3000(sim: MgmtClock) -> None:
    sim.move_to(datetime(2999, 12, 31, 23, 0))
    with pytest.raises(ValueError, match=r"past 3000-01-01.* can move 3600 seconds more"):
        sim.advance(hours=2)
    assert sim.advance(hours=1) == datetime(3000, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match=r"move_to\(\) takes a time from 1970-01-01 to 3000"):
        sim.move_to(datetime(9999, 1, 1))
    with pytest.raises(ValueError, match="advance"):
        sim.advance(timedelta(days=365 * 101))


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), 1e308, 3e11, -1, 10**400])
def test_domain_clocks_refuse_absurd_advances_unchanged(seconds: float) -> None:
    manual = ManualClock()
    with pytest.raises(ValueError, match="advance"):
        manual.advance(seconds)
    assert manual() == 1_800_000_000.0
    offset = OffsetClock()
    with pytest.raises(ValueError, match="advance"):
        offset.advance(seconds)
    assert offset._offset == 0


def test_a_lock_too_long_to_date_changes_nothing(make_service: Any) -> None:
    service = make_service()
    account = service.accounts.add_account()
    for seconds in (1e308, float("inf"), float("nan"), 10**400, 0, True, "60"):
        with pytest.raises((TypeError, ValueError), match=r"lock\(\) 'seconds'"):
            service.lockout.lock(account.username, seconds=seconds)
    assert service.timeline.events == []
    service.lockout.lock(account.username, seconds=315_360_000)
    assert service.timeline.events[-1].until is not None
