"""``pytest docs/examples`` with the plugin and the HTTP clients alone (issue 38, "First
minutes"): the README says the plugin needs only ``pip install -e .``, and such a run
ended in an INTERNALERROR (``asyncio_mode``, an ini key of pytest-asyncio, unknown under
``filterwarnings = error``); then the async examples' markers failed their collection.

Here pytest-asyncio and anyio's plugin are blocked (``-p no:...``), which is what their
absence looks like to pytest; the ``examples`` row of noxfile.py runs the examples in a
virtualenv that has only the plugin and the HTTP clients.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Real seconds the run may take before the test fails (a hang guard, not a timing check).
GUARD = 120


def _examples(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )


def test_the_async_examples_skip_without_their_plugins_and_say_why() -> None:
    done = _examples("-p", "no:asyncio", "-p", "no:anyio", "-rs", "docs/examples/test_async.py")
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 skipped" in done.stdout
    assert "needs pytest-asyncio (pip install pytest-asyncio)" in done.stdout
    assert "needs anyio (pip install anyio)" in done.stdout


def test_the_other_examples_run_without_pytest_asyncio() -> None:
    done = _examples("-p", "no:asyncio", "-q", "docs/examples/test_quickstart.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
    assert "skipped" not in done.stdout
