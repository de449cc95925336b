"""Hostile-input suite: options and fixtures.

``--mgmtauth-hostile-examples=N`` (or ``MGMTAUTH_HOSTILE_EXAMPLES=N``) sets the number of
generated requests per generated test; the default keeps CI at over 10,000 requests in
well under two minutes. Raise it for a long soak: ``--mgmtauth-hostile-examples=50000``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from hostile_support import SECRET_INPUTS_TRIED, World, setup_world
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pytest_mgmtauth import MgmtServer

DEFAULT_EXAMPLES = 1000  # keep in step with the option's help in tests/conftest.py
PROFILE = "mgmtauth-hostile"


def hostile_examples(config: pytest.Config) -> int:
    value = config.getoption("--mgmtauth-hostile-examples", default=None)
    if value is None:
        value = int(os.environ.get("MGMTAUTH_HOSTILE_EXAMPLES", DEFAULT_EXAMPLES))
    return int(value)


def pytest_configure(config: pytest.Config) -> None:
    # One mgmt_server serves every example of a run (a server per example would be
    # 10,000 setups): the function-scoped fixture is shared across examples on purpose.
    settings.register_profile(
        PROFILE,
        max_examples=hostile_examples(config),
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


_TOTALS: dict[int | None, int] = {}


@pytest.fixture
def world(mgmt_server: MgmtServer) -> Iterator[World]:
    """Accounts, credentials and routes on this test's fake; checked after the test."""
    world = setup_world(mgmt_server)
    yield world
    for status, count in world.statuses.items():
        _TOTALS[status] = _TOTALS.get(status, 0) + count
    world.check_run()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Proof of volume in the CI log (per process: each xdist worker counts its own).
    if _TOTALS:
        total = sum(_TOTALS.values())
        by_status = ", ".join(
            f"{status or 'none'}: {count}" for status, count in sorted(_TOTALS.items(), key=str)
        )
        terminalreporter.write_line(f"mgmtauth hostile: {total} requests answered ({by_status})")
    if SECRET_INPUTS_TRIED:
        tried = ", ".join(f"{name}: {n}" for name, n in SECRET_INPUTS_TRIED.items())
        terminalreporter.write_line(
            f"mgmtauth hostile: {sum(SECRET_INPUTS_TRIED.values())} inputs carrying a "
            f"secret, every output channel searched ({tried})"
        )
