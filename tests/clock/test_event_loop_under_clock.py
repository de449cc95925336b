"""With ``mgmt_clock`` frozen, event loops keep real time.

freezegun with its default ``real_asyncio=False`` stops asyncio's clock: ``asyncio.sleep``
never returns and client timeouts never fire. ``mgmt_clock`` must not do that. Every test
here runs its loop under a real-time guard (see conftest), so a regression fails with
"the event loop is blocked" instead of hanging; the last test proves the guard does
catch a frozen loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from typing import TYPE_CHECKING, Any

import aiohttp
import freezegun
import httpx
import pytest
from asyncclock_guard import LoopBlocked, run_async_within
from werkzeug import Request, Response

from pytest_mgmtauth import ApiCall, TokenIssued

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_mgmtauth import Account, MgmtClock, MgmtServer

#: A client timeout short enough to fire quickly, long enough for a real round trip.
CLIENT_TIMEOUT = 0.3


def bearer_token(server: MgmtServer) -> str:
    account = server.add_account()
    form = {"username": account.username, "key": account.api_key}
    token: str = httpx.post(f"{server.url}/v2/auth", data=form).json()["token"]
    return token


@pytest.fixture
def stuck_route(mgmt_server: MgmtServer) -> Iterator[threading.Event]:
    """``GET /api/slow``: its handler waits (real time) until the test releases it."""
    release = threading.Event()
    returned = threading.Event()

    def handler(request: Request) -> Response:
        release.wait(15)
        returned.set()
        return Response("late", content_type="text/plain")

    mgmt_server.route("GET", "/api/slow").respond_with_handler(handler)
    yield release
    release.set()
    # The handler thread must be done before this test's fake is torn down.
    assert returned.wait(15) or not mgmt_server.events


def test_asyncio_sleep_and_wait_for_keep_real_time(
    mgmt_clock: MgmtClock, run_async: Callable[..., Any]
) -> None:
    frozen_at = mgmt_clock.now()

    async def main() -> str:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(0.05)
        slept = loop.time() - start
        never: asyncio.Future[None] = loop.create_future()
        try:
            await asyncio.wait_for(never, timeout=0.05)
        except asyncio.TimeoutError:
            outcome = "timed out"
        else:
            outcome = "completed"
        assert slept >= 0.05  # the loop's clock moved while the simulated one did not
        return outcome

    assert run_async(main, what="asyncio.sleep / wait_for under mgmt_clock") == "timed out"
    assert mgmt_clock.now() == frozen_at  # time.time() stood still all along


def test_advancing_the_clock_inside_a_running_loop(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    run_async: Callable[..., Any],
) -> None:
    """A whole async v2 flow, moving simulated time from inside the coroutine."""
    mgmt_server.route("GET", "/api/devices").respond_with_json({"devices": []})
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}

    async def main() -> list[int]:
        statuses = []
        async with httpx.AsyncClient(base_url=mgmt_server.url, timeout=5) as client:
            token = (await client.post("/v2/auth", data=form)).json()["token"]
            bearer = {"Authorization": f"Bearer {token}"}
            statuses.append((await client.get("/api/devices", headers=bearer)).status_code)
            mgmt_clock.advance(minutes=30)
            await asyncio.sleep(0.01)
            statuses.append((await client.get("/api/devices", headers=bearer)).status_code)
            token = (await client.post("/v2/auth", data=form)).json()["token"]
            bearer = {"Authorization": f"Bearer {token}"}
            statuses.append((await client.get("/api/devices", headers=bearer)).status_code)
        return statuses

    assert run_async(main, what="an async v2 flow across expiry") == [200, 401, 200]
    issued = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert [e.at for e in issued] == [
        issued[0].at,
        issued[0].at + dt.timedelta(minutes=30),
    ]
    assert [e.status for e in mgmt_server.events if isinstance(e, ApiCall)] == [200, 401, 200]


def test_httpx_async_timeout_fires_under_the_frozen_clock(
    mgmt_server: MgmtServer,
    mgmt_clock: MgmtClock,
    stuck_route: threading.Event,
    run_async: Callable[..., Any],
) -> None:
    # The route is v2-protected: an unauthenticated call would be refused at once, so
    # the timeout can only come from the stuck handler.
    token = bearer_token(mgmt_server)

    async def main() -> str:
        async with httpx.AsyncClient(
            timeout=CLIENT_TIMEOUT, headers={"Authorization": f"Bearer {token}"}
        ) as client:
            try:
                await client.get(f"{mgmt_server.url}/api/slow")
            except httpx.ReadTimeout:
                return "ReadTimeout"
        return "answered"

    assert run_async(main, what="httpx.AsyncClient timeout under mgmt_clock") == "ReadTimeout"


def test_aiohttp_timeout_fires_under_the_frozen_clock(
    mgmt_server: MgmtServer,
    mgmt_clock: MgmtClock,
    stuck_route: threading.Event,
    run_async: Callable[..., Any],
) -> None:
    token = bearer_token(mgmt_server)

    async def main() -> str:
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=CLIENT_TIMEOUT),
            headers={"Authorization": f"Bearer {token}"},
        ) as session:
            try:
                async with session.get(f"{mgmt_server.url}/api/slow") as reply:
                    await reply.read()
            except asyncio.TimeoutError:
                return "timeout"
        return "answered"

    assert run_async(main, what="aiohttp timeout under mgmt_clock") == "timeout"


@pytest.fixture
def early_loop() -> asyncio.AbstractEventLoop:
    """An event loop made before ``mgmt_clock`` starts (requested first), like a
    framework's session-wide loop; the guard closes it."""
    return asyncio.new_event_loop()


def test_a_loop_created_before_the_clock_froze_keeps_working(
    early_loop: asyncio.AbstractEventLoop,
    mgmt_clock: MgmtClock,
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    run_async: Callable[..., Any],
) -> None:
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}

    async def main() -> int:
        await asyncio.sleep(0.02)
        await asyncio.wait_for(asyncio.sleep(0.01), timeout=1)
        async with httpx.AsyncClient(timeout=5) as client:
            reply = await client.post(f"{mgmt_server.url}/v2/auth", data=form)
        return reply.status_code

    assert run_async(main, what="a loop made before the freeze", loop=early_loop) == 200


def test_the_guard_catches_a_frozen_event_loop() -> None:
    """The control: freezegun's default (real_asyncio=False) freezes asyncio's clock, and
    the guard reports it instead of hanging."""

    async def sleeps() -> None:
        await asyncio.sleep(0.01)

    with (
        freezegun.freeze_time("2030-01-01", tick=False, ignore=["_pytest.timing"]),
        pytest.raises(LoopBlocked, match="the event loop is blocked"),
    ):
        run_async_within(0.5, sleeps, what="asyncio.sleep under plain freezegun")
