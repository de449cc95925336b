"""Hosts through the standalone server (real processes): a v3 client that ignores the
``host`` of the auth answer is caught by ``GET /_mgmtauth/check`` with the diagnosis,
and ``--intercept`` makes it a proxy whose variables the ``--json`` line carries as
``"env"``, which a subprocess client with hard-coded hosts uses unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import requests
from standalone_support import ServerProcess

ALICE = '{"username": "alice@example.com", "api_key": "k3y+&=%/"}'
SCOPED = "/v3/things/accounts/acme/profiles/main"


def _v3(url: str) -> dict[str, str]:
    answer = requests.post(
        f"{url}/v3/auth/accounts/acme/profiles/main",
        data={"username": "alice@example.com", "key": "k3y+&=%/"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, str] = answer.json()
    return body


def test_a_v3_client_that_ignores_host_is_caught_by_check(key_file: Path) -> None:
    args = ["--key-file", str(key_file), "--account", ALICE, "--route", f"GET {SCOPED}"]
    with ServerProcess(args) as server:
        assert server.info["region_url"] != server.url
        assert server.info["env"] == {}
        assert server.info["hosts"][-1] == "us-west-2-platform.tealiumapis.com"
        body = _v3(server.url)
        assert f"http://{body['host']}" == server.info["region_url"]
        bearer = {"Authorization": f"Bearer {body['token']}"}
        assert requests.get(f"{server.url}{SCOPED}", headers=bearer, timeout=10).status_code == 404
        verdict = requests.get(f"{server.url}/_mgmtauth/check", timeout=10).json()
        assert verdict["ok"] is False
        [finding] = verdict["findings"]
        assert (finding["kind"], finding["username"]) == ("wrong_host", "alice@example.com")
        assert (
            "this call went to the v3 auth host; send v3 API calls to the `host` of the auth "
            f"answer ({body['host']})" in finding["message"]
        )
        assert verdict["counts"]["wrong_host"] == 1
        # Following host passes; the switch leaves the kind out.
        assert requests.get(f"http://{body['host']}{SCOPED}", headers=bearer, timeout=10).ok
        relaxed = requests.get(
            f"{server.url}/_mgmtauth/check", params={"wrong_host": "false"}, timeout=10
        ).json()
        assert relaxed["ok"] is True


CLIENT = """
import os, requests
form = {"username": "alice@example.com", "key": "k3y+&=%/"}
body = requests.post(
    "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main", data=form, timeout=10
).json()
call = requests.get(
    "https://" + body["host"] + "/v3/things/accounts/acme/profiles/main",
    headers={"Authorization": "Bearer " + body["token"]},
    timeout=10,
)
print(body["host"], call.status_code)
"""


def test_intercept_serves_hard_coded_hosts_with_the_env_of_the_json_line(key_file: Path) -> None:
    args = ["--key-file", str(key_file), "--account", ALICE, "--route", f"GET {SCOPED}"]
    args += ["--intercept", "--v3-host", "eu-west-1-platform.tealiumapis.com"]
    with ServerProcess(args) as server:
        env = server.info["env"]
        assert env["HTTPS_PROXY"] == server.info["proxy"]
        assert env["NO_PROXY"].endswith("localhost,127.0.0.1,::1")  # after the user's own
        assert os.path.isfile(env["SSL_CERT_FILE"])
        result = subprocess.run(
            [sys.executable, "-c", CLIENT],
            env={**{k: v for k, v in os.environ.items() if k not in env}, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["eu-west-1-platform.tealiumapis.com", "200"]
        verdict = requests.get(f"{server.url}/_mgmtauth/check", timeout=10).json()
        assert verdict["ok"] is True
