"""The drift check of an ordinary run: a test recorded in its module's snapshot is
compared with it at teardown; a difference is a DriftWarning naming the exchange, the
field, both values, the recording's date and the option (strict: a failure).

The snapshot is written by the recording path a live run uses (``write_record``), here
from the fake's own answers, so that this test reaches nothing but loopback."""

from __future__ import annotations

import json

import pytest

CONFTEST = """
import os
import pytest
from pytest_mgmtauth._glue.drift import write_record

@pytest.fixture
def recorded(request, mgmt_server):
    kept = mgmt_server.record_exchanges() if os.environ.get("RECORD") else None
    yield
    if kept is not None:
        write_record(request.node, kept, today="2026-11-28")
"""

TESTS = """
import requests

def test_v2(recorded, mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/things").respond_with_json([1])
    http = requests.Session()
    http.trust_env = False
    token = http.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    assert http.get(
        mgmt_server.url + "/v2/things", headers={"Authorization": "Bearer " + token}
    ).json() == [1]
    bad = http.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": "wrong"},
    )
    assert bad.status_code == 401

def test_without_snapshot(mgmt_server):
    pass
"""

INI = "[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n"


@pytest.fixture
def recorded_module(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_mod=TESTS)
    monkeypatch.setenv("RECORD", "1")
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=2)
    monkeypatch.delenv("RECORD")
    return pytester.path / "mgmtauth_snapshots" / "test_mod.json"


def test_the_recording_is_keyed_by_test_and_holds_no_secret(recorded_module) -> None:
    data = json.loads(recorded_module.read_text())
    assert data["format"] == 1
    assert list(data["tests"]) == ["test_v2"]
    entry = data["tests"]["test_v2"]
    assert entry["recorded"] == "2026-11-28"
    assert entry["plugin_version"]
    assert [
        (e["method"], e["path"], e.get("status"), e.get("auth")) for e in entry["exchanges"]
    ] == [
        ("POST", "/v2/auth", 200, None),
        ("GET", "/v2/things", None, "accepted"),
        ("POST", "/v2/auth", 401, None),
    ]
    assert entry["exchanges"][0]["body"]["token"]["jwt"]["lifetime"] == 1800
    assert "wrong" not in recorded_module.read_text()


def test_the_fake_against_its_own_recording_is_no_drift(pytester, recorded_module) -> None:
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert "DriftWarning" not in result.stdout.str()


def _recorded_lifetime(path, seconds: int) -> None:
    data = json.loads(path.read_text())
    data["tests"]["test_v2"]["exchanges"][0]["body"]["token"]["jwt"]["lifetime"] = seconds
    path.write_text(json.dumps(data))


def test_a_difference_is_a_drift_warning_naming_field_values_date_and_option(
    pytester, recorded_module
) -> None:
    _recorded_lifetime(recorded_module, 3600)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "DriftWarning" in out
    assert "recording of 2026-11-28" in out
    assert (
        "POST /v2/auth #1: body.token.jwt.lifetime: the service answered 3600, the fake 1800" in out
    )
    assert "token_ttl" in out
    # The option named makes the fake answer like the service: no drift then.
    pytester.makeini(INI + "mgmtauth_token_ttl = 3600\n")
    again = pytester.runpytest_inprocess("-p", "no:randomly")
    assert "DriftWarning" not in again.stdout.str()


def test_strict_fails_on_drift_naming_the_kind_and_what_to_do(pytester, recorded_module) -> None:
    _recorded_lifetime(recorded_module, 3600)
    pytester.makeini(INI + "mgmtauth_strict = true\n")
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_v2 _*",
            "pytest-mgmtauth: drift: the fake answered unlike the service's recording of "
            "2026-11-28 (mgmtauth_snapshots/test_mod.json):",
            "  POST /v2/auth #1: body.token.jwt.lifetime: the service answered 3600, the "
            "fake 1800 (the option that makes the fake answer so: token_ttl)",
            "Fix: set the option named (token_ttl: a marker, an ini setting or a flag, see "
            "the Reference) and the fake answers like the service; or if the service moved "
            "since the recording, record the test anew with pytest --mgmtauth-live.",
        ]
    )
    # The path is the rootdir's, as the pages show it, never the machine's.
    assert str(pytester.path) + "/mgmtauth_snapshots" not in result.stdout.str()


def test_the_report_sections_verdicts_name_drift(pytester, recorded_module) -> None:
    _recorded_lifetime(recorded_module, 3600)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-report", "-rP")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_v2 _*",
            "Verdicts:",
            "  churn: none",
            "*",
            "  drift from the service's recording: the fake answered unlike the service's "
            "recording of 2026-11-28 (mgmtauth_snapshots/test_mod.json):",
            "    POST /v2/auth #1: body.token.jwt.lifetime: the service answered 3600, the "
            "fake 1800 (the option that makes the fake answer so: token_ttl)",
            "    Fix: set the option named*",
            "*_ test_without_snapshot _*",
            "*",
            "  drift from the service's recording: not checked: no snapshot records this test*",
        ]
    )


def test_a_broken_snapshot_says_how_to_fix_it(pytester, recorded_module) -> None:
    recorded_module.write_text("{not json")
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    assert "not JSON" in result.stdout.str()
    # Named from the rootdir, as the pages show it.
    result.stdout.fnmatch_lines(["*pytest-mgmtauth: mgmtauth_snapshots/test_mod.json is not JSON*"])
    assert "fix it or remove it" in result.stdout.str()
    assert "ValueError" not in result.stdout.str()
