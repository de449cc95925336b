"""What the flows declare of their answers and paths, gathered by the registry for the
forwarder, the snapshots and the drift messages: the built-in flows' declarations, and
a flow registered for a while adding its own and taking them away again."""

from __future__ import annotations

import pytest

from pytest_mgmtauth._service.flows.base import Sets
from pytest_mgmtauth._service.flows.bearer import BearerFlow
from pytest_mgmtauth._service.flows.registry import (
    FLOWS,
    answering_flow,
    declared,
    option_sets,
    path_flow,
    registered,
)


class Ticket(BearerFlow):
    name = "ticket"
    title = "/v7/ticket"
    path_title = "/v7/ticket"
    answer_field = "ticket"
    secret_keys = ("stub",)
    code_keys = ("tier",)
    host_keys = ("desk",)
    api_paths = (r"/tickets/",)
    sets = (Sets("token_ttl", "body.ticket.jwt.lifetime"),)
    auth_hosts = ("api.tealiumiq.com",)


def test_the_built_in_flows_declare_their_keys() -> None:
    keys = declared()
    assert keys.secret_keys == {"token", "access_token", "utk", "refresh_token", "id_token"}
    assert keys.code_keys == {"error", "token_type", "expires_in"}
    assert keys.host_keys == {"host"}


@pytest.mark.parametrize(
    ("path", "flow"),
    [
        ("/v2026-07/tiq/accounts/acme/profiles/main/profiles", "oauth"),
        ("/oauth2/token", "oauth"),
        ("/v3/things/accounts/acme/profiles/main", "v3"),
        ("/urest/things", "v2"),  # no prefix of a flow: the default flow's
    ],
)
def test_an_undeclared_path_belongs_to_the_flow_whose_paths_it_falls_under(
    path: str, flow: str
) -> None:
    assert path_flow(path) is FLOWS[flow]


def test_a_snapshots_exchange_is_the_answer_of_its_endpoints_flow_or_its_credentials() -> None:
    assert answering_flow("/v3/auth/accounts/{account}/profiles/{profile}", []) is FLOWS["v3"]
    assert answering_flow("/oauth2/token", ["access_token", "scope"]) is FLOWS["oauth"]
    assert answering_flow("/elsewhere", ["ok"]) is None
    assert [s.option for s in option_sets(None)] == ["api_lifecycle"] * 3


def test_a_flow_registered_for_a_while_adds_its_declarations_and_takes_them_away() -> None:
    with registered(Ticket):
        keys = declared()
        assert {"ticket", "stub"} <= keys.secret_keys
        assert "tier" in keys.code_keys
        assert "desk" in keys.host_keys
        assert path_flow("/tickets/42") is Ticket
        assert answering_flow("/v7/elsewhere", ["ticket"]) is Ticket
        assert option_sets(Ticket)[0] == Sets("token_ttl", "body.ticket.jwt.lifetime")
    keys = declared()
    assert not {"ticket", "stub", "tier", "desk"} & (
        keys.secret_keys | keys.code_keys | keys.host_keys
    )
    assert path_flow("/tickets/42") is FLOWS["v2"]
