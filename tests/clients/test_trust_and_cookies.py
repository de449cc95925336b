"""Trusting the test CA with each client, and the client quirks the docs warn about
(docs/clients.md): the environment's REQUESTS_CA_BUNDLE overriding Session.verify, and
aiohttp's default cookie jar ignoring IP hosts."""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from typing import TYPE_CHECKING

import aiohttp
import certifi
import httpx
import pytest
import requests
from clients_support import wait_for_transports_to_close

if TYPE_CHECKING:
    from pytest_mgmtauth import Account, MgmtServer

https = pytest.mark.mgmtauth(https=True)


def auth_form(account: Account) -> dict[str, str]:
    return {"username": account.username, "key": account.api_key}


@https
def test_https_exposes_a_ca_bundle_and_a_client_context_that_verify_the_server(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    assert mgmt_server.url.startswith("https://127.0.0.1:")
    assert mgmt_server.ca_bundle is not None
    with open(mgmt_server.ca_bundle, encoding="ascii") as pem:
        assert pem.read().startswith("-----BEGIN CERTIFICATE-----")
    context = mgmt_server.client_ssl_context()
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname

    # The certificate names localhost as well as 127.0.0.1.
    port = mgmt_server.url.rsplit(":", 1)[1]
    with httpx.Client(verify=context) as client:
        reply = client.post(f"https://localhost:{port}/v2/auth", data=auth_form(mgmt_account))
    assert reply.status_code == 200

    # ssl.create_default_context(cafile=...) works too (and also trusts the system store).
    default = ssl.create_default_context(cafile=mgmt_server.ca_bundle)
    request = urllib.request.Request(
        f"{mgmt_server.url}/v2/auth",
        data=f"username={mgmt_account.username}&key=x".encode(),
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, context=default, timeout=10)
    with refused.value:
        assert refused.value.code == 401


@https
def test_a_client_that_does_not_trust_the_test_ca_fails_verification(
    mgmt_server: MgmtServer,
) -> None:
    with (
        httpx.Client(verify=ssl.create_default_context(cafile=certifi.where())) as client,
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.post(f"{mgmt_server.url}/v2/auth", data={"username": "a@b.c", "key": "k"})
    assert mgmt_server.events == []  # the handshake failed: nothing reached the fake


@https
def test_requests_ca_bundle_in_the_environment_overrides_session_verify(
    mgmt_server: MgmtServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert mgmt_server.ca_bundle is not None
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certifi.where())
    url = f"{mgmt_server.url}/v2/auth"
    # A refused login is enough to prove the TLS connection worked: the fake answered.
    form = {"username": "nobody@example.com", "key": "k"}

    with requests.Session() as session:
        session.verify = mgmt_server.ca_bundle
        # trust_env (the default) lets REQUESTS_CA_BUNDLE win over session.verify.
        with pytest.raises(requests.exceptions.SSLError):
            session.post(url, data=form, timeout=10)
        # verify= per request wins over the environment.
        per_request = session.post(url, data=form, verify=mgmt_server.ca_bundle, timeout=10)
        assert per_request.status_code == 401
        # So does switching the environment off for the session.
        session.trust_env = False
        assert session.post(url, data=form, timeout=10).status_code == 401

    # Or point the variable at the test CA.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", mgmt_server.ca_bundle)
    with requests.Session() as session:
        assert session.post(url, data=form, timeout=10).json()["returnCode"] == 1401
    assert len(mgmt_server.events) == 3  # the refused handshake never reached the fake


def test_plain_http_has_no_ca(mgmt_server: MgmtServer) -> None:
    assert mgmt_server.url.startswith("http://127.0.0.1:")
    assert mgmt_server.ca_bundle is None
    assert mgmt_server.client_ssl_context() is None


@pytest.mark.parametrize("unsafe", [False, True], ids=["default-jar", "unsafe-jar"])
def test_aiohttp_default_cookie_jar_stores_nothing_from_an_ip_host(
    mgmt_server: MgmtServer, mgmt_account: Account, unsafe: bool
) -> None:
    async def login_and_list_cookies() -> set[str]:
        jar = aiohttp.CookieJar(unsafe=unsafe)
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            form = {"username": mgmt_account.username, "password": mgmt_account.password}
            async with session.post(f"{mgmt_server.url}/v1/login", data=form) as reply:
                assert reply.status == 200
                assert "JSESSIONID" in reply.cookies  # the answer carried it either way
            names = {morsel.key for morsel in jar}
        await wait_for_transports_to_close(asyncio.get_running_loop())
        return names

    names = asyncio.run(login_and_list_cookies())
    # rememberMe=deleteMe with Max-Age=0 deletes, so only JSESSIONID is kept.
    assert names == ({"JSESSIONID"} if unsafe else set())
