"""A flow defined outside the package may wait in its answer (a lock, an event, a slow
call of its own): the fake serves other connections meanwhile. "Adding a flow" asks
nothing of its threads: one thread accepts, and each connection has a thread of its own."""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest
import requests

from pytest_mgmtauth import MgmtServer
from pytest_mgmtauth.flows import Answer, BearerFlow, Endpoint, Incoming, registered


class WaitingFlow(BearerFlow):
    """Its endpoint answers once the test lets it go."""

    name = "v8"
    title = "/v8/wait"
    path_title = "/v8/wait"
    grants_phrase = "v8 tokens"
    route_prefix = "/v8/"
    auth_hosts = ("api.tealiumiq.com",)
    endpoints = (Endpoint("wait", "/v8/wait", fault_point=False),)
    entered: ClassVar[threading.Event] = threading.Event()
    released: ClassVar[threading.Event] = threading.Event()

    def answer_wait(self, incoming: Incoming) -> Answer:
        type(self).entered.set()
        type(self).released.wait(10)
        return Answer({"waited": True})


@pytest.fixture(autouse=True, scope="module")
def _v8_flow_registered():
    with registered(WaitingFlow):
        yield


def test_a_flow_that_waits_in_its_answer_holds_up_no_other_client(
    mgmt_server: MgmtServer,
) -> None:
    mgmt_server.route("GET", "/api/ping").respond_with_json({"ok": True})
    WaitingFlow.entered.clear()
    WaitingFlow.released.clear()
    waited: list[requests.Response] = []
    first = threading.Thread(
        target=lambda: waited.append(requests.post(f"{mgmt_server.url}/v8/wait", timeout=20))
    )
    first.start()
    try:
        assert WaitingFlow.entered.wait(10), "the flow's answer never started"
        # A new connection while the flow waits: accepted and answered (401: no token).
        other = requests.get(f"{mgmt_server.url}/api/ping", timeout=5)
        assert other.status_code == 401
    finally:
        WaitingFlow.released.set()
        first.join(20)
    assert [w.json() for w in waited] == [{"waited": True}]
