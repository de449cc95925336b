"""The hosts of the service without interception: the v3 ``host`` is a second address
of the fake, a v3 client that ignores it is refused with the diagnosis and a
``wrong_host`` finding (a warning, an error under strict), requests at the wrong host are
404 naming where they belong; and the public surface of hosts (``hosts``, ``env``,
``route(host=)``, ``v3_host``)."""

from __future__ import annotations

import os

import pytest
import requests

from pytest_mgmtauth import Account, MgmtServer, Options, WrongHost
from pytest_mgmtauth._service.flows.registry import service_hosts

DIAGNOSIS = (
    "this call went to the v3 auth host; send v3 API calls to the `host` of the auth "
    "answer ({host})"
)
SCOPED = "/v3/things/accounts/acme/profiles/main"


def _v3_auth(server: MgmtServer, account: Account) -> dict[str, str]:
    answer = requests.post(
        f"{server.url}/v3/auth/accounts/acme/profiles/main",
        data={"username": account.username, "key": account.api_key},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, str] = answer.json()
    return body


def test_a_v3_client_that_follows_host_works_and_one_that_ignores_it_is_refused(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", SCOPED).respond_with_json({"ok": True})
    body = _v3_auth(mgmt_server, mgmt_account)
    bearer = {"Authorization": f"Bearer {body['token']}"}
    assert f"http://{body['host']}" == mgmt_server.region_url != mgmt_server.url
    followed = requests.get(f"http://{body['host']}{SCOPED}", headers=bearer, timeout=10)
    assert followed.status_code == 200
    ignored = requests.get(f"{mgmt_server.url}{SCOPED}", headers=bearer, timeout=10)
    assert ignored.status_code == 404
    assert ignored.json() == {"message": "Not Found"}  # v3's envelope
    assert DIAGNOSIS.format(host=body["host"]) in ignored.headers["X-Mgmtauth-Diagnosis"]
    [wrong] = [e for e in mgmt_server.events if isinstance(e, WrongHost)]
    assert (wrong.credential, wrong.expected, wrong.status) == ("T1", body["host"], 404)
    found = mgmt_server.teardown_findings()
    assert [(f.kind, f.username) for f in found] == [("wrong_host", mgmt_account.username)]
    mgmt_server._checked.add("wrong_host")  # this test expects it: no warning at teardown


def test_v2_auth_at_the_region_address_is_refused_naming_the_auth_address(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    answer = requests.post(
        f"{mgmt_server.region_url}/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        timeout=10,
    )
    assert answer.status_code == 404
    address = mgmt_server.url.removeprefix("http://")
    region = mgmt_server.region_url.removeprefix("http://")
    assert (
        f"this call went to {region}, which does not serve /v2/auth; send it to {address}"
        in answer.json()["message"]
    )
    assert f"POST /v2/auth at {region} -> 404 wrong host" in mgmt_server.timeline()
    assert mgmt_server.auth_count() == 0
    mgmt_server._checked.add("wrong_host")


def test_v2_and_v1_calls_at_the_region_address_are_refused(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/v2/things")
    mgmt_server.route("GET", "/v1/things")
    for path in ("/v2/things", "/v1/things"):
        answer = requests.get(mgmt_server.region_url + path, timeout=10)
        assert answer.status_code == 404, path
        assert "which does not serve" in answer.json()["message"]
    mgmt_server._checked.add("wrong_host")


@pytest.mark.mgmtauth(intercept=True)
def test_the_hosts_are_the_same_with_and_without_interception(mgmt_server: MgmtServer) -> None:
    four = (
        "api.tealiumiq.com",
        "platform.tealiumapis.com",
        "my.tealiumiq.com",
        "us-west-2-platform.tealiumapis.com",
    )
    assert set(four) <= set(mgmt_server.hosts)  # a further flow may add its own
    assert mgmt_server.hosts == service_hosts(Options())  # as without interception


def test_hosts_without_interception_and_no_env(mgmt_server: MgmtServer) -> None:
    assert mgmt_server.hosts[-1] == "us-west-2-platform.tealiumapis.com"
    assert mgmt_server.proxy_url is None
    with pytest.raises(ValueError, match="intercept=True"):
        mgmt_server.env  # noqa: B018


def test_route_host_must_be_a_host_of_the_service(mgmt_server: MgmtServer) -> None:
    with pytest.raises(ValueError, match="route\\(\\): host must be one of the service's hosts"):
        mgmt_server.route("GET", "/v2/things", host="example.com")


@pytest.mark.mgmtauth(intercept=True)
def test_a_route_with_host_answers_on_that_host_only(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/urest/things", auth="v1", host="my.tealiumiq.com").respond_with_json(
        {"ok": True}
    )
    login = requests.post(
        "https://api.tealiumiq.com/v1/login",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
        timeout=10,
    )
    assert login.status_code == 200
    session = login.headers["Set-Cookie"].split(";")[0]
    query = f"/urest/things?utk={login.json()['utk']}"
    mine = requests.get(f"https://my.tealiumiq.com{query}", headers={"Cookie": session}, timeout=10)
    assert mine.status_code == 200
    other = requests.get(
        f"https://api.tealiumiq.com{query}", headers={"Cookie": session}, timeout=10
    )
    assert other.status_code == 404
    assert (
        "this call went to api.tealiumiq.com, which does not serve v1 API calls; send it "
        "to my.tealiumiq.com" in other.json()["message"]
    )
    text = mgmt_server.timeline()
    assert "GET /urest/things at my.tealiumiq.com with S1 -> 200" in text
    assert "GET /urest/things at api.tealiumiq.com with S1 -> 404 wrong host" in text
    mgmt_server._checked.add("wrong_host")


@pytest.mark.mgmtauth(intercept=True, v3_host="eu-central-1-platform.tealiumapis.com")
def test_v3_host_is_the_host_of_v3_answers_under_interception(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", SCOPED).respond_with_json({"ok": True})
    answer = requests.post(
        "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        timeout=10,
    )
    body = answer.json()
    assert body["host"] == "eu-central-1-platform.tealiumapis.com"
    assert mgmt_server.hosts[-1] == body["host"]
    bearer = {"Authorization": f"Bearer {body['token']}"}
    assert requests.get(f"https://{body['host']}{SCOPED}", headers=bearer, timeout=10).ok
    ignored = requests.get(f"https://platform.tealiumapis.com{SCOPED}", headers=bearer, timeout=10)
    assert ignored.status_code == 404
    assert ignored.json() == {"message": "Not Found"}  # v3's envelope
    assert DIAGNOSIS.format(host=body["host"]) in ignored.headers["X-Mgmtauth-Diagnosis"]
    mgmt_server._checked.add("wrong_host")


@pytest.mark.mgmtauth(intercept=True)
def test_v1_calls_of_sso_customers_at_sso_tealiumiq_com(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # Public v1 clients of SSO customers call sso.tealiumiq.com/urest/... after login.
    assert "sso.tealiumiq.com" in mgmt_server.hosts
    mgmt_server.route("GET", "/urest/things", auth="v1").respond_with_json({"ok": True})
    login = requests.post(
        "https://api.tealiumiq.com/v1/login",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
        timeout=10,
    )
    session = login.headers["Set-Cookie"].split(";")[0]
    call = requests.get(
        f"https://sso.tealiumiq.com/urest/things?utk={login.json()['utk']}",
        headers={"Cookie": session},
        timeout=10,
    )
    assert (call.status_code, call.json()) == (200, {"ok": True})
    assert "GET /urest/things at sso.tealiumiq.com with S1 -> 200" in mgmt_server.timeline()


@pytest.mark.mgmtauth(intercept=True)
def test_v3_calls_at_the_global_host_are_refused_naming_both_pages(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", SCOPED).respond_with_json({"ok": True})
    body = requests.post(
        "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        timeout=10,
    ).json()
    bearer = {"Authorization": f"Bearer {body['token']}"}
    globally = requests.get(f"https://platform.tealiumapis.com{SCOPED}", headers=bearer, timeout=10)
    assert globally.status_code == 404
    assert globally.json() == {"message": "Not Found"}
    message = globally.headers["X-Mgmtauth-Diagnosis"]
    assert '"must be used"' in message
    assert "the iQ Profile API pages' examples call https://platform.tealiumapis.com" in message
    assert "v3_global_host=True" in message
    mgmt_server._checked.add("wrong_host")


@pytest.mark.mgmtauth(intercept=True, v3_global_host=True)
def test_v3_global_host_accepts_v3_calls_at_the_global_host(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # The iQ Profile API pages' examples: https://platform.tealiumapis.com/v3/tiq/...
    mgmt_server.route("GET", SCOPED).respond_with_json({"ok": True})
    body = requests.post(
        "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        timeout=10,
    ).json()
    assert body["host"] == "us-west-2-platform.tealiumapis.com"  # still the region host
    bearer = {"Authorization": f"Bearer {body['token']}"}
    for host in ("platform.tealiumapis.com", body["host"]):
        call = requests.get(f"https://{host}{SCOPED}", headers=bearer, timeout=10)
        assert (call.status_code, call.json()) == (200, {"ok": True}), host
    assert "wrong host" not in mgmt_server.timeline()


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


IGNORES_HOST = """
import os
import urllib.error
import urllib.request

import pytest
import requests


def run(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v3/things/accounts/acme/profiles/main")
    body = requests.post(
        mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()
    # Ignores body["host"]: calls the address it authenticated at.
    return requests.get(
        mgmt_server.url + "/v3/things/accounts/acme/profiles/main",
        headers={"Authorization": "Bearer " + body["token"]},
    ).status_code


def test_warns(mgmt_server, mgmt_account):
    assert run(mgmt_server, mgmt_account) == 404


@pytest.mark.mgmtauth(strict=True)
def test_strict(mgmt_server, mgmt_account):
    assert run(mgmt_server, mgmt_account) == 404


def status(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.mgmtauth(intercept=True)
def test_intercepts(mgmt_server):
    assert os.environ["HTTPS_PROXY"] == mgmt_server.proxy_url
    # urlopen's global opener, built now, holds this test's proxy.
    assert status("http://api.tealiumiq.com/nowhere") == 404


def test_after(mgmt_server):
    assert os.environ.get("HTTPS_PROXY") == os.environ.get("MGMTAUTH_OUTER_PROXY")
    # Not sent to the last test's proxy (which would answer 503: no test bound there).
    assert status(mgmt_server.url + "/nowhere") == 404
"""


def test_wrong_host_warns_by_default_fails_under_strict_and_the_environment_is_restored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MGMTAUTH_OUTER_PROXY", os.environ.get("HTTPS_PROXY", ""))
    if "HTTPS_PROXY" not in os.environ:
        monkeypatch.setenv("HTTPS_PROXY", "")
    pytester.makepyfile(test_user=IGNORES_HOST)
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.WrongHostWarning\n")
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, errors=1)
    out = result.stdout.str()
    assert "WrongHostWarning" in out
    assert "ERROR at teardown of test_strict" in out
    assert "went to a host that does not serve it" in out
    assert "this call went to the v3 auth host" in out
