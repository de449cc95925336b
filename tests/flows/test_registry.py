"""Registering a flow: all or nothing, a missing class attribute named with its class,
and no change to the list of flows while a fake runs (issue 43, defects 16 and 17)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests
from werkzeug import Request, Response

from pytest_mgmtauth import Account, MgmtServer
from pytest_mgmtauth._service.events import FLOW_WORDS
from pytest_mgmtauth._service.flows.bearer import BearerFlow
from pytest_mgmtauth._service.flows.registry import FLOWS, register, registered, unregister


class Untitled(BearerFlow):
    name = "untitled"
    path_title = "/untitled"
    auth_hosts = ("api.tealiumiq.com",)


class Complete(BearerFlow):
    name = "complete"
    title = "/complete"
    path_title = "/complete"
    auth_hosts = ("api.tealiumiq.com",)


def test_a_flow_missing_an_attribute_is_named_with_its_class_and_not_registered() -> None:
    with pytest.raises(
        ValueError, match=r"flow class Untitled lacks the class attribute\(s\) 'title'"
    ):
        register(Untitled)
    assert "untitled" not in FLOWS
    assert "untitled" not in FLOW_WORDS
    with pytest.raises(ValueError, match="no flow named 'untitled' is registered"):
        unregister("untitled")


def test_registering_after_the_fake_exists_is_refused(mgmt_server: MgmtServer) -> None:
    with pytest.raises(
        ValueError, match="cannot register the flow 'complete' while a fake is running"
    ):
        register(Complete)
    assert "complete" not in FLOWS
    with pytest.raises(ValueError, match="Register flows before mgmt_server exists"):
        unregister("v2")
    assert "v2" in FLOWS
    mgmt_server.route("GET", "/api/things").respond_with_json([])  # the fake still works


def test_registering_while_a_request_is_answered_is_refused(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: Callable[[Account], str]
) -> None:
    refused: list[str] = []

    def handler(request: Request) -> Response:
        try:
            register(Complete)
        except ValueError as exc:
            refused.append(str(exc))
        return Response("ok")

    mgmt_server.route("GET", "/api/open").respond_with_handler(handler)
    headers = {"Authorization": "Bearer " + get_token(mgmt_account)}
    answer = requests.get(mgmt_server.url + "/api/open", headers=headers)
    assert answer.status_code == 200
    assert "complete" not in FLOWS
    [message] = refused
    assert "while a fake is running" in message


def test_registered_before_the_fake_works_and_is_gone_after() -> None:
    with registered(Complete):
        assert FLOWS["complete"] is Complete
    assert "complete" not in FLOWS
