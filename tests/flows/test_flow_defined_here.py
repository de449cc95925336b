"""A flow defined in the test suite, end to end, with no edit to the package: every
protected call sends ``X-Username`` and ``X-Api-Key``; there is no token exchange and a
wrong key is 401/1401. It gets the route, the timeline, the lockout, the refused-call
finding under strict and the request log's masking from the framework."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import requests

from pytest_mgmtauth import MgmtServer
from pytest_mgmtauth.flows import (
    AUTH_FAILED,
    Account,
    Authorization,
    Call,
    ClientKind,
    Credential,
    Flow,
    Received,
    fingerprint,
    register,
    registered,
    unregister,
)


@dataclasses.dataclass(frozen=True)
class HeaderKey(Credential):
    username: str = ""
    key: str = ""


class HeaderKeyFlow(Flow):
    name = "xkey"
    title = "the X-Api-Key headers"
    path_title = "X-Api-Key"
    secret = "API key"
    credential = None
    route_prefix = "/xkey/"
    auth_hosts = ("api.tealiumiq.com",)
    api_hosts = ("api.tealiumiq.com",)

    def read(self, received: Received) -> HeaderKey:
        usernames, keys = received.header("X-Username"), received.header("X-Api-Key")
        if not usernames or not keys:
            return HeaderKey(missing=True, problem="send X-Username and X-Api-Key headers")
        return HeaderKey(username=usernames[0], key=keys[0])

    def authorize(
        self, credential: Credential, call: Call, permission: str | None
    ) -> Authorization:
        assert isinstance(credential, HeaderKey)
        refuse = self.refuse_in_call(call)
        if credential.problem is not None:
            refuse(None, AUTH_FAILED, credential.problem)
        with self.service.mutex:
            account = self.check_account(
                credential.username,
                credential.key,
                now=call.now,
                client=ClientKind.OTHER,
                refuse=refuse,
            )
        return Authorization(account.username, self.name, f"key {fingerprint(credential.key)}")


@pytest.fixture
def header_key_flow() -> Iterator[type[Flow]]:
    with registered(HeaderKeyFlow) as flow:
        yield flow


def call(server: MgmtServer, account: Account, key: str) -> requests.Response:
    headers = {"X-Username": account.username, "X-Api-Key": key}
    return requests.get(f"{server.url}/xkey/things", headers=headers, timeout=10)


def test_the_flow_is_registered_only_while_the_fixture_runs() -> None:
    with registered(HeaderKeyFlow) as flow:
        assert flow is HeaderKeyFlow
        with pytest.raises(ValueError, match="a flow named 'xkey' is registered already"):
            register(HeaderKeyFlow)
    with pytest.raises(ValueError, match="no flow named 'xkey' is registered"):
        unregister("xkey")


def test_a_route_of_the_flow_answers_its_headers_and_the_timeline_shows_the_calls(
    header_key_flow: type[Flow], mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    route = mgmt_server.route("GET", "/xkey/things").respond_with_json({"things": 3})
    assert route.auth == "xkey"  # by its route_prefix

    assert call(mgmt_server, mgmt_account, mgmt_account.api_key).json() == {"things": 3}
    wrong = call(mgmt_server, mgmt_account, "not-the-key")

    assert wrong.status_code == 401
    assert wrong.json()["returnCode"] == 1401
    timeline = mgmt_server.timeline()
    assert f"GET /xkey/things with key {fingerprint(mgmt_account.api_key)} -> 200" in timeline
    assert (
        "GET /xkey/things with no known credential -> 401 (1401: the API key does not" in timeline
    )
    mgmt_server.expect_refusals()


def test_failed_keys_lock_the_account_out_with_the_services_1402(
    header_key_flow: type[Flow], mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/xkey/things").respond_with_json({})
    for _ in range(5):
        assert call(mgmt_server, mgmt_account, "wrong").status_code == 401

    locked = call(mgmt_server, mgmt_account, mgmt_account.api_key)

    assert (locked.status_code, locked.json()["returnCode"]) == (401, 1402)
    assert "after 5 failed authentications" in locked.json()["message"]
    assert "account locked after 5 failed authentications in a row" in mgmt_server.timeline()
    mgmt_server.unlock(mgmt_account.username)
    assert call(mgmt_server, mgmt_account, mgmt_account.api_key).status_code == 200
    mgmt_server.expect_refusals()


def test_counts_and_faults_say_what_a_flow_without_grants_has_instead(
    header_key_flow: type[Flow], mgmt_server: MgmtServer
) -> None:
    with pytest.raises(ValueError, match=r"the xkey flow grants no credentials.*requests"):
        mgmt_server.auth_count(version="xkey")
    with pytest.raises(ValueError, match=r"assert_auth_count\(version='xkey'\): the xkey"):
        mgmt_server.assert_auth_count(0, version="xkey")
    with pytest.raises(ValueError, match="the xkey flow has no endpoint that scripted faults"):
        mgmt_server.fail_next(error=500, version="xkey")


def test_the_request_log_masks_the_key_header(
    header_key_flow: type[Flow], mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/xkey/things").respond_with_json({})
    call(mgmt_server, mgmt_account, mgmt_account.api_key)

    (logged,) = mgmt_server.requests
    sent = dict(logged.headers)
    assert sent["X-Username"] == mgmt_account.username
    assert mgmt_account.api_key not in repr(logged)
    assert sent["X-Api-Key"] != mgmt_account.api_key


STRICT_SUITE = """
import dataclasses
import pytest
import requests

from test_flow_defined_here import HeaderKeyFlow
from pytest_mgmtauth.flows import registered

@pytest.fixture(autouse=True)
def xkey():
    with registered(HeaderKeyFlow):
        yield

def test_wrong_key_swallowed(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/xkey/things").respond_with_json({})
    headers = {"X-Username": mgmt_account.username, "X-Api-Key": "wrong"}
    requests.get(f"{mgmt_server.url}/xkey/things", headers=headers, timeout=10)
"""


def test_a_swallowed_refusal_is_a_finding_under_strict(mgmt_pytester: pytest.Pytester) -> None:
    mgmt_pytester.makeini("[pytest]\nmgmtauth_strict = true\n")
    mgmt_pytester.syspathinsert(str(__import__("pathlib").Path(__file__).parent))
    mgmt_pytester.makepyfile(test_strict=STRICT_SUITE)

    result = mgmt_pytester.runpytest_inprocess("-p", "no:randomly")

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*pytest-mgmtauth: 1 protected call(s) of account * were refused because the "
            "client sent the wrong credential; first: GET /xkey/things*-> 401 (1401: the API "
            "key does not match*",
            "*Fix: send every call the credential the service granted for it*: the API key "
            "of the account, as the X-Api-Key headers carry it. If the test*",
        ]
    )
    with pytest.raises(ValueError, match="no flow named 'xkey' is registered"):
        unregister("xkey")
