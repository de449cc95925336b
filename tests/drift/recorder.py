"""A plugin (``-p recorder``) that writes each test's exchanges with the fake into its
module's snapshot, the way a live run writes the service's: to check that a recording of
the same behaviour is no drift. Only with ``MGMTAUTH_TEST_RECORD`` set."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pytest_mgmtauth._glue.drift import write_record


@pytest.fixture(autouse=True)
def _recorded(request: pytest.FixtureRequest) -> Iterator[None]:
    names = request.fixturenames
    # A pytester test's fake belongs to its inner run: nothing of its own to record.
    if (
        "mgmt_server" not in names
        or "pytester" in names
        or not os.environ.get("MGMTAUTH_TEST_RECORD")
    ):
        yield
        return
    server = request.getfixturevalue("mgmt_server")
    kept = server.record_exchanges()
    yield
    write_record(request.node, kept, today="2026-11-28", region_host=server.options.v3_host)
