"""v3 auth against the standalone server over real HTTP: an account with profiles from
--account, the control API's accounts and faults, the whole-second frozen clock, and a
Date header that follows the control API's clock."""

from __future__ import annotations

import base64
import io
import json
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
import requests
from standalone_support import ServerProcess

from pytest_mgmtauth import Options
from pytest_mgmtauth._standalone.cli import build_parser, print_banner, server_from_args
from pytest_mgmtauth._standalone.server import AccountSpec, StandaloneServer, UsageError

ACCOUNT = json.dumps(
    {
        "username": "alice@example.com",
        "api_key": "k+e&y=%/1",
        "password": "pa+ss&1",
        "profiles": ["acme/main", "acme/dev"],
    }
)


def _iat(token: str) -> int:
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==="))
    value: int = claims["iat"]
    return value


def _auth(http: requests.Session, url: str, profile: str, user: str = "alice") -> requests.Response:
    return http.post(
        f"{url}/v3/auth/accounts/acme/profiles/{profile}",
        data={"username": f"{user}@example.com", "key": "k+e&y=%/1"},
    )


def test_v3_auth_with_profiles_on_a_frozen_clock(key_file: Path, http: requests.Session) -> None:
    args = [
        "--key-file",
        str(key_file),
        "--frozen-clock",
        "--account",
        ACCOUNT,
        "--route",
        "GET /v3/customers/accounts/acme/profiles/main",
    ]
    with ServerProcess(args) as server:
        assert server.account["profiles"] == ["acme/dev", "acme/main"]
        url = server.url
        answer = _auth(http, url, "main")
        assert answer.status_code == 200
        body = answer.json()
        # The region address: a second port of the server, never the auth address.
        assert f"http://{body['host']}" != url
        assert body["host"].startswith("127.0.0.1:")
        # The frozen clock starts on a whole second: the token lives exactly token_ttl.
        clock = http.get(f"{url}/_mgmtauth/clock").json()["now"]
        assert _iat(body["token"]) == parsedate_to_datetime(answer.headers["Date"]).timestamp()
        assert datetime.fromisoformat(clock.replace("Z", "+00:00")).timestamp().is_integer()
        call = http.get(
            f"http://{body['host']}/v3/customers/accounts/acme/profiles/main",
            headers={"Authorization": f"Bearer {body['token']}"},
        )
        assert call.status_code == 200
        assert _auth(http, url, "qa").status_code == 401
        # Date follows the control API's clock.
        http.post(f"{url}/_mgmtauth/clock/advance", json={"hours": 1}).raise_for_status()
        later = _auth(http, url, "dev")
        date = parsedate_to_datetime(later.headers["Date"]).timestamp()
        assert date == _iat(later.json()["token"]) == _iat(body["token"]) + 3600
        # An expired v3 token's message states token_ttl exactly (issued on a whole second).
        http.post(f"{url}/_mgmtauth/clock/advance", json={"minutes": 1}).raise_for_status()
        expired = http.get(
            f"http://{body['host']}/v3/customers/accounts/acme/profiles/main",
            headers={"Authorization": f"Bearer {body['token']}"},
        )
        assert expired.status_code == 401
        assert "(valid 1800 s from issue)" in expired.headers["X-Mgmtauth-Diagnosis"]


def test_control_api_adds_accounts_with_profiles_and_scripts_v3_faults(
    key_file: Path, http: requests.Session
) -> None:
    with ServerProcess(["--key-file", str(key_file)]) as server:
        control = f"{server.url}/_mgmtauth"
        added = http.post(
            f"{control}/accounts",
            json={"username": "bob@example.com", "api_key": "k+e&y=%/1", "profiles": ["acme/*"]},
        )
        assert added.status_code == 201
        assert added.json()["profiles"] == ["acme/*"]
        http.post(
            f"{control}/faults", json={"kind": "fail", "error": 503, "version": "v3"}
        ).raise_for_status()
        assert _auth(http, server.url, "main", user="bob").status_code == 503
        assert _auth(http, server.url, "main", user="bob").status_code == 200
        events = http.get(f"{control}/events").json()["events"]
        kinds = [e["type"] for e in events]
        assert kinds[-2:] == ["FaultInjected", "TokenIssued"]
        assert events[-1]["version"] == "v3"
        assert events[-1]["profile"] == "main"


@pytest.mark.parametrize(
    ("account", "message"),
    [
        ('{"username": "a@example.com", "profiles": "acme/main"}', "'profiles' must be a list"),
        ('{"username": "a@example.com", "profiles": ["acme"]}', "'acme' is not 'account/profile'"),
    ],
)
def test_bad_profiles_on_the_command_line_are_usage_errors(account: str, message: str) -> None:
    args = build_parser().parse_args(["--account", account])
    with pytest.raises(UsageError, match=message):
        server_from_args(args)


def test_the_banner_lists_an_accounts_v3_pairs(key_file: Path) -> None:
    server = StandaloneServer(
        Options(),
        port=0,
        accounts=[AccountSpec(username="a@example.com", profiles=("acme/main", "acme/*"))],
        key_file=str(key_file),
    )
    server.start()
    try:
        out = io.StringIO()
        print_banner(server, out)
    finally:
        server.stop()
    assert "    v3 pairs   acme/*, acme/main" in out.getvalue().splitlines()
