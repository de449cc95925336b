"""v3 auth as a user's suite sees it (pytester): the teardown churn check per profile,
strict mode, JUnit properties, the report, and the v3 options from the ini and markers."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


#: A user's v3 client tests: one holds a token per profile, one churns one profile.
SUITE = """
import pytest
import requests


def authenticate(mgmt_server, account, profile):
    answer = requests.post(
        mgmt_server.url + "/v3/auth/accounts/acme/profiles/" + profile,
        data={"username": account.username, "key": account.api_key},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def call(auth, profile):
    return requests.get(
        "http://" + auth["host"] + "/v3/customers/accounts/acme/profiles/" + profile,
        headers={"Authorization": "Bearer " + auth["token"]},
    ).status_code


@pytest.fixture(autouse=True)
def _frozen_from_the_start(mgmt_clock):
    # The expected lines have exact times (00:00:00): on the real clock a second
    # boundary crossed mid-test would make them 00:00:01 now and then.
    pass


@pytest.fixture
def routes(mgmt_server):
    for profile in ("main", "dev", "qa"):
        mgmt_server.route("GET", "/v3/customers/accounts/acme/profiles/" + profile)\\
            .respond_with_json({})


def test_token_per_profile(mgmt_server, mgmt_account, routes):
    tokens = {p: authenticate(mgmt_server, mgmt_account, p) for p in ("main", "dev", "qa")}
    for _ in range(2):
        for profile, auth in tokens.items():
            assert call(auth, profile) == 200
    mgmt_server.assert_auth_count(3, version="v3")


def test_churns_one_profile(mgmt_server, mgmt_account, routes):
    for _ in range(3):
        assert call(authenticate(mgmt_server, mgmt_account, "main"), "main") == 200
"""

DEFAULT_WARNINGS = """
[pytest]
filterwarnings = default::pytest_mgmtauth.TokenChurnWarning
"""


def test_churn_of_one_profile_warns_a_token_per_profile_does_not(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess("--junitxml=report.xml")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*.py::test_churns_one_profile",
            "*TokenChurnWarning: pytest-mgmtauth: token churn: account 'user1.*@example.com' "
            "was granted 2 new credential(s)*First premature grant: T2*while T1 was still valid*",
            "    00:00:00  T1 issued by v3 auth for acme/main (#*), valid until 00:30:00",
            "    00:00:00  GET /v3/customers/accounts/acme/profiles/main with T1 -> 200",
            "    00:00:00  T2 issued by v3 auth for acme/main (#*), valid until 00:30:00",
            "              <-- PREMATURE: T1 still valid for another *",
            "*Fix: keep one v3 token per account and profile*",
        ]
    )
    assert "test_token_per_profile" not in result.stdout.str().split("warnings summary")[1]
    root = ET.parse(pytester.path / "report.xml").getroot()
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    assert properties["test_token_per_profile"]["mgmtauth_grants"] == "3"
    assert properties["test_token_per_profile"]["mgmtauth_churn"] == "0"
    assert properties["test_churns_one_profile"]["mgmtauth_churn"] == "2"


def test_strict_fails_the_v3_churn_at_teardown(pytester: pytest.Pytester) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess("--mgmtauth-strict")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*_ ERROR at teardown of test_churns_one_profile _*", "*v3 auth for acme/main*"]
    )


def test_v3_scope_and_issuer_from_the_ini_and_a_marker(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nmgmtauth_v3_scope = account\nmgmtauth_issuer = https://issuer.example\n"
    )
    pytester.makepyfile(
        """
        import jwt
        import pytest
        import requests


        def get(mgmt_server, token, profile):
            return requests.get(
                mgmt_server.region_url + "/v3/x/accounts/acme/profiles/" + profile,
                headers={"Authorization": "Bearer " + token},
            ).status_code


        def token_for(mgmt_server, account):
            return requests.post(
                mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
                data={"username": account.username, "key": account.api_key},
            ).json()["token"]


        def test_ini(mgmt_server, mgmt_account):
            mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/dev").respond_with_json({})
            token = token_for(mgmt_server, mgmt_account)
            assert jwt.decode(token, options={"verify_signature": False})["iss"] == (
                "https://issuer.example"
            )
            assert get(mgmt_server, token, "dev") == 200


        @pytest.mark.mgmtauth(v3_scope="profile")
        def test_marker(mgmt_server, mgmt_account):
            mgmt_server.expect_refusals()
            mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/dev").respond_with_json({})
            assert get(mgmt_server, token_for(mgmt_server, mgmt_account), "dev") == 401


        @pytest.mark.mgmtauth(v3_scope="tenant")
        def test_bad(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*'v3_scope' must be 'profile'*got 'tenant'*"])
