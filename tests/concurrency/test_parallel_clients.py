"""Many clients at once against one fake: 8 threads, 50 async tasks.

Concurrency is proven without timings: a route handler waits on a barrier that opens
only when every client is inside a handler at the same moment, so a server that
serialised requests would break the barrier (a 500 re-raised in the test). Every request
is unique, so "recorded exactly once" is an equality of multisets.
"""

from __future__ import annotations

import asyncio
import collections
import re
import threading
from typing import TYPE_CHECKING, Any

import aiohttp
import httpx
import pytest
import requests
from werkzeug import Request, Response

from pytest_mgmtauth import ApiCall, LoggedIn, LoggedOut, TokenIssued

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_mgmtauth import Account, MgmtServer

THREADS = 8
CALLS_PER_THREAD = 6
TASKS = 50
ITEM = re.compile(r"^/api/items/\d+$")


def barrier_handler(parties: int) -> tuple[threading.Barrier, Callable[[Request], Response]]:
    """A handler that answers only once ``parties`` requests are inside it at once."""
    barrier = threading.Barrier(parties, timeout=15)

    def handler(request: Request) -> Response:
        barrier.wait()  # BrokenBarrierError (-> 500, re-raised in the test) if serialised
        return Response(request.path, content_type="text/plain")

    return barrier, handler


def api_paths(server: MgmtServer) -> collections.Counter[tuple[str, int, str | None]]:
    return collections.Counter(
        (e.path, e.status, e.credential) for e in server.events if isinstance(e, ApiCall)
    )


@pytest.mark.parametrize(
    "https",
    [
        pytest.param(False, id="http"),
        pytest.param(True, id="https", marks=pytest.mark.mgmtauth(https=True)),
    ],
)
def test_eight_threads_each_event_recorded_exactly_once(
    mgmt_server: MgmtServer, in_threads: Callable[..., None], https: bool
) -> None:
    accounts = [mgmt_server.add_account() for _ in range(THREADS)]
    _, first_round = barrier_handler(THREADS)
    mgmt_server.route("GET", ITEM).respond_with_handler(first_round)
    start = threading.Barrier(THREADS, timeout=15)
    answers: dict[int, list[str]] = {}

    def worker(index: int, account: Account) -> None:
        with requests.Session() as session:
            session.trust_env = False
            session.verify = mgmt_server.ca_bundle or True
            start.wait()
            reply = session.post(
                f"{mgmt_server.url}/v2/auth",
                data={"username": account.username, "key": account.api_key},
                timeout=15,
            )
            reply.raise_for_status()
            headers = {"Authorization": f"Bearer {reply.json()['token']}"}
            got = []
            for call in range(CALLS_PER_THREAD):
                path = f"/api/items/{index * 100 + call}"
                answer = session.get(f"{mgmt_server.url}{path}", headers=headers, timeout=15)
                answer.raise_for_status()
                got.append(answer.text)
            answers[index] = got

    in_threads(worker, accounts, what=f"{THREADS} threads of v2 flows")

    expected_paths = {
        i: [f"/api/items/{i * 100 + c}" for c in range(CALLS_PER_THREAD)] for i in range(THREADS)
    }
    assert answers == expected_paths  # each thread got its own answers, in order
    issued = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert sorted(str(e.username) for e in issued) == sorted(a.username for a in accounts)
    labels = {e.username: e.token for e in issued}
    assert sorted(labels.values()) == sorted(f"T{i + 1}" for i in range(THREADS))
    assert api_paths(mgmt_server) == collections.Counter(
        (path, 200, labels[accounts[i].username])
        for i, paths in expected_paths.items()
        for path in paths
    )


def test_eight_threads_of_v1_sessions_login_call_logout(
    mgmt_server: MgmtServer, in_threads: Callable[..., None]
) -> None:
    accounts = [mgmt_server.add_account() for _ in range(THREADS)]
    _, handler = barrier_handler(THREADS)
    mgmt_server.route("GET", re.compile(r"^/v1/items/\d+$")).respond_with_handler(handler)

    def worker(index: int, account: Account) -> None:
        with requests.Session() as session:
            session.trust_env = False
            login = session.post(
                f"{mgmt_server.url}/v1/login",
                data={"username": account.username, "password": account.password},
                timeout=15,
            )
            login.raise_for_status()
            cookie = {"Cookie": f"JSESSIONID={login.cookies['JSESSIONID']}"}
            call = session.get(
                f"{mgmt_server.url}/v1/items/{index}",
                params={"utk": login.json()["utk"]},
                headers=cookie,
                timeout=15,
            )
            call.raise_for_status()
            session.post(
                f"{mgmt_server.url}/v1/logout", headers=cookie, timeout=15
            ).raise_for_status()

    in_threads(worker, accounts, what=f"{THREADS} threads of v1 sessions")

    kinds = collections.Counter(type(e).__name__ for e in mgmt_server.events)
    assert kinds == {"LoggedIn": THREADS, "ApiCall": THREADS, "LoggedOut": THREADS}
    sessions = {e.session for e in mgmt_server.events if isinstance(e, LoggedIn)}
    assert sessions == {f"S{i + 1}" for i in range(THREADS)}
    assert {e.session for e in mgmt_server.events if isinstance(e, LoggedOut)} == sessions
    assert sorted(e.path for e in mgmt_server.events if isinstance(e, ApiCall)) == sorted(
        f"/v1/items/{i}" for i in range(THREADS)
    )


async def _httpx_task(client: httpx.AsyncClient, url: str, account: Account, index: int) -> str:
    auth = await client.post(
        f"{url}/v2/auth", data={"username": account.username, "key": account.api_key}
    )
    auth.raise_for_status()
    reply = await client.get(
        f"{url}/api/items/{index}", headers={"Authorization": f"Bearer {auth.json()['token']}"}
    )
    reply.raise_for_status()
    return reply.text


async def _aiohttp_task(
    session: aiohttp.ClientSession, url: str, account: Account, index: int
) -> str:
    form = {"username": account.username, "key": account.api_key}
    async with session.post(f"{url}/v2/auth", data=form) as auth:
        auth.raise_for_status()
        token = (await auth.json())["token"]
    headers = {"Authorization": f"Bearer {token}"}
    async with session.get(f"{url}/api/items/{index}", headers=headers) as reply:
        reply.raise_for_status()
        return await reply.text()


@pytest.mark.parametrize("library", ["httpx", "aiohttp"])
def test_fifty_async_tasks_each_event_recorded_exactly_once(
    mgmt_server: MgmtServer, within: Callable[..., Any], library: str
) -> None:
    accounts = [mgmt_server.add_account() for _ in range(TASKS)]
    _, handler = barrier_handler(TASKS)
    mgmt_server.route("GET", ITEM).respond_with_handler(handler)
    url = mgmt_server.url

    async def main() -> list[str]:
        if library == "httpx":
            limits = httpx.Limits(max_connections=TASKS)
            async with httpx.AsyncClient(timeout=15, limits=limits) as client:
                return await asyncio.gather(
                    *(_httpx_task(client, url, a, i) for i, a in enumerate(accounts))
                )
        connector = aiohttp.TCPConnector(limit=TASKS)
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=15)
        ) as session:
            return await asyncio.gather(
                *(_aiohttp_task(session, url, a, i) for i, a in enumerate(accounts))
            )

    answers = within(lambda: asyncio.run(main()), what=f"{TASKS} async {library} tasks")

    assert answers == [f"/api/items/{i}" for i in range(TASKS)]
    issued = {e.username: e.token for e in mgmt_server.events if isinstance(e, TokenIssued)}
    assert len(issued) == TASKS
    assert api_paths(mgmt_server) == collections.Counter(
        (f"/api/items/{i}", 200, issued[a.username]) for i, a in enumerate(accounts)
    )
