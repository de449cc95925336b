"""Every injected difference is found and named, with its option where one exists. The
"service" is the fake itself recorded with other options (a 3600 s token lifetime,
another token path), or its recording edited where no option makes the fake answer so
(RS256 for RS512, a missing ``host``, an extra body key, 403 for 401, a renamed cookie)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RECORDER = (Path(__file__).with_name("recorder.py")).read_text()

TESTS = """
import requests

def _http():
    http = requests.Session()
    http.trust_env = False
    return http

def test_v2(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/things").respond_with_json([])
    mgmt_server.expect_refusals()
    http = _http()
    http.post(mgmt_server.url + "/v2/auth",
              data={"username": mgmt_account.username, "key": mgmt_account.api_key})
    http.get(mgmt_server.url + "/v2/things", headers={"Authorization": "Bearer nope"})

def test_v3(mgmt_server, mgmt_account):
    _http().post(mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
                 data={"username": mgmt_account.username, "key": mgmt_account.api_key})

def test_oauth(mgmt_server, mgmt_oauth_client):
    _http().post(mgmt_server.url + "/oauth2/token",
                 data={"grant_type": "client_credentials",
                       "scope": "acme:main:tiq:2026-07:profiles:manage"},
                 auth=(mgmt_oauth_client.client_id, mgmt_oauth_client.client_secret))
"""

INI = "[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n"
SERVICE_OPTIONS = "mgmtauth_token_ttl = 3600\nmgmtauth_oauth_token_path = /oauth2/token\n"


@pytest.fixture
def snapshot(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeconftest(RECORDER)
    pytester.makepyfile(test_mod=TESTS)
    pytester.makeini(INI + SERVICE_OPTIONS)  # the "service" answers with these
    monkeypatch.setenv("MGMTAUTH_TEST_RECORD", "1")
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=3)
    monkeypatch.delenv("MGMTAUTH_TEST_RECORD")
    pytester.makeini(INI)  # the fake, with its defaults
    return pytester.path / "mgmtauth_snapshots" / "test_mod.json"


def _edit(path: Path, test: str, index: int, change: dict[str, object]) -> None:
    data = json.loads(path.read_text())
    record = data["tests"][test]["exchanges"][index]
    for dotted, value in change.items():
        *parents, last = dotted.split(".")
        place = record
        for part in parents:
            place = place[part]
        if value is None:
            del place[last]
        else:
            place[last] = value
    path.write_text(json.dumps(data))


def _drift(pytester: pytest.Pytester) -> str:
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    return result.stdout.str()


def test_a_longer_lifetime_and_another_token_path_name_their_options(pytester, snapshot) -> None:
    out = _drift(pytester)
    assert (
        "POST /v2/auth #1: body.token.jwt.lifetime: the service answered 3600, the fake 1800 "
        "(the option that makes the fake answer so: token_ttl)" in out
    )
    assert "POST /oauth2/token #1: status: the service answered 200, the fake 404" in out
    assert "oauth_token_path" in out


def test_another_region_host_names_v3_host_and_the_fakes_address_is_no_drift(
    pytester, snapshot
) -> None:
    recorded = json.loads(snapshot.read_text())["tests"]["test_v3"]["exchanges"][0]
    # Recorded from the fake's address (no interception): as the host it stands for.
    assert recorded["body"]["host"] == "us-west-2-platform.tealiumapis.com"
    _edit(snapshot, "test_v3", 0, {"body.host": "eu-central-1-platform.tealiumapis.com"})
    out = " ".join(_drift(pytester).split())
    assert (
        "POST /v3/auth/accounts/{account}/profiles/{profile} #1: body.host: the service "
        'answered "eu-central-1-platform.tealiumapis.com", the fake '
        '"us-west-2-platform.tealiumapis.com" (the option that makes the fake answer so: '
        "v3_host)" in out
    )


@pytest.mark.parametrize(
    ("test", "index", "change", "expected"),
    [
        (
            "test_v2",
            0,
            {"body.token.jwt.header.alg": "RS256"},
            'body.token.jwt.header.alg: the service answered "RS256", the fake "RS512"',
        ),
        (
            "test_v3",
            0,
            {"body.host": None},
            'body.host: the service answered (absent), the fake "us-west-2-platform.tealiumapis'
            '.com" (no option makes the fake answer so)',
        ),
        (
            "test_v3",
            0,
            {"body.region": "string"},
            "body.region: the service answered <string>, the fake (absent)",
        ),
        (
            "test_v2",
            1,
            {"status": 403},
            "GET /v2/things #1: status: the service answered 403, the fake 401",
        ),
        (
            "test_v2",
            0,
            {"headers.set-cookie.rememberMe": None, "headers.set-cookie.remember": ["path=/"]},
            "POST /v2/auth #1: headers.set-cookie: remember from the service only, "
            "rememberMe from the fake only",
        ),
    ],
)
def test_a_difference_without_an_option_is_found_and_named(
    pytester, snapshot, test, index, change, expected
) -> None:
    _edit(snapshot, test, index, change)
    out = " ".join(_drift(pytester).split())
    assert expected in out
