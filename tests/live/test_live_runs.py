"""What a live run does and refuses to do, seen as a user sees it (pytester), against a
stand-in for the service: which tests run, where credentials come from, what only the
fake can do, where requests go, and the stop at the first refused credential."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from live_support import API_KEY, USERNAME, StandIn, point_at, snapshot_of

HEAD = """
from urllib.parse import quote_plus

import pytest
import requests

def _http():
    http = requests.Session()
    http.trust_env = False
    return http

def _v2(mgmt_server, account):
    return _http().post(mgmt_server.url + "/v2/auth",
                        data={"username": account.username, "key": account.api_key})
"""


@pytest.fixture
def folder(
    pytester: pytest.Pytester, seed_key: Callable[[pytest.Pytester], None]
) -> pytest.Pytester:
    seed_key(pytester)
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n")
    return pytester


def _live(folder: pytest.Pytester, *args: str) -> pytest.RunResult:
    return folder.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-live", "-rs", *args)


def _forwarded(stand_in: StandIn, before: int) -> list[dict[str, object]]:
    return stand_in.requests_seen()[before:]


def test_without_the_flag_nothing_is_live_whatever_the_environment_holds(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        HEAD
        + """
@pytest.mark.mgmtauth_live
def test_it(mgmt_server, mgmt_account):
    assert not mgmt_server.live
    assert mgmt_account.username != "live.user@example.com"
    assert _v2(mgmt_server, mgmt_account).status_code == 200
    assert mgmt_server.auth_count() == 1
"""
    )
    before = len(stand_in.requests_seen())
    folder.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    assert _forwarded(stand_in, before) == []
    assert not (folder.path / "mgmtauth_snapshots").exists()


def test_a_live_run_runs_only_marked_tests_and_says_why_the_others_skip(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        HEAD
        + """
@pytest.mark.mgmtauth_live
def test_marked(mgmt_server, mgmt_account):
    assert mgmt_server.live
    assert _v2(mgmt_server, mgmt_account).status_code == 200

def test_not_marked(mgmt_server):
    raise AssertionError("ran")
"""
    )
    before = len(stand_in.requests_seen())
    result = _live(folder)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1[]] *.py: not marked mgmtauth_live: a live run (--mgmtauth-live) runs only*"]
    )
    seen = _forwarded(stand_in, before)
    assert [(r["method"], r["path"], r["host"]) for r in seen] == [
        ("POST", "/v2/auth", "api.tealiumiq.com")
    ]


def test_the_fixtures_give_the_live_credentials(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        """
import pytest

pytestmark = pytest.mark.mgmtauth_live

def test_it(mgmt_account, mgmt_oauth_client, mgmt_profile):
    assert (mgmt_account.username, mgmt_account.api_key) == (USERNAME, API_KEY)
    assert mgmt_oauth_client.client_id == "live-client-7f3a"
    assert mgmt_oauth_client.scopes == ("acme:main:tiq:2026-07:profiles:manage",)
    assert tuple(mgmt_profile) == ("acme", "main")
    assert "Lk+" not in repr(mgmt_account)
""".replace("USERNAME", repr(USERNAME)).replace("API_KEY", repr(API_KEY))
    )
    _live(folder).assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("unset", "body", "reason"),
    [
        (
            "MGMTAUTH_LIVE_USERNAME",
            "def test_it(mgmt_account): pass",
            "MGMTAUTH_LIVE_USERNAME not set: a live run takes its credentials from the environment",
        ),
        (
            "MGMTAUTH_LIVE_PASSWORD",
            "def test_it(mgmt_account): mgmt_account.password",
            "MGMTAUTH_LIVE_PASSWORD not set",
        ),
        (
            "MGMTAUTH_LIVE_API_KEY",
            "def test_it(mgmt_account): mgmt_account.api_key",
            "MGMTAUTH_LIVE_API_KEY not set",
        ),
        (
            "MGMTAUTH_LIVE_CLIENT_SECRET",
            "def test_it(mgmt_oauth_client): pass",
            "MGMTAUTH_LIVE_CLIENT_SECRET not set",
        ),
        (
            "MGMTAUTH_LIVE_PROFILE",
            "def test_it(mgmt_profile): pass",
            "MGMTAUTH_LIVE_PROFILE not set",
        ),
    ],
)
def test_a_test_that_needs_an_unset_variable_is_skipped_naming_it(
    folder: pytest.Pytester,
    stand_in: StandIn,
    monkeypatch: pytest.MonkeyPatch,
    unset: str,
    body: str,
    reason: str,
) -> None:
    point_at(monkeypatch, stand_in)
    monkeypatch.delenv(unset)
    folder.makepyfile(f"import pytest\n\npytestmark = pytest.mark.mgmtauth_live\n\n{body}\n")
    result = _live(folder)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED * test_*.py:*: {reason}*"])


@pytest.mark.parametrize(
    ("call", "named"),
    [
        ("mgmt_server.add_account()", "mgmt_server.add_account is what only the fake can do"),
        ("mgmt_server.add_client()", "mgmt_server.add_client is what only the fake can do"),
        ("mgmt_server.fail_next()", "mgmt_server.fail_next is what only the fake can do"),
        ("mgmt_server.lock(mgmt_account)", "mgmt_server.lock is what only the fake can do"),
        ("mgmt_server.expire('x')", "mgmt_server.expire is what only the fake can do"),
        ("mgmt_server.revoke('x')", "mgmt_server.revoke is what only the fake can do"),
        ("mgmt_server.schedule_fault('fail', at=1)", "mgmt_server.schedule_fault is what only"),
        ("mgmt_clock.advance(seconds=1)", "mgmt_clock.advance moves the fake's clock"),
        ("mgmt_server.auth_count()", "mgmt_server.auth_count reads the fake's timeline"),
        ("mgmt_server.assert_auth_count(1)", "mgmt_server.assert_auth_count reads the fake's"),
    ],
)
def test_what_only_the_fake_can_do_skips_naming_the_call(
    folder: pytest.Pytester,
    stand_in: StandIn,
    monkeypatch: pytest.MonkeyPatch,
    call: str,
    named: str,
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        "import pytest\n\n@pytest.mark.mgmtauth_live\n"
        f"def test_it(mgmt_server, mgmt_account, mgmt_clock):\n    {call}\n"
        "    raise AssertionError('went on')\n"
    )
    result = _live(folder)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [f"SKIPPED * test_*.py:*: {named}*skipped in a live run (--mgmtauth-live)"]
    )


def test_a_sweep_is_skipped_in_a_live_run(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        "import pytest\n\n@pytest.mark.mgmtauth_live\n"
        "@pytest.mark.mgmtauth_sweep(faults=('expire',), points=2)\n"
        "def test_it(mgmt_server):\n    pass\n"
    )
    result = _live(folder)
    result.assert_outcomes(passed=1, skipped=2)  # the run without a fault, live
    result.stdout.fnmatch_lines(["*a sweep point injects faults, which only the fake can do*"])


def test_a_routes_canned_answer_is_not_used(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        HEAD
        + """
@pytest.mark.mgmtauth_live
def test_it(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/things").respond_with_json({"canned": True})
    token = _v2(mgmt_server, mgmt_account).json()["token"]
    answer = _http().get(mgmt_server.url + "/v2/things",
                         headers={"Authorization": f"Bearer {token}"})
    assert answer.json() == {"ok": True}  # the stand-in's, not the canned one
"""
    )
    _live(folder).assert_outcomes(passed=1)


def test_the_snapshot_is_keyed_by_test_id_and_stamped(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        test_keyed=HEAD
        + """
@pytest.mark.mgmtauth_live
class TestGroup:
    @pytest.mark.parametrize("n", [1])
    def test_it(self, mgmt_server, mgmt_account, n):
        _v2(mgmt_server, mgmt_account)
"""
    )
    result = _live(folder)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*= mgmtauth live =*", "1 test(s) recorded against the service into 1 snapshot(s):"]
    )
    from importlib.metadata import version

    record = snapshot_of(folder.path, "test_keyed")["tests"]["TestGroup::test_it[1]"]
    assert record["plugin_version"] == version("pytest-mgmtauth")
    assert len(record["recorded"]) == 10  # YYYY-MM-DD, the run's day
    assert [e["path"] for e in record["exchanges"]] == ["/v2/auth"]


def test_a_second_live_run_says_what_changed_since_the_first(
    folder: pytest.Pytester, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder.makepyfile(
        HEAD
        + """
@pytest.mark.mgmtauth_live
def test_it(mgmt_server, mgmt_account):
    _v2(mgmt_server, mgmt_account)
"""
    )
    with StandIn(key_file) as before:
        point_at(monkeypatch, before)
        _live(folder).assert_outcomes(passed=1)
    with StandIn(key_file, "none", "--token-ttl", "3600") as after:
        point_at(monkeypatch, after)
        result = _live(folder)
    result.assert_outcomes(passed=1)
    out = " ".join(result.stdout.str().split())
    assert "the service answers unlike its recording of" in out
    assert "body.token.jwt.lifetime: it answered 1800, now 3600" in out


def test_the_first_refused_credential_stops_the_run_and_nothing_more_is_forwarded(
    folder: pytest.Pytester, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder.makepyfile(
        HEAD
        + """
pytestmark = pytest.mark.mgmtauth_live

def test_a_wrong_key(mgmt_server, mgmt_account):
    http = _http()
    for _ in range(3):  # a client that retries a refusal: only the first is forwarded
        http.post(mgmt_server.url + "/v2/auth",
                  data={"username": mgmt_account.username, "key": "wrong"})

def test_after(mgmt_server, mgmt_account):
    _v2(mgmt_server, mgmt_account)
"""
    )
    with StandIn(key_file) as service:
        point_at(monkeypatch, service)
        result = _live(folder)
        seen = service.requests_seen()
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = " ".join(result.stdout.str().split())
    assert (
        "Interrupted: pytest-mgmtauth: the service refused the live credentials "
        "(1401 (401) at POST /v2/auth); the live run stopped here. Check the "
        "MGMTAUTH_LIVE_* variables before you run it again: the service locks an account "
        "after repeated failed logins" in out
    )
    assert len(seen) == 1


def test_only_the_services_published_hosts_are_reached(
    folder: pytest.Pytester, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder.makepyfile(
        HEAD
        + """
@pytest.mark.mgmtauth_live
def test_it(mgmt_server, mgmt_account, mgmt_profile):
    body = _http().post(
        mgmt_server.url + "/v3/auth/accounts/{}/profiles/{}".format(*mgmt_profile),
        data={"username": mgmt_account.username, "key": mgmt_account.api_key}).json()
    answer = _http().get(f"http://{body['host']}/v3/things/accounts/acme/profiles/main",
                         headers={"Authorization": "Bearer " + body["token"]})
    assert answer.status_code == 403
    print(answer.json()["message"])
"""
    )
    # The stand-in names a region host outside the service's domains.
    with StandIn(key_file, "none", "--v3-host", "region.example.net") as service:
        point_at(monkeypatch, service)
        result = _live(folder, "-s")
        seen = service.requests_seen()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*not forwarded to region.example.net: a live run reaches only the service's*",
            "*test_it: not recorded: a request was not forwarded to the service: "
            "GET /v3/things/accounts/acme/profiles/main -> 403",
        ]
    )
    assert [r["path"] for r in seen] == ["/v3/auth/accounts/acme/profiles/main"]


@pytest.mark.parametrize("https", [False, True])
def test_tls_is_verified_against_the_system_store_never_the_fakes_test_ca(
    folder: pytest.Pytester,
    stand_in: StandIn,
    monkeypatch: pytest.MonkeyPatch,
    https: bool,
) -> None:
    point_at(monkeypatch, stand_in)
    monkeypatch.delenv("MGMTAUTH_LIVE_CAFILE")  # the stand-in's CA is in no system store
    folder.makepyfile(
        HEAD
        + f"""
@pytest.mark.mgmtauth_live
@pytest.mark.mgmtauth(https={https})
def test_it(mgmt_server, mgmt_account):
    answer = _http().post(mgmt_server.url + "/v2/auth", verify=mgmt_server.ca_bundle or True,
                          data={{"username": mgmt_account.username, "key": mgmt_account.api_key}})
    assert answer.status_code == 502
    print(answer.json()["message"])
"""
    )
    result = _live(folder, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*the live run could not reach the service at https://127.0.0.1:*"
            "CERTIFICATE_VERIFY_FAILED*",
            "*test_it: not recorded: a request was not forwarded to the service: "
            "POST /v2/auth -> 502",
        ]
    )
    assert not (folder.path / "mgmtauth_snapshots").exists()


def test_an_upstream_that_is_not_an_https_url_is_a_usage_error(
    folder: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MGMTAUTH_LIVE_UPSTREAM", "http://127.0.0.1:1")
    folder.makepyfile("def test_it(): pass\n")
    result = _live(folder)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*MGMTAUTH_LIVE_UPSTREAM must be an https URL of a host, like https://127.0.0.1:8443*"]
    )


def test_the_live_report_travels_in_junit_properties_without_secrets(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        HEAD + "\n@pytest.mark.mgmtauth_live\ndef test_it(mgmt_server, mgmt_account):\n"
        "    _v2(mgmt_server, mgmt_account)\n"
    )
    _live(folder, "--junitxml=out.xml").assert_outcomes(passed=1)
    xml = (folder.path / "out.xml").read_text()
    assert "mgmtauth_live" in xml
    entry = json.loads(
        xml.split('name="mgmtauth_live" value="')[1].split('"')[0].replace("&quot;", '"')
    )
    assert entry["exchanges"] == 1


def test_a_live_run_records_a_broken_snapshot_anew(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        test_broken=HEAD + "\n@pytest.mark.mgmtauth_live\ndef test_it(mgmt_server, mgmt_account):\n"
        "    _v2(mgmt_server, mgmt_account)\n"
    )
    (folder.path / "mgmtauth_snapshots").mkdir()
    (folder.path / "mgmtauth_snapshots" / "test_broken.json").write_text("{not json")
    point_at(monkeypatch, None)
    ordinary = folder.runpytest_inprocess("-p", "no:randomly")
    ordinary.stdout.fnmatch_lines(
        ["*is not JSON*record it anew from the service with pytest --mgmtauth-live*"]
    )
    point_at(monkeypatch, stand_in)
    _live(folder).assert_outcomes(passed=1)
    assert list(snapshot_of(folder.path, "test_broken")["tests"]) == ["test_it"]


def test_a_not_recorded_note_masks_a_secret_in_the_path(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    monkeypatch.delenv("MGMTAUTH_LIVE_CAFILE")  # the request is answered by the fake: 502
    folder.makepyfile(
        HEAD
        + """
@pytest.mark.mgmtauth_live
def test_it(mgmt_server, mgmt_account):
    # The key where no key belongs: in the path.
    _http().get(mgmt_server.url + "/v2/items/" + quote_plus(mgmt_account.api_key))
"""
    )
    result = _live(folder, "--junitxml=out.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_it: not recorded: a request was not forwarded*-> 502"])
    for text in (result.stdout.str(), (folder.path / "out.xml").read_text()):
        for spelling in (API_KEY, quote_plus(API_KEY), quote(API_KEY, safe="")):
            assert spelling not in text
