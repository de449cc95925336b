"""The scenarios' own fixtures (copied beside them into each run's folder): what a user's
suite would write to run one test both ways, against the fake and live."""

from __future__ import annotations

import pytest
import requests

from pytest_mgmtauth import Account, MgmtServer


@pytest.fixture
def live(pytestconfig: pytest.Config) -> bool:
    return bool(pytestconfig.getoption("mgmtauth_live"))


@pytest.fixture
def http() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # mgmt_server.url: no proxy, and this run's fake over http
    return session


@pytest.fixture
def no_permission(mgmt_server: MgmtServer, mgmt_account: Account, live: bool) -> Account:
    """An account without permissions: the stand-in's live account has none; against the
    fake, one is made so."""
    return mgmt_account if live else mgmt_server.add_account(permissions=[])


@pytest.fixture
def locked(mgmt_server: MgmtServer, mgmt_account: Account, live: bool) -> Account:
    """A locked account: the stand-in's is locked before the run; the fake's here."""
    if not live:
        mgmt_server.lock(mgmt_account)
    return mgmt_account


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "refused: refuses the run's credentials (run alone)")
    config.addinivalue_line("markers", "throttled: is throttled (its own stand-in)")
