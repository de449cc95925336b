"""No false drift: every test of docs/examples recorded against the fake with default
options, then run again and checked against its recording, gives no DriftWarning. Tokens,
dates, ids and secrets differ between the two runs; none of it may read as drift."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Real seconds a run may take before the test fails (a hang guard, not a timing check).
GUARD = 300
# The sweep examples run a pytester suite of their own (the project's conftest loads it).
PYTEST = (
    *(sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"),
    *("-p", "pytester"),
)


def _run(folder: Path, *, record: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MGMTAUTH_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    if record:
        env["MGMTAUTH_TEST_RECORD"] = "1"
    return subprocess.run(
        [
            *PYTEST,
            "-p",
            "recorder",
            "-q",
            "-W",
            "default::pytest_mgmtauth.DriftWarning",
            str(folder),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )


def test_the_examples_recorded_and_replayed_show_no_drift(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "docs" / "examples", examples)
    first = _run(examples, record=True)
    assert first.returncode == 0, first.stdout + first.stderr
    snapshots = sorted((examples / "mgmtauth_snapshots").glob("*.json"))
    tests = [t for s in snapshots for t in json.loads(s.read_text())["tests"].values()]
    exchanges = sum(len(t["exchanges"]) for t in tests)
    assert len(tests) >= 30, len(tests)
    assert exchanges >= 60, exchanges
    second = _run(examples, record=False)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "DriftWarning" not in second.stdout + second.stderr
