"""Every difference injected into the stand-in is found by the run after the live one,
and named, with the option that makes the fake answer so where one exists: the service
is ``stand_in.py`` with an option (a 3600 s token lifetime, another token path, another
region host) or a
difference made on the wire (an extra or a missing body key, RS256, 403 for 401, a
renamed cookie)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from live_support import StandIn, point_at

TESTS = """
from urllib.parse import quote_plus

import pytest
import requests

pytestmark = pytest.mark.mgmtauth_live


def _http():
    http = requests.Session()
    http.trust_env = False
    return http


def test_v2(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/things").respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    http = _http()
    http.post(mgmt_server.url + "/v2/auth",
              data={"username": mgmt_account.username, "key": mgmt_account.api_key})
    http.get(mgmt_server.url + "/v2/things", headers={"Authorization": "Bearer nope"})


def test_v3(mgmt_server, mgmt_account, mgmt_profile):
    _http().post(
        mgmt_server.url + "/v3/auth/accounts/{}/profiles/{}".format(*mgmt_profile),
        data={"username": mgmt_account.username, "key": mgmt_account.api_key})


def test_v1(mgmt_server, mgmt_account):
    _http().post(mgmt_server.url + "/v1/login",
                 data={"username": mgmt_account.username, "password": mgmt_account.password})


def _token(mgmt_server, client, path):
    _http().post(mgmt_server.url + path,
                 data={"grant_type": "client_credentials", "scope": client.scopes[0]},
                 auth=(quote_plus(client.client_id), quote_plus(client.client_secret)))


def test_oauth(mgmt_server, mgmt_oauth_client):
    _token(mgmt_server, mgmt_oauth_client, "/oauth2/token")


def test_oauth_default_path(mgmt_server, mgmt_oauth_client):
    _token(mgmt_server, mgmt_oauth_client, "/oauth/token")
"""


@pytest.mark.parametrize(
    ("difference", "options", "expected"),
    [
        (
            "none",
            ("--token-ttl", "3600"),
            "POST /v2/auth #1: body.token.jwt.lifetime: the service answered 3600, the fake "
            "1800 (the option that makes the fake answer so: token_ttl)",
        ),
        (
            "none",
            ("--oauth-token-path", "/oauth2/token"),
            "POST /oauth2/token #1: status: the service answered 200, the fake 404",
        ),
        (
            "extra_key",
            (),
            "POST /v2/auth #1: body.expires_in: the service answered 1800, the fake (absent)",
        ),
        (
            "rs256",
            (),
            'POST /v2/auth #1: body.token.jwt.header.alg: the service answered "RS256", the '
            'fake "RS512"',
        ),
        (
            "no_host",
            (),
            'body.host: the service answered (absent), the fake "us-west-2-platform.tealiumapis'
            '.com" (no option makes the fake answer so)',
        ),
        (
            "none",
            ("--v3-host", "eu-central-1-platform.tealiumapis.com"),
            'body.host: the service answered "eu-central-1-platform.tealiumapis.com", the fake '
            '"us-west-2-platform.tealiumapis.com" (the option that makes the fake answer so: '
            "v3_host)",
        ),
        (
            "no_scope",
            (),
            "POST /oauth/token #1: body.scope: the service answered (absent), the fake <string> "
            "(no option makes the fake answer so)",
        ),
        (
            "status_403",
            (),
            "GET /v2/things #1: status: the service answered 403, the fake 401",
        ),
        (
            "cookie",
            (),
            "POST /v1/login #1: headers.set-cookie: SESSIONID from the service only, JSESSIONID "
            "from the fake only",
        ),
    ],
)
def test_a_difference_in_the_service_is_found_and_named(
    pytester: pytest.Pytester,
    seed_key: Callable[[pytest.Pytester], None],
    key_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    difference: str,
    options: tuple[str, ...],
    expected: str,
) -> None:
    seed_key(pytester)
    pytester.makepyfile(test_mod=TESTS)
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n")
    with StandIn(key_file, difference, "--throttle", "none", *options) as service:
        point_at(monkeypatch, service)
        recorded = pytester.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-live")
        recorded.assert_outcomes(passed=5)
    point_at(monkeypatch, None)
    verified = pytester.runpytest_inprocess("-p", "no:randomly")
    verified.assert_outcomes(passed=5)
    out = " ".join(verified.stdout.str().split())
    assert "DriftWarning" in out
    assert expected in out
    if "--oauth-token-path" in options:
        assert "oauth_token_path" in out
