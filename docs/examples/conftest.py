"""What the examples need to run wherever a user runs them.

The tests import the example clients beside them by plain name (``from mgmt_client import
MgmtClient``), as a user's tests import their own code. pytest's default import mode puts
this folder on ``sys.path``; ``--import-mode=importlib`` does not, so this file does.

The async examples need pytest-asyncio or anyio's pytest plugin (``pip install
pytest-asyncio``; anyio comes with httpx): without it, its tests are skipped and say so
(``pip install -e .`` and the HTTP clients run every other example).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


#: The async examples' markers, and the plugin (its name in pytest) that runs each.
_ASYNC_PLUGINS = {"asyncio": "pytest-asyncio", "anyio": "anyio"}


def pytest_configure(config: pytest.Config) -> None:
    # A marker without its plugin is unknown, and --strict-markers makes it an error
    # when the example is imported: declare it, and skip its tests (below).
    for marker, package in _ASYNC_PLUGINS.items():
        if not config.pluginmanager.has_plugin(marker):
            config.addinivalue_line("markers", f"{marker}: needs {package} (not installed)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, package in _ASYNC_PLUGINS.items():
        if config.pluginmanager.has_plugin(marker):
            continue
        skip = pytest.mark.skip(reason=f"an async example: needs {package} (pip install {package})")
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """``pytester`` whose inner runs leave out the plugins that reorder them or rewrite
    their summary line (pytest-randomly, pytest-pretty, ...): ``test_sweeps.py`` reads
    both. pytester clears PYTEST_ADDOPTS when it starts; this is what its runs see."""
    blocked = ("randomly", "pretty", "asyncio", "rerunfailures")
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(f"-p no:{name}" for name in blocked))
    return pytester
