"""Unchanged clients with hard-coded hosts reach the fake through interception: in this
process (requests, httpx, aiohttp with trust_env, urllib), with only the variables the
plugin sets for the test."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

import aiohttp
import httpx
import pytest
import requests
from hosts_support import Reply, check_timeline, declare_routes, scenario

from pytest_mgmtauth import Account, MgmtServer

pytestmark = pytest.mark.mgmtauth(intercept=True)


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def test_requests(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)
    with requests.Session() as http:

        def send(
            method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
        ) -> Reply:
            r = http.request(method, url, data=form, headers=dict(headers), timeout=10)
            return Reply(r.status_code, r.text, _json(r.text), r.headers)

        scenario(mgmt_server, mgmt_account, send)
    check_timeline(mgmt_server)


def test_httpx(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)
    with httpx.Client(timeout=10) as http:

        def send(
            method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
        ) -> Reply:
            r = http.request(method, url, data=form, headers=dict(headers))
            return Reply(r.status_code, r.text, _json(r.text), r.headers)

        scenario(mgmt_server, mgmt_account, send)
    check_timeline(mgmt_server)


def test_urllib(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)

    def send(
        method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
    ) -> Reply:
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read().decode()
                return Reply(answer.status, text, _json(text), dict(answer.headers))
        except urllib.error.HTTPError as error:
            text = error.read().decode()
            return Reply(error.code, text, _json(text), dict(error.headers))

    scenario(mgmt_server, mgmt_account, send)
    check_timeline(mgmt_server)


def test_aiohttp_with_trust_env_and_default_ssl(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # aiohttp (imported at this module's top, before the test) made its default SSL
    # context at import: the plugin has it trust the test CA for interception.
    declare_routes(mgmt_server)
    replies: list[Reply] = []

    async def main() -> None:
        async with aiohttp.ClientSession(trust_env=True) as http:
            loop = asyncio.get_running_loop()

            async def fetch(
                method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
            ) -> Reply:
                async with http.request(method, url, data=form, headers=dict(headers)) as r:
                    text = await r.text()
                    return Reply(r.status, text, _json(text), r.headers)

            # The scenario is synchronous: run each request on the loop from a thread.
            def blocking(
                method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
            ) -> Reply:
                future = asyncio.run_coroutine_threadsafe(fetch(method, url, form, headers), loop)
                reply = future.result(timeout=10)
                replies.append(reply)
                return reply

            await loop.run_in_executor(None, scenario, mgmt_server, mgmt_account, blocking)

    asyncio.run(main())
    assert len(replies) == 6
    check_timeline(mgmt_server)


def test_the_environment_is_set_for_the_test_and_names_the_proxy_and_ca(
    mgmt_server: MgmtServer,
) -> None:
    env = mgmt_server.env
    assert mgmt_server.proxy_url is not None
    assert mgmt_server.proxy_url.startswith("http://127.0.0.1:")
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        assert env[name] == os.environ[name] == mgmt_server.proxy_url
    for name in ("NO_PROXY", "no_proxy"):
        # After the process's own entries, if it had any (see test_environment_extension).
        assert env[name] == os.environ[name]
        assert env[name].endswith("localhost,127.0.0.1,::1")
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert env[name] == os.environ[name]
        with open(env[name], "rb") as bundle:
            assert b"BEGIN CERTIFICATE" in bundle.read()
    # mgmt_server.url is loopback: reached directly, not through the proxy.
    assert requests.get(mgmt_server.url + "/nowhere", timeout=10).status_code == 404
    assert {"api.tealiumiq.com", "platform.tealiumapis.com", "my.tealiumiq.com"} <= set(
        mgmt_server.hosts
    )
    assert mgmt_server.hosts[-1] == "us-west-2-platform.tealiumapis.com"


SUBPROCESS_CLIENT = """
import os, requests, httpx
form = {"username": os.environ["MGMT_USERNAME"], "key": os.environ["MGMT_API_KEY"]}
token = requests.post("https://api.tealiumiq.com/v2/auth", data=form, timeout=10).json()["token"]
body = httpx.post(
    "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main", data=form, timeout=10
).json()
call = httpx.get(
    "https://" + body["host"] + "/v3/things/accounts/acme/profiles/main",
    headers={"Authorization": "Bearer " + body["token"]},
    timeout=10,
)
print(len(token) > 100, body["host"], call.status_code)
"""


def test_a_python_subprocess_with_the_env(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)
    env = {
        **{k: v for k, v in os.environ.items() if k not in mgmt_server.env},
        **mgmt_server.env,
        "MGMT_USERNAME": mgmt_account.username,
        "MGMT_API_KEY": mgmt_account.api_key,
    }
    result = subprocess.run(
        [sys.executable, "-c", SUBPROCESS_CLIENT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "us-west-2-platform.tealiumapis.com", "200"]


@pytest.mark.mgmtauth(intercept=True, https=True)
def test_interception_beside_the_https_fake(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    # The proxy is plain HTTP whatever the fake's own scheme; its tunnels are TLS.
    declare_routes(mgmt_server)
    with requests.Session() as http:

        def send(
            method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
        ) -> Reply:
            r = http.request(method, url, data=form, headers=dict(headers), timeout=10)
            return Reply(r.status_code, r.text, _json(r.text), r.headers)

        scenario(mgmt_server, mgmt_account, send)
    check_timeline(mgmt_server)
    assert mgmt_server.url.startswith("https://")
    assert mgmt_server.proxy_url is not None
    assert mgmt_server.proxy_url.startswith("http://")


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


def test_urllib_with_an_opener_built_before_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner="""
        import urllib.request

        import pytest


        def test_builds_the_opener():
            opener = urllib.request.build_opener()
            urllib.request.install_opener(opener)  # what a first urlopen() does


        @pytest.mark.mgmtauth(intercept=True)
        def test_goes_through_the_proxy(mgmt_server):
            # The opener of the last test had no proxy: a request for the real host would
            # have left the machine. Set aside, a new one goes through the proxy.
            try:
                urllib.request.urlopen("http://api.tealiumiq.com/nowhere", timeout=10)
            except urllib.error.HTTPError as error:
                assert error.code == 404
            assert mgmt_server.requests


        def test_the_opener_is_back():
            assert urllib.request._opener is not None
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_interception_set_up_under_a_frozen_clock(pytester: pytest.Pytester) -> None:
    # The test CA and a tunnel's certificate made while mgmt_clock is frozen: a fresh
    # session whose first test asks for the clock before the server (cryptography signs
    # only datetimes of the class freezegun has put in place).
    pytester.makepyfile(
        """
        import pytest
        import requests


        @pytest.mark.mgmtauth(intercept=True)
        def test_frozen_first(mgmt_clock, mgmt_server, mgmt_account):
            answer = requests.post(
                "https://api.tealiumiq.com/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
                timeout=10,
            )
            assert answer.status_code == 200
        """
    )
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)


FROZEN_FIRST = """
from pytest_mgmtauth._fake.key_cache import import_cryptography

import_cryptography()  # what the plugin does at the end of collection
import freezegun
from pytest_mgmtauth._http.server import TestCA

with freezegun.freeze_time("2026-11-27"):  # the first test CA, made on mgmt_clock
    TestCA()
TestCA()  # a later session's (pytester's), made with the clock running
print("both made")
"""


def test_a_test_ca_made_on_a_frozen_clock_does_not_break_later_ones() -> None:
    # cryptography keeps the datetime class of the first certificate it signs: were it
    # freezegun's, every certificate made later with the clock running failed ("'datetime'
    # object is not an instance of 'FakeDatetime'"; seen under pytest-randomly's order).
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", FROZEN_FIRST], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "both made"
