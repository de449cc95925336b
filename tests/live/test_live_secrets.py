"""No credential, token, cookie value or ``utk`` of a live run is written anywhere, in any
encoding: every artifact of two live runs (the second finds the service moved) and of the
ordinary run after them (which finds drift) is searched for every secret, in every
spelling the masking knows."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from live_support import API_KEY, CLIENT_SECRET, PASSWORD, StandIn, point_at, spellings

TESTS = """
import json
from urllib.parse import quote_plus

import pytest
import requests

pytestmark = pytest.mark.mgmtauth_live
SEEN = "seen-secrets.txt"


def _keep(*values):
    with open(SEEN, "a") as seen:
        for value in values:
            seen.write(json.dumps(value) + "\\n")


def _http():
    http = requests.Session()
    http.trust_env = False
    return http


def test_v1(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/urest/things", auth="v1").respond_with_json({})
    http = _http()
    login = http.post(mgmt_server.url + "/v1/login",
                      data={"username": mgmt_account.username, "password": mgmt_account.password})
    session = login.cookies.get("JSESSIONID")
    _keep(login.json()["utk"], session)
    cookie = {"Cookie": f"JSESSIONID={session}"}
    http.get(mgmt_server.url + "/urest/things", params={"utk": login.json()["utk"]}, headers=cookie)
    http.post(mgmt_server.url + "/v1/logout", headers=cookie)
    print(mgmt_server.requests)


def test_v2(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/things").respond_with_json({})
    mgmt_server.expect_refusals()
    http = _http()
    token = http.post(mgmt_server.url + "/v2/auth",
                      data={"username": mgmt_account.username, "key": mgmt_account.api_key}
                      ).json()["token"]
    _keep(token)
    http.get(mgmt_server.url + "/v2/things", headers={"Authorization": f"Bearer {token}"})
    # The key where a token belongs: the service refuses it, quoting nothing back here.
    http.get(mgmt_server.url + "/v2/things",
             headers={"Authorization": f"Bearer {mgmt_account.api_key}"})
    print(mgmt_server.requests)


def test_v3(mgmt_server, mgmt_account, mgmt_profile):
    body = _http().post(
        mgmt_server.url + "/v3/auth/accounts/{}/profiles/{}".format(*mgmt_profile),
        data={"username": mgmt_account.username, "key": mgmt_account.api_key}).json()
    _keep(body["token"])
    print(mgmt_server.requests)


def test_oauth(mgmt_server, mgmt_oauth_client):
    http = _http()
    basic = http.post(mgmt_server.url + "/oauth/token",
                      data={"grant_type": "client_credentials",
                            "scope": mgmt_oauth_client.scopes[0]},
                      auth=(quote_plus(mgmt_oauth_client.client_id),
                            quote_plus(mgmt_oauth_client.client_secret)))
    form = http.post(mgmt_server.url + "/oauth/token",
                     data={"grant_type": "client_credentials",
                           "client_id": mgmt_oauth_client.client_id,
                           "client_secret": mgmt_oauth_client.client_secret,
                           "scope": mgmt_oauth_client.scopes[0]})
    _keep(basic.json()["access_token"], form.json()["access_token"])
    print(mgmt_server.requests)


def test_scim(mgmt_server, mgmt_account, mgmt_profile):
    mgmt_server.route("GET", "/scim/v2/Users").respond_with_json({})
    http = _http()
    form = {"account": mgmt_profile[0], "profile": mgmt_profile[1],
            "username": mgmt_account.username, "key": mgmt_account.api_key}
    token = http.post(mgmt_server.url + "/v2/auth-long-lived/token", data=form
                      ).json()["access_token"]
    _keep(token)
    headers = {"Authorization": f"Bearer {token}", "X-Tealium-Account": mgmt_profile[0]}
    assert http.get(mgmt_server.url + "/scim/v2/Users", headers=headers).status_code == 200
    revoked = http.post(mgmt_server.url + "/v2/auth-long-lived/revoke",
                        data={"token": token, **form})
    assert (revoked.status_code, revoked.content) == (200, b"")
    print(mgmt_server.requests)
"""


@pytest.fixture
def artifacts(
    pytester: pytest.Pytester,
    seed_key: Callable[[pytest.Pytester], None],
    key_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[dict[str, str], list[str]]:
    """Every text two live runs and the ordinary run after them wrote, by name; and the
    secrets the service handed out in them."""
    seed_key(pytester)
    pytester.makepyfile(test_mod=TESTS)
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n")
    texts: dict[str, str] = {}
    shown = ("-p", "no:randomly", "-v", "-rA", "--mgmtauth-report")
    with StandIn(key_file, "none", "--throttle", "none") as service:
        point_at(monkeypatch, service)
        first = pytester.runpytest_inprocess(*shown, "--mgmtauth-live", "--junitxml=live1.xml")
    first.assert_outcomes(passed=5)
    texts["first live run"] = first.stdout.str() + first.stderr.str()
    # The service moves: the second run says what changed.
    with StandIn(key_file, "extra_key", "--throttle", "none", "--token-ttl", "3600") as moved:
        point_at(monkeypatch, moved)
        second = pytester.runpytest_inprocess(*shown, "--mgmtauth-live", "--junitxml=live2.xml")
    second.assert_outcomes(passed=5)
    texts["second live run"] = second.stdout.str() + second.stderr.str()
    assert "the service answers unlike its recording of" in texts["second live run"]
    point_at(monkeypatch, None)
    verified = pytester.runpytest_inprocess(*shown, "--junitxml=verify.xml")
    verified.assert_outcomes(passed=5)
    texts["ordinary run"] = verified.stdout.str() + verified.stderr.str()
    assert "DriftWarning" in texts["ordinary run"]
    for name in ("live1.xml", "live2.xml", "verify.xml", "mgmtauth_snapshots/test_mod.json"):
        texts[name] = (pytester.path / name).read_text("utf-8")
    handed_out = [
        json.loads(line)
        for line in (pytester.path / "seen-secrets.txt").read_text().splitlines()
        if line.strip()
    ]
    return texts, handed_out


def test_no_secret_of_a_live_run_is_written_anywhere_in_any_encoding(
    artifacts: tuple[dict[str, str], list[str]],
) -> None:
    texts, handed_out = artifacts
    # Three runs (two live), five tests: utk, session, v2 token, v3 token, two OAuth
    # tokens, a SCIM long-lived token, each.
    assert len(handed_out) == 21
    assert all(len(value) >= 16 for value in handed_out)
    secrets = [API_KEY, PASSWORD, CLIENT_SECRET, *handed_out]
    found = [
        (name, secret[:4] + "...", spelling)
        for secret in secrets
        for spelling in spellings(secret)
        for name, text in texts.items()
        if spelling in text
    ]
    assert found == []
    # The artifacts do hold what they are for (so the search above searched something).
    assert '"lifetime": 3600' in texts["mgmtauth_snapshots/test_mod.json"]
    assert "POST /v2/auth" in texts["ordinary run"]
    # The SCIM flow's host is among the published ones: its exchanges were forwarded.
    assert '"path": "/v2/auth-long-lived/revoke"' in texts["mgmtauth_snapshots/test_mod.json"]
    # The request logs printed quote the requests, the secrets masked to fingerprints.
    assert re.search(r"key=#[0-9a-f]{6}", texts["first live run"])
    assert re.search(r"password=#[0-9a-f]{6}", texts["second live run"])
