"""``async def`` tests with the plugin's fixtures (docs/clients.md, "Async tests").

The fixtures are plain (sync) fixtures and the fake serves from its own threads, so an
async test under pytest-asyncio or anyio asks for them as any test does and awaits its
client in between. Run them with `pytest docs/examples` (the test extra brings
pytest-asyncio and anyio).
"""

from __future__ import annotations

import httpx
import pytest

from pytest_mgmtauth import TokenIssued


# --8<-- [start:pytest-asyncio]
@pytest.mark.asyncio  # pytest-asyncio; not needed with asyncio_mode = "auto"
async def test_an_async_client_reuses_its_token(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([{"id": 7}])
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}

    async with httpx.AsyncClient(base_url=mgmt_server.url) as client:
        token = (await client.post("/v2/auth", data=form)).json()["token"]
        for _ in range(3):
            reply = await client.get("/v2/devices", headers={"Authorization": f"Bearer {token}"})
            assert reply.json() == [{"id": 7}]

    assert mgmt_server.auth_count(version="v2") == 1


# --8<-- [end:pytest-asyncio]


# --8<-- [start:anyio]
@pytest.mark.anyio  # anyio's plugin, on the asyncio backend unless anyio_backend says
@pytest.mark.mgmtauth(token_ttl=300)
async def test_an_async_client_renews_on_the_simulated_clock(mgmt_clock, mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([])
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}

    async with httpx.AsyncClient(base_url=mgmt_server.url) as client:
        first = (await client.post("/v2/auth", data=form)).json()["token"]
        mgmt_clock.advance(minutes=6)  # from inside the coroutine: the token has expired
        second = (await client.post("/v2/auth", data=form)).json()["token"]
        reply = await client.get("/v2/devices", headers={"Authorization": f"Bearer {second}"})
        assert reply.status_code == 200

    assert first != second
    grants = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert (grants[1].at - grants[0].at).total_seconds() == 360
    assert not grants[1].premature  # the first had expired: a renewal, not churn


# --8<-- [end:anyio]
