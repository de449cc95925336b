"""The client matrix: every test that asks for ``client`` runs once per HTTP client and
once per scheme (HTTP, and HTTPS with the session's test CA)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from clients_support import CLIENT_NAMES, Client, make_client

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pytest_mgmtauth import MgmtServer


@pytest.fixture(
    params=[
        pytest.param("http", id="http"),
        pytest.param("https", id="https", marks=pytest.mark.mgmtauth(https=True)),
    ]
)
def scheme(request: pytest.FixtureRequest, mgmt_server: MgmtServer) -> str:
    """The scheme this test's ``mgmt_server`` serves (the marker on the param sets it)."""
    assert mgmt_server.url.startswith(f"{request.param}://"), mgmt_server.url
    return str(request.param)


@pytest.fixture(params=CLIENT_NAMES)
def client_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(client_name: str, scheme: str, mgmt_server: MgmtServer) -> Iterator[Client]:
    """A real client of kind ``client_name`` that trusts the fake's CA over HTTPS."""
    made = make_client(
        client_name,
        ca_bundle=mgmt_server.ca_bundle,
        context=mgmt_server.client_ssl_context(),
    )
    try:
        yield made
    finally:
        made.close()
