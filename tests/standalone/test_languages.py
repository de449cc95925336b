"""The walkthroughs of docs/languages.md, run as written by real node, java and curl
processes against a real ``mgmtauth-server`` process: each passes with a client that
reuses its token, and fails, because /_mgmtauth/check reports churn, with one that
does not (CHURN=1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from standalone_support import ServerProcess

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"
#: The server command line of the walkthroughs' headers.
ALICE = (
    '{"username": "alice@example.com", "api_key": "s3cret+key&with=chars%/", '
    '"password": "pa55+word&"}'
)
#: Real seconds a walkthrough may take (java compiles it first) before the test fails:
#: a guard against a hang, not a timing assertion.
RUN_GUARD = 180.0


def _version(command: list[str], pattern: str) -> int | None:
    """The major version ``command`` prints, or None if the tool is missing."""
    if shutil.which(command[0]) is None:
        return None
    result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_GUARD)
    match = re.search(pattern, result.stdout + result.stderr)
    return int(match.group(1)) if match else None


NODE = _version(["node", "--version"], r"v(\d+)\.")
JAVA = _version(["java", "-version"], r'version "(?:1\.)?(\d+)')
#: CI (.ci/run) installs the tools and sets this: there a missing one fails, never skips.
REQUIRED = os.environ.get("MGMTAUTH_REQUIRE_LANGUAGES") == "1"

needs_node = pytest.mark.skipif(
    not REQUIRED and (NODE is None or NODE < 18),
    reason=f"the Node walkthrough needs node 18+ (built-in fetch); found {NODE or 'none'}",
)
needs_java = pytest.mark.skipif(
    not REQUIRED and (JAVA is None or JAVA < 11 or shutil.which("javac") is None),
    reason="the Java walkthrough needs a JDK 11+ (java.net.http, single-file source "
    f"launch); found {JAVA or 'no java'}",
)
needs_curl = pytest.mark.skipif(
    not REQUIRED and (shutil.which("curl") is None or shutil.which("bash") is None),
    reason="the curl walkthrough is a bash script of curl commands: it needs curl and bash",
)


@pytest.fixture(scope="module")
def server(key_file: Path) -> Iterator[ServerProcess]:
    # Every walkthrough resets the server first, so one server serves them all.
    args = ["--key-file", str(key_file), "--account", ALICE]
    args += ["--route", "GET /v2/things", "--route", "GET /v1/things"]
    with ServerProcess(args) as server:
        yield server


def _run(
    command: list[str], server: ServerProcess, *, churn: bool
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BASE": server.url}
    env.pop("CHURN", None)
    if churn:
        env["CHURN"] = "1"
    return subprocess.run(
        command, cwd=EXAMPLES, capture_output=True, text=True, timeout=RUN_GUARD, env=env
    )


def _verdict(server: ServerProcess) -> dict[str, object]:
    answer = requests.get(f"{server.url}/_mgmtauth/check", timeout=30)
    verdict = json.loads(answer.text)
    assert isinstance(verdict, dict)
    return verdict


def _kinds(verdict: dict[str, object]) -> list[str]:
    findings = verdict["findings"]
    assert isinstance(findings, list)
    return [f["kind"] for f in findings]


WALKTHROUGHS = [
    pytest.param(["node", "walkthrough.mjs"], id="node", marks=needs_node),
    pytest.param(["java", "Walkthrough.java"], id="java", marks=needs_java),
    pytest.param(["bash", "standalone_walkthrough.sh"], id="curl", marks=needs_curl),
]


@pytest.mark.parametrize("command", WALKTHROUGHS)
def test_the_walkthrough_passes_with_a_client_that_reuses_its_token(
    server: ServerProcess, command: list[str]
) -> None:
    result = _run(command, server, churn=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: ok" in result.stdout
    verdict = _verdict(server)
    assert verdict["ok"] is True
    counts = verdict["counts"]
    assert isinstance(counts, dict)
    assert counts["grants"] == 1
    assert counts["api_calls"] == 3


@pytest.mark.parametrize("command", WALKTHROUGHS)
def test_the_walkthrough_fails_when_check_reports_churn(
    server: ServerProcess, command: list[str]
) -> None:
    result = _run(command, server, churn=True)
    assert result.returncode != 0, result.stdout
    assert "check: ok" not in result.stdout
    # It says why: the finding, and the timeline with the premature grants marked.
    assert "churn" in result.stderr
    assert "PREMATURE: T1 still valid" in result.stderr
    verdict = _verdict(server)
    assert verdict["ok"] is False
    assert _kinds(verdict) == ["churn"]
    assert "s3cret+key" not in result.stdout + result.stderr


# -- the fix hints a real Node fetch gets ------------------------------------------------

TEMPLATE_BODY = """
const base = process.env.BASE;
const response = await fetch(`${base}/v2/auth`, {
  method: "POST",
  headers: HEADERS,
  body: `username=alice%40example.com&key=s3cret+key&with=chars%/`,
});
console.log(JSON.stringify(await response.json()));
"""


@needs_node
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param(
            '{"Content-Type": "application/x-www-form-urlencoded"}',
            "the API key arrived un-encoded",
            id="template-string-with-form-type",
        ),
        pytest.param("{}", "which fetch sets for a string body", id="template-string-alone"),
    ],
)
def test_a_node_fetch_with_a_template_string_body_gets_node_advice(
    server: ServerProcess, headers: str, expected: str
) -> None:
    requests.post(f"{server.url}/_mgmtauth/reset", json={}, timeout=30).raise_for_status()
    result = subprocess.run(
        ["node", "--input-type=module", "-e", TEMPLATE_BODY.replace("HEADERS", headers)],
        capture_output=True,
        text=True,
        timeout=RUN_GUARD,
        env={**os.environ, "BASE": server.url},
    )
    assert result.returncode == 0, result.stderr
    message = json.loads(result.stdout)["message"]
    assert expected in message
    assert "new URLSearchParams({...})" in message
    for python in ("urllib", "requests", "httpx", "data={"):
        assert python not in message
    assert "s3cret+key" not in message
