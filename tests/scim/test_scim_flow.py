"""The scim flow itself: written against the public authoring module only, registered
with the built-in flows, its endpoints under each value of ``scim_token_version``; and in
a user's suite (pytester): a SCIM client that forgets X-Tealium-Account is a refused call
under strict, with the header's fix."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import pytest_mgmtauth
from pytest_mgmtauth import Options
from pytest_mgmtauth._service.flows.registry import FLOWS, route_flow
from pytest_mgmtauth._service.flows.scim import LIFETIME, ScimFlow

SOURCE = Path(pytest_mgmtauth.__file__).parent / "_service" / "flows" / "scim.py"


def test_the_flow_imports_only_the_authoring_module_and_the_standard_library() -> None:
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(SOURCE.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert "" not in imported  # no relative import
    package = {name for name in imported if name.startswith("pytest_mgmtauth")}
    assert package == {"pytest_mgmtauth.flows"}
    others = {name.split(".")[0] for name in imported - package}
    assert others <= sys.stdlib_module_names


def test_registered_like_the_built_in_flows_with_its_paths() -> None:
    assert list(FLOWS) == ["v2", "v3", "v1", "oauth", "scim"]
    assert FLOWS["scim"] is ScimFlow
    assert route_flow("/scim/v2/Users") == route_flow("/scim/v2/Groups") == "scim"
    paths = [e.path for e in ScimFlow.endpoints_for(Options())]
    assert paths == ["/v2/auth-long-lived/token", "/v2/auth-long-lived/revoke"]
    earlier = [e.path for e in ScimFlow.endpoints_for(Options(scim_token_version="v1"))]
    assert earlier == ["/v1/auth-long-lived/token", "/v2/auth-long-lived/revoke"]
    assert ScimFlow.lifetime(Options()) == LIFETIME == 90 * 24 * 3600
    assert ScimFlow.lifetime(Options(scim_token_version="v1")) == 35999
    assert ScimFlow.auth_hosts == ScimFlow.api_hosts == ("developer.tealiumapis.com",)


def test_an_unknown_version_of_the_page_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"'scim_token_version' must be 'v2' or 'v1', got 'v3'"):
        Options(scim_token_version="v3")


USER_SUITE = """
import pytest
import requests


@pytest.fixture
def token(mgmt_server, mgmt_account):
    form = {"account": "acme", "profile": "main", "username": mgmt_account.username,
            "key": mgmt_account.api_key}
    answer = requests.post(mgmt_server.url + "/v2/auth-long-lived/token", data=form)
    return answer.json()["access_token"]


def test_forgets_the_account_header(mgmt_server, token):
    mgmt_server.route("GET", "/scim/v2/Users").respond_with_json({"Resources": []})
    answer = requests.get(
        mgmt_server.url + "/scim/v2/Users", headers={"Authorization": "Bearer " + token}
    )
    assert answer.status_code == 403
"""


def test_a_missing_account_header_is_a_refused_call_under_strict(
    mgmt_pytester: pytest.Pytester,
) -> None:
    mgmt_pytester.makeini("[pytest]\nmgmtauth_strict = true\n")
    mgmt_pytester.makepyfile(test_forgetful_scim_suite=USER_SUITE)

    result = mgmt_pytester.runpytest_inprocess("-p", "no:randomly")

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*1 protected call(s) of account * were refused because the client sent the wrong "
            "credential; first: GET /scim/v2/Users with T1 at * -> 403 (1469: no "
            "X-Tealium-Account header: send 'X-Tealium-Account: acme' with every SCIM call)*",
            "*T1 issued by /v2/auth-long-lived/token for acme/main*",
        ]
    )


def test_a_drift_of_the_lifetime_or_the_earlier_fields_names_the_option() -> None:
    from pytest_mgmtauth._verdicts.drift import ABSENT, option_for

    token = "/v2/auth-long-lived/token"
    assert option_for(ScimFlow, token, "body.expires_in", 35999, LIFETIME) == "scim_token_version"
    assert (
        option_for(ScimFlow, token, "body.refresh_expires_in", "integer", ABSENT)
        == "scim_token_version"
    )
    # A lifetime neither page shows: no option makes it.
    assert option_for(ScimFlow, token, "body.expires_in", 3600, LIFETIME) is None
