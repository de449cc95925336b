"""Unchanged clients with the service's hard-coded hosts, reaching the fake through
interception (docs/hosts.md). Run them with `pytest docs/examples`.

In this process the plugin sets the proxy and CA variables for the test; a subprocess
gets them from `mgmt_server.env`. The curl, Node (axios) and Java recipes need those
tools; each is skipped where its tool is missing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import aiohttp
import httpx
import pytest
import requests

HERE = Path(__file__).parent
#: Real seconds a subprocess may take (java compiles first): a guard against a hang.
GUARD = 180


@pytest.fixture
def things(mgmt_server):
    mgmt_server.route("GET", "/v2/things").respond_with_json({"things": []})
    mgmt_server.route("GET", "/v3/things/accounts/acme/profiles/main").respond_with_json(
        {"visitors": []}
    )


# --8<-- [start:requests]
@pytest.mark.mgmtauth(intercept=True)
def test_requests_with_the_real_url(mgmt_server, mgmt_account, things):
    reply = requests.post(
        "https://api.tealiumiq.com/v2/auth",  # hard-coded, as in production
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    token = reply.json()["token"]
    things = requests.get(
        "https://api.tealiumiq.com/v2/things", headers={"Authorization": f"Bearer {token}"}
    )
    assert things.json() == {"things": []}


# --8<-- [end:requests]


# --8<-- [start:httpx]
@pytest.mark.mgmtauth(intercept=True)
def test_httpx_follows_the_v3_host(mgmt_server, mgmt_account, things):
    with httpx.Client() as http:  # trust_env=True, the default
        body = http.post(
            "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        ).json()
        assert body["host"] == "us-west-2-platform.tealiumapis.com"  # the option v3_host
        visitors = http.get(
            f"https://{body['host']}/v3/things/accounts/acme/profiles/main",
            headers={"Authorization": f"Bearer {body['token']}"},
        )
    assert visitors.json() == {"visitors": []}


# --8<-- [end:httpx]


# --8<-- [start:aiohttp]
@pytest.mark.mgmtauth(intercept=True)
def test_aiohttp_with_trust_env(mgmt_server, mgmt_account, things):
    async def client():
        # trust_env=True: aiohttp reads the proxy variables only then. Its default SSL
        # context was made at import; the plugin adds the test CA to it.
        async with (
            aiohttp.ClientSession(trust_env=True) as http,
            http.post(
                "https://api.tealiumiq.com/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            ) as reply,
        ):
            return (await reply.json())["token"]

    assert asyncio.run(client())


# --8<-- [end:aiohttp]


def _run(command, mgmt_server, mgmt_account, **env):
    # --8<-- [start:subprocess]
    env = {
        **os.environ,
        **mgmt_server.env,  # HTTPS_PROXY, NO_PROXY, the CA variables...
        "MGMT_USERNAME": mgmt_account.username,
        "MGMT_API_KEY": mgmt_account.api_key,
        **env,
    }
    result = subprocess.run(
        command, cwd=HERE, env=env, capture_output=True, text=True, timeout=GUARD
    )
    # --8<-- [end:subprocess]
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
@pytest.mark.mgmtauth(intercept=True)
def test_curl(mgmt_server, mgmt_account, things):
    out = _run(["bash", "intercept_curl.sh"], mgmt_server, mgmt_account)
    assert '"things": []' in out
    assert '"visitors": []' in out


def _axios():
    """Where Node finds axios (NODE_PATH, or a node_modules above this folder)."""
    if shutil.which("node") is None:
        return False
    probe = subprocess.run(
        ["node", "-e", "require.resolve('axios')"], cwd=HERE, capture_output=True, timeout=GUARD
    )
    return probe.returncode == 0


#: CI installs axios and sets this: there the recipe must run, not skip.
_NODE_REQUIRED = os.environ.get("MGMTAUTH_REQUIRE_LANGUAGES") == "1"


@pytest.mark.skipif(
    not _NODE_REQUIRED and not _axios(),
    reason="needs node and the axios package (npm install axios)",
)
@pytest.mark.mgmtauth(intercept=True)
def test_node_axios(mgmt_server, mgmt_account, things):
    out = _run(["node", "intercept_axios.cjs"], mgmt_server, mgmt_account)
    assert '"v3":{"visitors":[]}' in out


@pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("keytool") is None,
    reason="needs a JDK 11+ (java, keytool)",
)
@pytest.mark.mgmtauth(intercept=True)
def test_java(mgmt_server, mgmt_account, things, tmp_path):
    # --8<-- [start:java]
    # Java reads no proxy or CA variables: system properties, and a trust store made
    # from the test CA with keytool.
    store = tmp_path / "mgmtauth-truststore.p12"
    subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "mgmtauth", "-file",
         mgmt_server.ca_bundle, "-keystore", str(store), "-storetype", "PKCS12",
         "-storepass", "changeit"],
        check=True, capture_output=True, timeout=GUARD,
    )  # fmt: skip
    proxy = mgmt_server.proxy_url.rsplit(":", 1)
    java = [
        "java",
        f"-Dhttps.proxyHost={proxy[0].removeprefix('http://')}",
        f"-Dhttps.proxyPort={proxy[1]}",
        f"-Djavax.net.ssl.trustStore={store}",
        "-Djavax.net.ssl.trustStorePassword=changeit",
        "-Djavax.net.ssl.trustStoreType=PKCS12",
        "Intercept.java",
    ]
    # --8<-- [end:java]
    out = _run(java, mgmt_server, mgmt_account)
    assert '"visitors": []' in out
    assert out.rstrip().endswith("us-west-2-platform.tealiumapis.com")
