"""The proof that a live run asks the flows what their answers hold, and keeps no list of
its own: a flow defined in the test suite (``badge_flow.py``), whose tokens sit under keys
no built-in flow has (``badge``, ``renewal``), is masked in every artifact of a live run
(the request log, the recorded snapshot, the report sections, JUnit XML; a live test's
timeline is the service's, not kept) and shaped
in its snapshot, with no change to the package. The ordinary run after it, against the
fake, finds no drift."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from live_support import ANSWER, API_KEY, StandIn, point_at, snapshot_of, spellings

CONFTEST = """
import pytest
from badge_flow import BadgeFlow

from pytest_mgmtauth._service.flows.registry import registered


@pytest.fixture(scope="session", autouse=True)
def _badge_flow():
    with registered(BadgeFlow):
        yield
"""

TESTS = """
import json

import pytest
import requests

pytestmark = pytest.mark.mgmtauth_live


def test_badge(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v8/things").respond_with_json({"ok": True})
    mgmt_server.expect_refusals()
    http = requests.Session()
    http.trust_env = False
    answer = http.post(mgmt_server.url + "/v8/badge",
                       data={"username": mgmt_account.username, "key": mgmt_account.api_key})
    body = answer.json()
    with open("seen-secrets.txt", "a") as seen:
        seen.write(json.dumps([body["badge"], body["renewal"]]) + "\\n")
    things = http.get(mgmt_server.url + "/v8/things", headers={"X-Badge": body["badge"]})
    assert things.json() == {"ok": True}
    # The renewal where the badge belongs: refused, and quoted nowhere either.
    refused = http.get(mgmt_server.url + "/v8/things", headers={"X-Badge": body["renewal"]})
    assert refused.status_code == 401
    print(mgmt_server.requests)
"""


def test_a_flow_of_the_suite_is_masked_everywhere_and_shaped_in_its_snapshot(
    pytester: pytest.Pytester,
    seed_key: Callable[[pytest.Pytester], None],
    key_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed_key(pytester)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_badge=TESTS)
    shown = ("-p", "no:randomly", "-v", "-rA", "-s", "--mgmtauth-report")
    texts: dict[str, str] = {}
    with StandIn(key_file, "badge_flow", "--throttle", "none") as service:
        service.control("routes", method="GET", path="/v8/things", auth="badge", json=ANSWER)
        point_at(monkeypatch, service)
        live = pytester.runpytest_inprocess(*shown, "--mgmtauth-live", "--junitxml=live.xml")
        forwarded = [(r["method"], r["path"]) for r in service.requests_seen()]
    live.assert_outcomes(passed=1)
    assert forwarded == [("POST", "/v8/badge"), ("GET", "/v8/things"), ("GET", "/v8/things")]
    texts["live run"] = live.stdout.str() + live.stderr.str()
    point_at(monkeypatch, None)
    verified = pytester.runpytest_inprocess(*shown, "--junitxml=verify.xml")
    verified.assert_outcomes(passed=1)
    texts["ordinary run"] = verified.stdout.str() + verified.stderr.str()
    for name in ("live.xml", "verify.xml", "mgmtauth_snapshots/test_badge.json"):
        texts[name] = (pytester.path / name).read_text("utf-8")

    # Shaped: each token by its length and alphabet, the call by its auth outcome.
    (grant, accepted, refused) = snapshot_of(pytester.path, "test_badge")["tests"]["test_badge"][
        "exchanges"
    ]
    assert grant["path"] == "/v8/badge"
    for key in ("badge", "renewal"):
        assert list(grant["body"][key]) == ["opaque"]
        assert grant["body"][key]["opaque"]["length"] == 32
    assert (accepted["auth"], refused["auth"], refused["status"]) == ("accepted", "refused", 401)
    assert "DriftWarning" not in texts["ordinary run"]

    # Masked: no spelling of either token, of either run, nor of the key, anywhere.
    handed_out = [
        value
        for line in (pytester.path / "seen-secrets.txt").read_text().splitlines()
        for value in json.loads(line)
    ]
    assert len(handed_out) == 4
    found = [
        (name, secret[:4] + "...", spelling)
        for secret in (API_KEY, *handed_out)
        for spelling in spellings(secret)
        for name, text in texts.items()
        if spelling in text
    ]
    assert found == []
    # The artifacts hold what they are for: the log quotes the calls, each token as a
    # fingerprint; the ordinary run's timeline quotes the grant and the calls.
    assert len(re.findall(r"'X-Badge', '#[0-9a-f]{6}'", texts["live run"])) == 2
    assert re.search(r"T1 issued by /v8/badge \(#[0-9a-f]{6}\)", texts["ordinary run"])
    assert "GET /v8/things with T1 -> 200" in texts["ordinary run"]
