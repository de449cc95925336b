"""The hosts of the service in the domain: which flow answers on which host (declared by
the flows, gathered by the registry), the refusal of a request at the wrong host with
its diagnosis, and the ``wrong_host`` finding it becomes."""

from __future__ import annotations

import http.client
from collections.abc import Callable
from datetime import datetime, timezone
from urllib.parse import urlencode, urlsplit

import pytest

from pytest_mgmtauth import Account, MgmtServer
from pytest_mgmtauth._service.events import ApiCall, WrongHost
from pytest_mgmtauth._service.flows.base import Where
from pytest_mgmtauth._service.flows.bearer import BearerToken
from pytest_mgmtauth._service.flows.registry import (
    FLOWS,
    WRONG_HOST_STATUS,
    fixed_hosts,
    route_hosts,
    service_hosts,
)
from pytest_mgmtauth._service.flows.v3 import V3Flow
from pytest_mgmtauth._service.options import DEFAULT_V3_HOST, Options
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._verdicts.evidence import Evidence
from pytest_mgmtauth._verdicts.findings import default_kinds, findings, report_section

MakeService = Callable[..., AuthService]
REGION = "127.0.0.1:40001"


def evidence(service: AuthService) -> Evidence:
    return Evidence(
        events=service.timeline.events,
        options=service.options,
        started_at=service.timeline.started_at,
        now=service.timeline.now(),
    )


def test_the_flows_declare_the_hosts_of_the_service() -> None:
    hosts = service_hosts(Options())
    # Issue 32's four (a further flow may add its own), the region host last.
    issue_32 = ("api.tealiumiq.com", "platform.tealiumapis.com", "my.tealiumiq.com")
    assert tuple(h for h in hosts if h in issue_32) == issue_32
    assert hosts[-1] == DEFAULT_V3_HOST
    assert DEFAULT_V3_HOST == "us-west-2-platform.tealiumapis.com"
    assert FLOWS["v1"].auth_hosts == ("api.tealiumiq.com",)
    assert FLOWS["v2"].auth_hosts == ("api.tealiumiq.com",)
    assert FLOWS["v3"].auth_hosts == ("platform.tealiumapis.com",)
    options = Options(v3_host="eu-central-1-platform.tealiumapis.com")
    assert route_hosts("v1", options) == (
        "api.tealiumiq.com",
        "my.tealiumiq.com",
        "sso.tealiumiq.com",
    )
    assert route_hosts("v3", Options(v3_global_host=True)) == (
        DEFAULT_V3_HOST,
        "platform.tealiumapis.com",
    )
    assert route_hosts("v2", options) == ("api.tealiumiq.com",)
    assert route_hosts("v3", options) == ("eu-central-1-platform.tealiumapis.com",)
    assert route_hosts("v2", options, "my.tealiumiq.com") == ("my.tealiumiq.com",)
    assert options.v3_host not in fixed_hosts()


@pytest.mark.parametrize("name", list(FLOWS))
def test_every_flow_declares_where_it_authenticates_and_where_its_calls_go(name: str) -> None:
    flow = FLOWS[name]
    assert flow.auth_hosts, f"{flow.__name__} declares no auth_hosts"
    assert flow.api_hosts or flow.api_on_region_host, f"{flow.__name__} declares no API host"
    assert all(h in fixed_hosts() for h in (*flow.auth_hosts, *flow.api_hosts))


@pytest.mark.parametrize(
    "bad", ["", "https://x.example.com", "x.example.com:443", "X.Example.com", "local", 3]
)
def test_v3_host_must_be_a_bare_host_name(bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="v3_host"):
        Options(v3_host=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.7", "127.1"])
def test_v3_host_may_not_be_an_ip_address(address: str) -> None:
    # As a service host, an address's lookups would be refused: mgmt_server.url's too.
    with pytest.raises(ValueError, match=r"'v3_host' must be a host name, not an IP address"):
        Options(v3_host=address)


def test_the_fake_address_stands_for_every_host_but_the_region_host() -> None:
    address = Where(None, "127.0.0.1:40000")
    assert address.reaches(("api.tealiumiq.com",), DEFAULT_V3_HOST)
    assert address.reaches(("platform.tealiumapis.com",), DEFAULT_V3_HOST)
    assert not address.reaches((DEFAULT_V3_HOST,), DEFAULT_V3_HOST)
    region = Where(DEFAULT_V3_HOST, REGION)
    assert region.reaches((DEFAULT_V3_HOST,), DEFAULT_V3_HOST)
    assert not region.reaches(("api.tealiumiq.com",), DEFAULT_V3_HOST)


def _v3_token(service: AuthService) -> tuple[str, str]:
    account = service.accounts.add_account()
    token, _ = service.flow(V3Flow).grant(account.username, account.api_key, "acme", "main")
    return account.username, token


def test_a_v3_call_at_the_auth_address_is_refused_with_the_diagnosis(
    service: AuthService,
) -> None:
    username, token = _v3_token(service)
    with pytest.raises(Refusal) as refused:
        service.refuse_wrong_host(
            "v3",
            Where(None, "127.0.0.1:40000"),
            REGION,
            method="GET",
            path="/v3/things/accounts/acme/profiles/main",
            api=True,
            credential=BearerToken(token=token),
        )
    diagnosis = (
        "this call went to the v3 auth host; send v3 API calls to the `host` of the auth "
        f"answer ({REGION})"
    )
    assert refused.value.status == WRONG_HOST_STATUS == 404
    assert diagnosis in refused.value.message
    event = service.timeline.events[-1]
    assert isinstance(event, WrongHost)
    assert (event.username, event.credential, event.went, event.expected) == (
        username,
        "T1",
        "127.0.0.1:40000",
        REGION,
    )
    assert "at 127.0.0.1:40000 with T1 -> 404 wrong host: " + diagnosis in event.describe()


def test_wrong_host_is_a_finding_counted_by_default_and_named_in_the_report(
    make_service: MakeService,
) -> None:
    service = make_service()
    assert "wrong_host" in default_kinds(service.options)
    username, token = _v3_token(service)
    with pytest.raises(Refusal):
        service.refuse_wrong_host(
            "v3",
            Where("platform.tealiumapis.com", "platform.tealiumapis.com"),
            DEFAULT_V3_HOST,
            method="GET",
            path="/v3/things/accounts/acme/profiles/main",
            api=True,
            credential=BearerToken(token=token),
        )
    found = findings(evidence(service))
    assert [(f.kind, f.username) for f in found] == [("wrong_host", username)]
    assert "went to a host that does not serve it" in found[0].headline
    assert "the v3 auth host" in found[0].headline
    assert found[0].fix.startswith(
        f"Fix: send GET /v3/things/accounts/acme/profiles/main to {DEFAULT_V3_HOST}"
    )
    section = report_section(evidence(service))
    assert "  wrong host: " in section
    assert "at platform.tealiumapis.com with T1 -> 404 wrong host" in section


def test_an_auth_request_at_the_wrong_host_names_no_account_when_it_presents_none(
    service: AuthService,
) -> None:
    with pytest.raises(Refusal) as refused:
        service.refuse_wrong_host(
            "v2",
            Where(DEFAULT_V3_HOST, REGION),
            "127.0.0.1:40000",
            method="POST",
            path="/v2/auth",
            api=False,
        )
    assert (
        f"this call went to {REGION}, which does not serve /v2/auth; send it to "
        "127.0.0.1:40000" in refused.value.message
    )
    found = findings(evidence(service))
    assert [(f.kind, f.username) for f in found] == [("wrong_host", None)]
    assert found[0].headline.startswith(
        "pytest-mgmtauth: 1 request that named no known account went to a host that does "
        "not serve it; first: POST /v2/auth at 127.0.0.1:40001 at 00:00:00 -> 404"
    )


def test_a_call_at_a_host_other_than_the_usual_one_shows_it() -> None:
    event = ApiCall(
        at=datetime.now(timezone.utc),
        username="u",
        method="GET",
        path="/urest/x",
        version="v1",
        credential="S1",
        status=200,
        host="my.tealiumiq.com",
    )
    assert event.describe() == "GET /urest/x at my.tealiumiq.com with S1 -> 200"


@pytest.mark.filterwarnings("ignore::pytest_mgmtauth.WrongHostWarning")  # on purpose
@pytest.mark.parametrize("host", ["my.tealiumiq.com", "my.tealiumiq.com.", "MY.tealiumiq.com.:443"])
def test_a_host_name_with_its_final_dot_is_the_same_host(
    mgmt_server: MgmtServer, mgmt_account: Account, host: str
) -> None:
    # The transport's parser once kept the dot (the control API's guard dropped it):
    # my.tealiumiq.com. passed for the fake's own address, and /v2/auth answered there.
    parts = urlsplit(mgmt_server.url)
    assert parts.hostname is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    body = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key})
    form = {"Host": host, "Content-Type": "application/x-www-form-urlencoded"}
    try:
        conn.request("POST", "/v2/auth", body=body, headers=form)
        answer = conn.getresponse()
        assert answer.status == 404
        assert b"this call went to my.tealiumiq.com, which does not serve /v2/auth" in (
            answer.read()
        )
    finally:
        conn.close()
