"""What the examples need to run wherever a user runs them.

The tests import the example clients beside them by plain name (``from mgmt_client import
MgmtClient``), as a user's tests import their own code. pytest's default import mode puts
this folder on ``sys.path``; ``--import-mode=importlib`` does not, so this file does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """``pytester`` whose inner runs leave out the plugins that reorder them or rewrite
    their summary line (pytest-randomly, pytest-pretty, ...): ``test_sweeps.py`` reads
    both. pytester clears PYTEST_ADDOPTS when it starts; this is what its runs see."""
    blocked = ("randomly", "pretty", "asyncio", "rerunfailures")
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(f"-p no:{name}" for name in blocked))
    return pytester
