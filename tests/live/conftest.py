"""Fixtures of the live-run tests: a stand-in for the service, and a pytester folder
holding the scenarios, pointed at it."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from live_support import SCENARIOS, StandIn


@pytest.fixture(scope="session")
def key_file(tmp_path_factory: pytest.TempPathFactory, default_key_pem: bytes) -> Path:
    """The session's key as the stand-ins' ``--key-file``: none generates one."""
    path = tmp_path_factory.mktemp("live") / "signing-key.pem"
    path.write_bytes(default_key_pem)
    return path


@pytest.fixture(scope="module")
def stand_in(key_file: Path) -> Iterator[StandIn]:
    """The service, as the module's live runs see it (no throttle: they share its
    account, as a suite shares a real one)."""
    with StandIn(key_file, "none", "--throttle", "none") as server:
        yield server


@pytest.fixture
def scenarios(
    pytester: pytest.Pytester, seed_key: Callable[[pytest.Pytester], None]
) -> pytest.Pytester:
    """A pytester folder with the scenarios as ``test_scenarios.py``."""
    seed_key(pytester)
    shutil.copy(SCENARIOS / "conftest.py", pytester.path / "conftest.py")
    shutil.copy(SCENARIOS / "scenarios.py", pytester.path / "test_scenarios.py")
    # A finding (the scenario that calls the wrong host on purpose) is a warning, as in
    # a user's suite, not an error as in ours.
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n")
    return pytester
