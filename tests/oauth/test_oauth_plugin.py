"""The OAuth flow as a user's suite sees it (pytester): the mgmt_oauth_client fixture, the
teardown churn check and strict mode, JUnit properties, the report section, the options
from the ini, and a sweep of faults over an OAuth client."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


SUITE = """
from urllib.parse import quote_plus

import pytest
import requests

READ = "acme:main:tiq:2026-07:profiles:read"


class Client:
    def __init__(self, server, client, *, keep):
        self.url, self.client, self.keep, self.token = server.url, client, keep, None

    def get(self, path):
        for attempt in (1, 2):
            if self.token is None or not self.keep:
                answer = requests.post(
                    self.url + "/oauth/token",
                    data={"grant_type": "client_credentials"},
                    auth=(quote_plus(self.client.client_id), quote_plus(self.client.client_secret)),
                )
                answer.raise_for_status()
                self.token = answer.json()["access_token"]
            headers = {"Authorization": "Bearer " + self.token}
            answer = requests.get(self.url + path, headers=headers)
            if answer.status_code == 401 and attempt == 1:
                self.token = None
                continue
            answer.raise_for_status()
            return answer.json()


@pytest.fixture(autouse=True)
def _frozen(mgmt_clock):
    pass


@pytest.fixture
def route(mgmt_server):
    mgmt_server.route("GET", "/api/profiles", scope=READ).respond_with_json([1])


def test_keeps_its_token(mgmt_server, mgmt_oauth_client, route):
    client = Client(mgmt_server, mgmt_oauth_client, keep=True)
    for _ in range(3):
        assert client.get("/api/profiles") == [1]
    mgmt_server.assert_auth_count(1, version="oauth")


def test_token_per_call(mgmt_server, mgmt_oauth_client, route):
    client = Client(mgmt_server, mgmt_oauth_client, keep=False)
    for _ in range(3):
        assert client.get("/api/profiles") == [1]


@pytest.mark.mgmtauth_sweep(faults=("revoke", "expire", "unavailable"), points=2)
def test_swept(mgmt_server, mgmt_oauth_client, route):
    client = Client(mgmt_server, mgmt_oauth_client, keep=True)
    assert client.get("/api/profiles") == [1]
    assert client.get("/api/profiles") == [1]
"""


def test_churn_warns_junit_counts_and_a_sweep_runs(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.TokenChurnWarning\n")
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess("--junitxml=report.xml", "-p", "no:randomly", "-rs")
    result.stdout.fnmatch_lines(
        [
            "*TokenChurnWarning: pytest-mgmtauth: token churn: OAuth client 'client1-*' was "
            "granted 2 new*",
            "  Timeline of OAuth client 'client1-*' (simulated time since the test started):",
            "    00:00:00  T1 issued by the OAuth 2.0 token endpoint for "
            "acme:main:tiq:2026-07:profiles:manage (#*), valid until 02:00:00",
            "*Fix: keep one OAuth access token per set of scopes*",
        ]
    )
    result.stdout.re_match_lines(
        [r"=+ mgmtauth sweep =+", r"  baseline +ok$", r"  revoke call +ok +ok$"],
        consecutive=False,
    )
    # unavailable@auth1: the client does not retry a 503 of the token endpoint.
    result.stdout.re_match_lines([r"  unavailable auth +FAIL +- *$"], consecutive=False)
    root = ET.parse(pytester.path / "report.xml").getroot()
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    assert properties["test_keeps_its_token"]["mgmtauth_grants"] == "1"
    assert properties["test_token_per_call"]["mgmtauth_churn"] == "2"


def test_strict_fails_churn_and_the_report_shows_the_timeline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess(
        "--mgmtauth-strict", "--mgmtauth-report", "-k", "not swept", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_token_per_call _*",
            "*mgmtauth timeline*",
            "*GET /api/profiles with T1 -> 200*",
        ]
    )


def test_oauth_options_from_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nmgmtauth_oauth_token_path = /portal/token\nmgmtauth_oauth_token_ttl = 600\n"
    )
    pytester.makepyfile(
        """
        from urllib.parse import quote_plus

        import pytest
        import requests


        def test_ini(mgmt_server, mgmt_oauth_client):
            answer = requests.post(
                mgmt_server.url + "/portal/token",
                data={"grant_type": "client_credentials"},
                auth=(quote_plus(mgmt_oauth_client.client_id),
                      quote_plus(mgmt_oauth_client.client_secret)),
            )
            assert answer.json()["expires_in"] == 600


        @pytest.mark.mgmtauth(oauth_token_path="token")
        def test_bad(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*'oauth_token_path' must be a path like '/oauth/token'*"])
