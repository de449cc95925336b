"""The curl walkthrough of docs/standalone.md runs as written, against a real server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from standalone_support import GUARD, ServerProcess

SCRIPT = Path(__file__).parents[2] / "docs" / "examples" / "standalone_walkthrough.sh"
ALICE = (
    '{"username": "alice@example.com", "api_key": "s3cret+key&with=chars%/", '
    '"password": "pa55+word&"}'
)


@pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("bash") is None,
    reason="the walkthrough is a bash script of curl commands: it needs curl and bash",
)
def test_the_documented_walkthrough(key_file: Path) -> None:
    # The server command line of the script's header, on any free port.
    header = SCRIPT.read_text()
    assert "--route 'GET /v2/things' --route 'GET /v1/things'" in header
    assert ALICE in header
    args = ["--key-file", str(key_file), "--account", ALICE]
    args += ["--route", "GET /v2/things", "--route", "GET /v1/things"]
    with ServerProcess(args) as server:
        result = subprocess.run(
            ["bash", str(SCRIPT)],
            capture_output=True,
            text=True,
            timeout=GUARD,
            env={**os.environ, "BASE": server.url},
        )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert '"route": "GET /v2/things"\n} -> 200' in out
    assert "token T1 expired" in out
    assert "} -> 401" in out
    assert '"route": "GET /v1/things"\n} -> 200' in out
    assert "{} -> 200" in out  # logout
    assert "200 200 200 200 200 200 429" in out
    # The server's clock is real: Retry-After is 60 less the seconds the curls took.
    retry_after = re.search(r"^Retry-After: (\d+)\r?$", out, re.MULTILINE | re.IGNORECASE)
    assert retry_after is not None
    assert 1 <= int(retry_after.group(1)) <= 60
    assert "503\ncurl exit status 56" in out
    assert re.search(r'"description": "/v2/auth throttled \(429, Retry-After \d+s\)', out)
    assert "connection reset, no answer" in out
    # The last section checks the verdicts of a client that reused its token.
    assert "call 3 -> 200\ncheck: ok" in out
