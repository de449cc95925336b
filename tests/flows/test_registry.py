"""Registering a flow: all or nothing, a missing class attribute or method named with its class,
and no change to the list of flows while a fake runs (issue 43, defects 16 and 17)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from werkzeug import Request, Response

from pytest_mgmtauth import Account, MgmtServer
from pytest_mgmtauth._service.events import FLOW_WORDS
from pytest_mgmtauth._service.flows.registry import FLOWS
from pytest_mgmtauth.flows import BearerFlow, Flow, register, registered, unregister


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


class Unreadable(Flow):
    name = "unreadable"
    title = "/unreadable"
    path_title = "/unreadable"
    secret = "API key"
    credential = None
    auth_hosts = ("api.tealiumiq.com",)


def test_a_flow_missing_a_required_method_is_named_with_its_class() -> None:
    with pytest.raises(
        ValueError,
        match=r"flow class Unreadable lacks the method\(s\) authorize\(\), read\(\): every flow "
        r"defines read\(\) and authorize\(\)",
    ):
        register(Unreadable)  # type: ignore[type-abstract]
    with pytest.raises(TypeError, match="register\\(\\) takes a Flow subclass, got 'v2'"):
        register("v2")  # type: ignore[arg-type]
    assert "unreadable" not in FLOWS


def test_the_defaults_of_a_flow_answer_instead_of_raising(mgmt_server: MgmtServer) -> None:
    """Everything but the required members has a default: the fixes of the checks too."""
    options = mgmt_server.options
    assert Complete.fix_churn(options).startswith("keep the token from /complete")
    assert "within" in Flow.fix_expired.__func__(Complete, options)  # type: ignore[attr-defined]
    assert Complete.fix_refused() == "the bearer token of /complete"


EXAMPLES = (
    "test_flow_defined_here.py",
    "test_hmac_flow.py",
    "test_session_flow.py",
    "test_refresh_token_grant.py",
)


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_example_flows_import_only_public_modules(example: str) -> None:
    """A flow written from the docs imports pytest_mgmtauth.flows (and the package's
    public names for its tests), nothing private."""
    source = (Path(__file__).parent / example).read_text()
    imported = re.findall(r"^\s*from (pytest_mgmtauth\S*) import", source, re.MULTILINE)
    assert "pytest_mgmtauth.flows" in imported
    assert set(imported) <= {"pytest_mgmtauth", "pytest_mgmtauth.flows"}


def test_every_name_of_the_authoring_module_resolves() -> None:
    """Its ``__all__`` holds (the registry's functions load on first use), and what the
    two flows a new maintainer wrote against private names reached for is all there."""
    import pytest_mgmtauth.flows as authoring

    for name in authoring.__all__:
        assert getattr(authoring, name) is not None, name
    assert set(authoring.__all__) <= set(dir(authoring))
    assert authoring.register is register
    trials = {"Credential", "Flow", "MalformedCall", "Received", "registered", "AUTH_FAILED"}
    trials |= {"Authorization", "Answer", "Endpoint", "Incoming", "BearerFlow", "BearerToken"}
    trials |= {"TokenRecord", "to_datetime", "Claims", "Call", "ClientKind", "fingerprint"}
    assert trials <= set(authoring.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'FLOWS'"):
        authoring.FLOWS  # noqa: B018


def test_the_reference_lists_every_class_attribute_of_a_flow() -> None:
    """The hand-kept table in "Writing a flow" names each attribute Flow and BearerFlow
    declare (a new one is documented where authors read)."""
    reference = (Path(__file__).parents[2] / "docs" / "reference.md").read_text()
    section = reference.split("## Writing a flow", 1)[1].split("\n## ", 1)[0]
    declared = {
        name
        for flow in (Flow, BearerFlow)
        for name in vars(flow).get("__annotations__", {})
        if not name.startswith("_")
    }
    assert {"name", "auth_hosts", "algorithm"} <= declared
    assert sorted(n for n in declared if f"`{n}`" not in section) == []
