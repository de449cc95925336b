"""A stand-in for the service (``stand_in.py``: ``mgmtauth-server --https`` in a
subprocess) and the variables that point a live run at it. No live test reaches the
real service: ``MGMTAUTH_LIVE_UPSTREAM`` sends every forwarded request to the stand-in."""

from __future__ import annotations

import base64
import html
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
import requests
from wire_support import first_line

#: Real seconds the stand-in may take to start (a hang guard, not a timing check).
GUARD = 30.0
LAUNCHER = Path(__file__).with_name("stand_in.py")
SCENARIOS = Path(__file__).with_name("scenarios")

#: The live credentials: every character a client must encode, in each secret.
USERNAME = "live.user@example.com"
API_KEY = "Lk+8&q=Z%2Fr/4!x*Y-_.~mN0+pQ&w=e%41tT9uV"
PASSWORD = "Pw+&=%21live#Secret9"
CLIENT_ID = "live-client-7f3a"
CLIENT_SECRET = "Cs+&=%2Fsecret/Live0123456789abcdefXYZ"
ACCOUNT, PROFILE = "acme", "main"
SECRETS = (API_KEY, PASSWORD, CLIENT_SECRET)

#: What the stand-in's routes answer (the scenarios' routes answer the same on the fake).
ANSWER = {"ok": True}
#: The routes the scenarios declare on the fake, declared on the stand-in too:
#: (method, path, auth, permission).
ROUTES = (
    ("GET", "/v2/things", "v2", None),
    ("POST", "/v2/publish", "v2", "publish"),
    ("GET", "/urest/things", "v1", None),
    ("POST", "/urest/publish", "v1", "publish"),
    ("GET", f"/v3/things/accounts/{ACCOUNT}/profiles/{PROFILE}", "v3", None),
    ("GET", f"/v3/things/accounts/{ACCOUNT}/profiles/other-profile", "v3", None),
    ("GET", f"/v2026-07/tiq/accounts/{ACCOUNT}/profiles/{PROFILE}/profiles", "oauth", None),
    ("GET", f"/v2026-07/tiq/accounts/{ACCOUNT}/profiles/other-profile/profiles", "oauth", None),
    ("GET", f"/v2024-06/tiq/accounts/{ACCOUNT}/profiles/{PROFILE}/profiles", "oauth", None),
    ("GET", "/scim/v2/Users", "scim", None),
)


class StandIn:
    """``mgmtauth-server --https --intercept`` with the live account (no permission) and
    client, the scenarios' routes, and ``difference`` injected (``stand_in.py``)."""

    def __init__(self, key_file: Path, difference: str = "none", *options: str) -> None:
        account = {
            "username": USERNAME,
            "api_key": API_KEY,
            "password": PASSWORD,
            "permissions": [],
        }
        client = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
        command = [
            *(sys.executable, str(LAUNCHER), difference, "--json", "--port", "0", "--https"),
            *("--intercept", "--key-file", str(key_file)),
            *("--account", json.dumps(account), "--client", json.dumps(client), *options),
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.info: dict[str, Any] = json.loads(self._first_line())
        self.url: str = self.info["url"]
        self.ca_bundle: str = self.info["ca_bundle"]
        for method, path, auth, permission in ROUTES:
            self.control(
                "routes", method=method, path=path, auth=auth, permission=permission, json=ANSWER
            )

    def _first_line(self) -> str:
        return first_line(self.process, guard=GUARD, what="the stand-in")

    def control(self, endpoint: str, **body: object) -> Any:
        """A call of the stand-in's control API (not forwarded: straight to it)."""
        answer = requests.post(
            f"{self.url}/_mgmtauth/{endpoint}",
            json={k: v for k, v in body.items() if v is not None},
            verify=self.ca_bundle,
            timeout=GUARD,
        )
        assert answer.status_code < 300, answer.text
        return answer.json()

    def requests_seen(self) -> list[dict[str, Any]]:
        """The stand-in's request log (what the live run forwarded)."""
        answer = requests.get(
            f"{self.url}/_mgmtauth/requests", verify=self.ca_bundle, timeout=GUARD
        )
        seen: list[dict[str, Any]] = answer.json()["requests"]
        return seen

    @staticmethod
    def variables() -> tuple[str, ...]:
        return (
            "MGMTAUTH_LIVE_UPSTREAM",
            "MGMTAUTH_LIVE_CAFILE",
            "MGMTAUTH_LIVE_USERNAME",
            "MGMTAUTH_LIVE_API_KEY",
            "MGMTAUTH_LIVE_PASSWORD",
            "MGMTAUTH_LIVE_ACCOUNT",
            "MGMTAUTH_LIVE_PROFILE",
            "MGMTAUTH_LIVE_CLIENT_ID",
            "MGMTAUTH_LIVE_CLIENT_SECRET",
        )

    def env(self) -> dict[str, str]:
        """The variables of a live run against this stand-in."""
        return {
            "MGMTAUTH_LIVE_UPSTREAM": self.url,
            "MGMTAUTH_LIVE_CAFILE": self.ca_bundle,
            "MGMTAUTH_LIVE_USERNAME": USERNAME,
            "MGMTAUTH_LIVE_API_KEY": API_KEY,
            "MGMTAUTH_LIVE_PASSWORD": PASSWORD,
            "MGMTAUTH_LIVE_ACCOUNT": ACCOUNT,
            "MGMTAUTH_LIVE_PROFILE": PROFILE,
            "MGMTAUTH_LIVE_CLIENT_ID": CLIENT_ID,
            "MGMTAUTH_LIVE_CLIENT_SECRET": CLIENT_SECRET,
        }

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.communicate(timeout=GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def point_at(monkeypatch: pytest.MonkeyPatch, server: StandIn | None) -> None:
    """Set the live variables for ``server`` (None: unset them all)."""
    for name in StandIn.variables():
        monkeypatch.delenv(name, raising=False)
    if server is not None:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)


def snapshot_of(folder: Path, module: str = "test_scenarios") -> dict[str, Any]:
    """The snapshot a live run wrote for ``module`` in ``folder``."""
    data: dict[str, Any] = json.loads(
        (folder / "mgmtauth_snapshots" / f"{module}.json").read_text("utf-8")
    )
    return data


def _hex_lowered(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text) + 1:
            out.append(text[i : i + 3].lower())
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def spellings(secret: str) -> set[str]:
    """``secret`` as clients and serializers spell it: as it is, percent-encoded (each of
    Python's ways, either hex case, twice), form-encoded, JSON-escaped (also every
    character as ``\\uXXXX``), in HTTP Basic credentials (each part form-encoded or
    not), base64 alone, and each of these escaped for XML (JUnit)."""
    encoded = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        quote(quote(secret, safe=""), safe=""),
        json.dumps(secret)[1:-1],
        "".join(f"\\u{ord(c):04x}" for c in secret),
        base64.b64encode(secret.encode()).decode(),
        base64.b64encode(f"{CLIENT_ID}:{secret}".encode()).decode(),
        base64.b64encode(f"{quote_plus(CLIENT_ID)}:{quote_plus(secret)}".encode()).decode(),
    }
    encoded |= {_hex_lowered(s) for s in encoded}
    if secret.count(".") == 2:  # a JWT: its signature alone is a secret too
        encoded.add(secret.rsplit(".", 1)[1])
    return encoded | {html.escape(s) for s in encoded}
