"""OAuth client credentials against the standalone server over real HTTP: a client from
--client, the control API's clients (created with the secret, listed masked), rotation
and revocation, a scoped route, the RFC errors, expiry on the frozen clock, and reset."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote_plus

import pytest
import requests
from standalone_support import ServerProcess

from pytest_mgmtauth._standalone.cli import build_parser, print_banner, server_from_args
from pytest_mgmtauth._standalone.server import UsageError

READ = "acme:main:tiq:2026-07:profiles:read"
CLIENT = json.dumps({"client_id": "portal-app", "client_secret": "s+e&c=%/1", "scopes": [READ]})


def _token(http: requests.Session, url: str, client_id: str, secret: str) -> requests.Response:
    return http.post(
        f"{url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=(quote_plus(client_id), quote_plus(secret)),
    )


def test_a_client_from_the_command_line_through_expiry_and_reset(
    key_file: Path, http: requests.Session
) -> None:
    args = ["--key-file", str(key_file), "--frozen-clock", "--client", CLIENT]
    with ServerProcess(args) as server:
        url, control = server.url, f"{server.url}/_mgmtauth"
        [startup] = server.info["clients"]
        assert startup == {
            "client_id": "portal-app",
            "client_secret": "s+e&c=%/1",
            "scopes": [READ],
        }
        created = http.post(
            f"{control}/routes", json={"method": "GET", "path": "/api/profiles", "scope": READ}
        )
        assert created.status_code == 201
        assert created.json()["auth"] == "oauth"
        answer = _token(http, url, "portal-app", "s+e&c=%/1")
        assert answer.status_code == 200, answer.text
        assert answer.headers["Cache-Control"] == "no-store"
        token = answer.json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        assert http.get(f"{url}/api/profiles", headers=headers).status_code == 200
        http.post(f"{control}/clock/advance", json={"seconds": 7200}).raise_for_status()
        expired = http.get(f"{url}/api/profiles", headers=headers)
        assert expired.status_code == 401
        assert expired.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
        check = http.get(f"{control}/check").json()
        assert not check["ok"]
        assert [f["kind"] for f in check["findings"]] == ["expired_use"]
        http.post(f"{control}/reset", json={}).raise_for_status()
        assert _token(http, url, "portal-app", "s+e&c=%/1").status_code == 200


def test_the_control_api_adds_lists_rotates_and_revokes_clients(
    key_file: Path, http: requests.Session
) -> None:
    with ServerProcess(["--key-file", str(key_file)]) as server:
        url, control = server.url, f"{server.url}/_mgmtauth"
        added = http.post(f"{control}/clients", json={"scopes": [READ]})
        assert added.status_code == 201
        client = added.json()
        assert set(client) == {"client_id", "client_secret", "scopes"}
        assert client["client_secret"].isalnum()  # the portal's alphabet
        listed = http.get(f"{control}/clients").json()["clients"]
        assert listed[0]["client_id"] == client["client_id"]
        assert listed[0]["client_secret"].startswith("#")
        assert client["client_secret"] not in http.get(f"{control}/clients").text
        assert _token(http, url, client["client_id"], client["client_secret"]).ok
        rotated = http.post(
            f"{control}/rotate-client-secret", json={"client_id": client["client_id"]}
        ).json()
        old = _token(http, url, client["client_id"], client["client_secret"])
        assert (old.status_code, old.json()["error"]) == (401, "invalid_client")
        assert client["client_secret"] not in old.text
        assert _token(http, url, client["client_id"], rotated["client_secret"]).ok
        http.post(
            f"{control}/revoke-client", json={"client_id": client["client_id"]}
        ).raise_for_status()
        gone = _token(http, url, client["client_id"], rotated["client_secret"])
        assert (gone.status_code, gone.json()["error"]) == (400, "invalid_grant")
        bad = http.post(f"{control}/clients", json={"scopes": ["acme:main"]})
        assert bad.status_code == 400
        assert "has 2 part" in bad.json()["message"]
        events = http.get(f"{control}/events").json()["events"]
        assert "TokenIssued" in [e["type"] for e in events]
        assert any(e.get("scopes") == [READ] for e in events)


@pytest.mark.parametrize(
    ("client", "message"),
    [
        ("{bad", "not valid JSON"),
        ('{"scopes": "acme"}', "'scopes' must be a list"),
        ('{"scopes": ["acme:main:tiq:2026-07:profiles:own"]}', "not read, write, delete or manage"),
        ('{"colour": "red"}', "unknown field 'colour'; known fields: scopes, client_id"),
        ("[1]", "an OAuth client is a JSON object with scopes"),
        ('{"client_id": 5}', "the field 'client_id' must be a string, got a JSON number"),
    ],
)
def test_bad_client_arguments_are_usage_errors(client: str, message: str) -> None:
    args = build_parser().parse_args(["--client", client])
    with pytest.raises(UsageError, match=message):
        server_from_args(args)


def test_the_banner_shows_each_startup_client_with_its_secret(key_file: Path) -> None:
    args = build_parser().parse_args(
        ["--port", "0", "--key-file", str(key_file), "--client", CLIENT]
    )
    server = server_from_args(args)
    server.start()
    try:
        out = io.StringIO()
        print_banner(server, out)
    finally:
        server.stop()
    lines = out.getvalue().splitlines()
    assert "  oauth client portal-app" in lines
    assert "    secret     s+e&c=%/1" in lines
    assert f"    scopes     {READ}" in lines


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_gets_a_token_with_form_fields_and_is_told_why_u_fails(
    key_file: Path, http: requests.Session
) -> None:
    def curl(*args: str) -> dict[str, str]:
        out = subprocess.run(
            ["curl", "-s", "--max-time", "10", *args], capture_output=True, text=True, check=True
        )
        answer: dict[str, str] = json.loads(out.stdout)
        return answer

    with ServerProcess(["--key-file", str(key_file), "--client", CLIENT]) as server:
        token_url = f"{server.url}/oauth/token"
        good = curl(
            token_url,
            "--data-urlencode",
            "grant_type=client_credentials",
            "--data-urlencode",
            "client_id=portal-app",
            "--data-urlencode",
            "client_secret=s+e&c=%/1",
        )
        assert good["token_type"] == "Bearer"
        raw = curl("-u", "portal-app:s+e&c=%/1", token_url, "-d", "grant_type=client_credentials")
        assert raw["error"] == "invalid_client"
        assert "--data-urlencode" in raw["error_description"]
