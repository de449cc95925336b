"""Proof with a non-Python client: ``curl`` against ``mgmtauth-server`` in a subprocess,
through the v2 and v1 flows, expiry via the control API, throttling and faults."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest
from standalone_support import GUARD, ServerProcess

CURL = shutil.which("curl")
pytestmark = pytest.mark.skipif(
    CURL is None, reason="curl is not installed: the non-Python client proof needs it"
)


class Answer:
    def __init__(self, status: int, headers: str, body: str, exit_code: int) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.exit_code = exit_code

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> list[str]:
        return re.findall(rf"^{name}: ?(.*?)\r?$", self.headers, re.IGNORECASE | re.MULTILINE)


def curl(*args: str) -> Answer:
    """Run curl as a shell script would; the status, headers and body it got."""
    assert CURL is not None
    result = subprocess.run(
        [CURL, "--silent", "--show-error", "--noproxy", "*", "--include", *args],
        capture_output=True,
        timeout=GUARD,
    )
    if result.returncode != 0:
        return Answer(0, "", result.stderr.decode(), result.returncode)
    # Bytes, not text=True: universal newlines would turn the CRLFs of HTTP into LFs.
    head, _, body = result.stdout.decode().partition("\r\n\r\n")
    status = int(head.split()[1])
    return Answer(status, head, body, 0)


@pytest.fixture(scope="module")
def server(key_file: Path) -> Iterator[ServerProcess]:
    with ServerProcess(
        ["--key-file", str(key_file), "--route", "GET /v2/things", "--route", "GET /v1/things"]
    ) as server:
        yield server


@pytest.fixture
def base(server: ServerProcess) -> str:
    """The base URL, after a reset through the control API (fresh state per test)."""
    assert control(server.url, "/reset", {}).status == 200
    return str(server.url)


def control(base: str, path: str, body: dict[str, Any]) -> Answer:
    return curl(
        "-H", "Content-Type: application/json", "-d", json.dumps(body), f"{base}/_mgmtauth{path}"
    )


def auth(base: str, account: dict[str, Any], key: str | None = None) -> Answer:
    # As the service's documentation shows: the key through --data-urlencode.
    return curl(
        "-X",
        "POST",
        f"{base}/v2/auth",
        "--data-urlencode",
        f"username={account['username']}",
        "--data-urlencode",
        f"key={key or account['api_key']}",
    )


def test_v2_flow_with_expiry_by_advancing_the_clock(base: str, server: ServerProcess) -> None:
    granted = auth(base, server.account)
    assert granted.status == 200
    token = granted.json()["token"]
    assert len(token) > 800
    [cookie] = granted.header("Set-Cookie")
    attributes, expires = cookie.split("; Expires=")
    assert attributes == "rememberMe=deleteMe; Path=/urest_service; Max-Age=0"
    # The answer's Date minus 24 hours, as the published answers (within the second the
    # server's clock may have turned between the cookie and the Date header).
    [date] = granted.header("Date")
    before = parsedate_to_datetime(date) - timedelta(hours=24)
    assert (
        timedelta(0)
        <= before - parsedate_to_datetime(expires.replace("-", " "))
        <= timedelta(seconds=1)
    )
    bearer = f"Authorization: Bearer {token}"
    assert curl("-H", bearer, f"{base}/v2/things").json() == {
        "ok": True,
        "route": "GET /v2/things",
    }
    assert control(base, "/clock/advance", {"seconds": 1800}).status == 200
    expired = curl("-H", bearer, f"{base}/v2/things")
    assert expired.status == 401
    assert expired.json()["returnCode"] == 1401
    assert "expired" in expired.json()["message"]
    token = auth(base, server.account).json()["token"]
    assert curl("-H", f"Authorization: Bearer {token}", f"{base}/v2/things").status == 200


def test_v2_expiry_of_one_token_via_the_control_api(base: str, server: ServerProcess) -> None:
    token = auth(base, server.account).json()["token"]
    assert control(base, "/expire", {"credential": token}).json() == {"expired": "T1"}
    refused = curl("-H", f"Authorization: Bearer {token}", f"{base}/v2/things")
    assert refused.status == 401
    assert "ended early on cue" in refused.json()["message"]
    events = curl(f"{base}/_mgmtauth/events").json()["events"]
    assert [e["type"] for e in events] == ["TokenIssued", "CredentialExpired", "ApiCall"]


def test_v1_flow_login_call_logout(base: str, server: ServerProcess) -> None:
    login = curl(
        "-X",
        "POST",
        f"{base}/v1/login",
        "--data-urlencode",
        f"username={server.account['username']}",
        "--data-urlencode",
        f"password={server.account['password']}",
    )
    assert login.status == 200
    # What shell clients of the real service do: grep the Set-Cookie line.
    match = re.search(r"^Set-Cookie: JSESSIONID=([^;]*);", login.headers, re.MULTILINE)
    assert match, login.headers
    cookie = f"Cookie: JSESSIONID={match.group(1)}"
    utk = login.json()["utk"]
    assert curl("-H", cookie, f"{base}/v1/things?utk={utk}").status == 200
    assert curl("-X", "POST", "-H", cookie, f"{base}/v1/logout").status == 200
    ended = curl("-H", cookie, f"{base}/v1/things?utk={utk}")
    assert ended.status == 401
    assert "ended by /v1/logout" in ended.json()["message"]


def test_a_client_that_reauths_every_call_is_throttled_with_retry_after(
    base: str, server: ServerProcess
) -> None:
    statuses = [auth(base, server.account).status for _ in range(7)]
    assert statuses == [200] * 6 + [429]
    throttled = auth(base, server.account)
    assert throttled.status == 429
    retry_after = int(throttled.header("Retry-After")[0])
    assert 1 <= retry_after <= 60
    assert throttled.json()["returnCode"] == 429
    assert control(base, "/clock/advance", {"seconds": retry_after}).status == 200
    assert auth(base, server.account).status == 200
    events = curl(f"{base}/_mgmtauth/events").json()["events"]
    assert [e["type"] for e in events].count("Throttled") == 2


def test_faults_as_curl_sees_them(base: str, server: ServerProcess) -> None:
    control(base, "/faults", {"kind": "fail", "error": 503})
    control(base, "/faults", {"kind": "reset"})
    control(base, "/faults", {"kind": "hang", "seconds": 30})
    assert auth(base, server.account).status == 503
    reset = auth(base, server.account)
    assert reset.exit_code == 56  # curl: failure receiving data (connection reset)
    hung = curl("--max-time", "0.5", "-X", "POST", f"{base}/v2/auth", "-d", "username=x&key=y")
    assert hung.exit_code == 28  # curl: operation timed out
    assert auth(base, server.account).status == 200


def test_bad_control_input_gets_a_json_4xx_and_the_server_carries_on(
    base: str, server: ServerProcess
) -> None:
    bad = curl("-H", "Content-Type: application/json", "-d", "not json", f"{base}/_mgmtauth/reset")
    assert bad.status == 400
    assert bad.json()["returnCode"] == 1400
    # curl -d without -H sends a form: refused like a web page's form would be.
    form = curl("-d", '{"seconds": 60}', f"{base}/_mgmtauth/clock/advance")
    assert form.status == 415
    assert "Content-Type: application/json" in form.json()["message"]
    assert auth(base, server.account).status == 200
