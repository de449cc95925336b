"""Starting ``mgmtauth-server`` as a subprocess and stopping it, under real-time guards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from wire_support import first_line

#: Real seconds a server may take to start or stop before a test fails (not a timing
#: assertion: a guard so that a broken server fails the test instead of hanging it).
GUARD = 20.0


def console_script() -> str | None:
    """The installed ``mgmtauth-server`` next to this interpreter, if any."""
    path = Path(sys.executable).with_name("mgmtauth-server")
    return str(path) if path.exists() else None


class ServerProcess:
    """A running ``mgmtauth-server --json``; ``info`` is its startup JSON line."""

    def __init__(self, args: list[str], *, command: list[str] | None = None) -> None:
        command = command or [sys.executable, "-m", "pytest_mgmtauth"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [*command, "--json", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.info: dict[str, Any] = json.loads(self._first_line())
        self.url: str = self.info["url"]
        self.account: dict[str, Any] = self.info["accounts"][0]

    def _first_line(self) -> str:
        return first_line(self.process, guard=GUARD, what="mgmtauth-server")

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``signum``; the exit status and what it wrote to stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            _, err = self.process.communicate(timeout=GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
            raise AssertionError(f"mgmtauth-server did not stop on signal {signum}") from None
        return self.process.returncode, err

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.stop()
