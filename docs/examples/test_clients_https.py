"""Each common HTTP client against the fake over HTTPS (docs/clients.md).

Run them with `pytest docs/examples`. Every test trusts the session's test CA the way
its client wants it, authenticates with /v2/auth, and (v1) logs in, calls, logs out.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from urllib.parse import urlencode

import aiohttp
import httpx
import pytest
import requests

pytestmark = pytest.mark.mgmtauth(https=True)


# --8<-- [start:requests]
def test_requests(mgmt_server, mgmt_account):
    with requests.Session() as session:
        session.verify = mgmt_server.ca_bundle  # path of the test CA's PEM
        session.trust_env = False  # else REQUESTS_CA_BUNDLE, if set, wins over .verify
        reply = session.post(
            f"{mgmt_server.url}/v2/auth",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        )
    assert reply.status_code == 200


# --8<-- [end:requests]


# --8<-- [start:requests-env]
def test_requests_pointed_at_the_ca_by_the_environment(mgmt_server, mgmt_account, monkeypatch):
    # For a client you cannot change: requests reads the variable on every request.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", mgmt_server.ca_bundle)
    reply = requests.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert reply.status_code == 200


# --8<-- [end:requests-env]


# --8<-- [start:httpx]
def test_httpx(mgmt_server, mgmt_account):
    with httpx.Client(verify=mgmt_server.client_ssl_context()) as client:
        reply = client.post(
            f"{mgmt_server.url}/v2/auth",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        )
    assert reply.status_code == 200


# --8<-- [end:httpx]


# --8<-- [start:httpx-async]
def test_httpx_async(mgmt_server, mgmt_account):
    async def authenticate():
        async with httpx.AsyncClient(verify=mgmt_server.client_ssl_context()) as client:
            return await client.post(
                f"{mgmt_server.url}/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            )

    assert asyncio.run(authenticate()).status_code == 200


# --8<-- [end:httpx-async]


# --8<-- [start:aiohttp]
def test_aiohttp(mgmt_server, mgmt_account):
    async def authenticate():
        connector = aiohttp.TCPConnector(ssl=mgmt_server.client_ssl_context())
        async with aiohttp.ClientSession(connector=connector) as session:
            form = {"username": mgmt_account.username, "key": mgmt_account.api_key}
            async with session.post(f"{mgmt_server.url}/v2/auth", data=form) as reply:
                status = reply.status
        # aiohttp does not wait for TLS connections to finish closing (aiohttp#1925):
        # give the loop a moment before asyncio.run closes it, or a ResourceWarning
        # may surface later (an error under -W error).
        await asyncio.sleep(0.1)
        return status

    assert asyncio.run(authenticate()) == 200


# --8<-- [end:aiohttp]


# --8<-- [start:urllib]
def test_urllib(mgmt_server, mgmt_account):
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=mgmt_server.client_ssl_context())
    )
    form = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key})
    with opener.open(f"{mgmt_server.url}/v2/auth", data=form.encode()) as reply:
        assert reply.status == 200


# --8<-- [end:urllib]


# --8<-- [start:v1-session]
JSESSIONID = re.compile(r"^JSESSIONID=([^;]*);")


def test_v1_session_with_the_cookie_sent_by_hand(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v1/devices").respond_with_json([{"id": 7}])
    with httpx.Client(verify=mgmt_server.client_ssl_context()) as client:
        login = client.post(
            f"{mgmt_server.url}/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
        )
        # Set-Cookie: JSESSIONID=...; Path=/urest_service; Secure; HttpOnly
        # The path keeps the cookie jar from ever sending it to /v1/...: take it yourself.
        session_id = next(
            m.group(1)
            for line in login.headers.get_list("Set-Cookie")
            if (m := JSESSIONID.match(line))
        )
        cookie = {"Cookie": f"JSESSIONID={session_id}"}
        devices = client.get(
            f"{mgmt_server.url}/v1/devices", params={"utk": login.json()["utk"]}, headers=cookie
        )
        assert devices.json() == [{"id": 7}]
        assert client.post(f"{mgmt_server.url}/v1/logout", headers=cookie).status_code == 200

    mgmt_server.assert_logged_out()


# --8<-- [end:v1-session]


# --8<-- [start:aiohttp-jar]
def test_aiohttp_keeps_cookies_from_an_ip_host_only_with_an_unsafe_jar(mgmt_server, mgmt_account):
    async def login_with(*, unsafe):
        jar = aiohttp.CookieJar(unsafe=unsafe)
        connector = aiohttp.TCPConnector(ssl=mgmt_server.client_ssl_context())
        async with aiohttp.ClientSession(connector=connector, cookie_jar=jar) as session:
            form = {"username": mgmt_account.username, "password": mgmt_account.password}
            async with session.post(f"{mgmt_server.url}/v1/login", data=form) as reply:
                assert reply.status == 200
        await asyncio.sleep(0.1)  # see test_aiohttp
        return {cookie.key for cookie in jar}

    assert asyncio.run(login_with(unsafe=False)) == set()  # 127.0.0.1 is an IP host
    assert asyncio.run(login_with(unsafe=True)) == {"JSESSIONID"}


# --8<-- [end:aiohttp-jar]
