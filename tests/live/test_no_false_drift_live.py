"""No false drift through a live run: the scenarios (v1, v2, v3, OAuth, lifecycle
headers, 1401, 1402, invalid_client, 1469, 429, 403) recorded live against a stand-in
with the default options, then run against the fake and checked against that recording:
not one DriftWarning. Tokens, dates, ids, hosts and secrets differ between the two runs;
none of it may read as drift."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from live_support import StandIn, point_at, snapshot_of

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

#: Tests of the scenarios that run in the shared live run (the others stop it, or need a
#: throttle of their own).
SHARED = "not refused and not throttled"


def _record_everything(
    scenarios: pytest.Pytester, stand_in: StandIn, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    shared = scenarios.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-live", "-m", SHARED)
    shared.assert_outcomes(passed=34)
    # Each refusal stops a live run: one run each, the run before it still recorded.
    for name in ("1401", "client_secret"):
        run = scenarios.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-live", "-k", name)
        run.assert_outcomes(passed=1)
        assert "the live run stopped here" in run.stdout.str()
    stand_in.control("lock", username=stand_in.env()["MGMTAUTH_LIVE_USERNAME"])
    run = scenarios.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-live", "-k", "1402")
    run.assert_outcomes(passed=1)
    stand_in.control("unlock", username=stand_in.env()["MGMTAUTH_LIVE_USERNAME"])
    with StandIn(key_file) as throttling:  # the default throttle, an account of its own
        point_at(monkeypatch, throttling)
        run = scenarios.runpytest_inprocess(
            "-p", "no:randomly", "--mgmtauth-live", "-m", "throttled"
        )
        run.assert_outcomes(passed=1)
    point_at(monkeypatch, None)


def test_the_scenarios_recorded_live_show_no_drift_against_the_fake(
    scenarios: pytest.Pytester, stand_in: StandIn, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record_everything(scenarios, stand_in, key_file, monkeypatch)
    tests = snapshot_of(scenarios.path)["tests"]
    exchanges = sum(len(record["exchanges"]) for record in tests.values())
    assert len(tests) == 38
    assert exchanges >= 60
    verified = scenarios.runpytest_inprocess(
        "-p", "no:randomly", "-W", "error::pytest_mgmtauth.DriftWarning"
    )
    verified.assert_outcomes(passed=38)
    assert "DriftWarning" not in verified.stdout.str()


def test_the_documentations_live_example_records_and_verifies(
    pytester: pytest.Pytester,
    seed_key: Callable[[pytest.Pytester], None],
    stand_in: StandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed_key(pytester)
    # Under another name: a run of docs/examples with tests (CI's) has imported the
    # example's module by its own name in this process already.
    shutil.copy(EXAMPLES / "test_live_client.py", pytester.path / "test_docs_live_client.py")
    shutil.copy(EXAMPLES / "mgmt_client.py", pytester.path / "mgmt_client.py")
    stand_in.control("routes", method="GET", path="/v2/devices", auth="v2", json=[{"id": 7}])
    point_at(monkeypatch, stand_in)
    recorded = pytester.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-live")
    recorded.assert_outcomes(passed=1)
    exchanges = snapshot_of(pytester.path, "test_docs_live_client")["tests"][
        "test_one_token_serves_many_calls_live"
    ]["exchanges"]
    assert [(e["method"], e["path"]) for e in exchanges] == [
        ("POST", "/v2/auth"),
        *[("GET", "/v2/devices")] * 3,
    ]
    point_at(monkeypatch, None)
    verified = pytester.runpytest_inprocess(
        "-p", "no:randomly", "-W", "error::pytest_mgmtauth.DriftWarning"
    )
    verified.assert_outcomes(passed=1)
