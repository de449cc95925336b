"""The SCIM flow in mgmtauth-server, as a client in another language sees it: a long-lived
token from the flow's endpoint, a SCIM route declared with --route, revoke, 90 days on
the control API's clock, and the v1 answer through --scim-token-version."""

from __future__ import annotations

import json
from pathlib import Path

import requests
from standalone_support import ServerProcess

ACCOUNT = json.dumps(
    {"username": "scim@example.com", "api_key": "k+e&y=%/1", "profiles": ["acme/main"]}
)
FORM = {"account": "acme", "profile": "main", "username": "scim@example.com", "key": "k+e&y=%/1"}


def test_token_scim_call_revoke_and_expiry(key_file: Path, http: requests.Session) -> None:
    args = ["--key-file", str(key_file), "--frozen-clock", "--account", ACCOUNT]
    args += ["--route", "GET /scim/v2/Users"]
    with ServerProcess(args) as server:
        url = server.url
        answer = http.post(f"{url}/v2/auth-long-lived/token", data=FORM)
        assert answer.status_code == 200, answer.text
        assert answer.json()["expires_in"] == 7_776_000
        headers = {
            "Authorization": f"Bearer {answer.json()['access_token']}",
            "X-Tealium-Account": "acme",
        }
        assert http.get(f"{url}/scim/v2/Users", headers=headers).status_code == 200
        missing = http.get(
            f"{url}/scim/v2/Users", headers={"Authorization": headers["Authorization"]}
        )
        assert missing.status_code == 403
        assert missing.json()["detail"] == "Missing X-Tealium-Account header."
        http.post(f"{url}/_mgmtauth/clock/advance", json={"seconds": 7_776_000}).raise_for_status()
        expired = http.get(f"{url}/scim/v2/Users", headers=headers)
        assert expired.json() == {"returnCode": 1401, "message": "Authentication failed."}
        fresh = http.post(f"{url}/v2/auth-long-lived/token", data=FORM).json()["access_token"]
        revoked = http.post(f"{url}/v2/auth-long-lived/revoke", data={"token": fresh, **FORM})
        assert (revoked.status_code, revoked.content) == (200, b"")
        headers["Authorization"] = f"Bearer {fresh}"
        assert http.get(f"{url}/scim/v2/Users", headers=headers).status_code == 401
        timeline = http.get(f"{url}/_mgmtauth/timeline").text
        assert "revoked by POST /v2/auth-long-lived/revoke" in timeline
        assert "k+e&y=%/1" not in timeline


def test_the_v1_answer_by_flag(key_file: Path, http: requests.Session) -> None:
    args = ["--key-file", str(key_file), "--account", ACCOUNT, "--scim-token-version", "v1"]
    with ServerProcess(args) as server:
        answer = http.post(f"{server.url}/v1/auth-long-lived/token", data=FORM)
        assert answer.status_code == 200, answer.text
        assert answer.json()["expires_in"] == 35999
