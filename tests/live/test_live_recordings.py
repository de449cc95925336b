"""What a live run's recordings hold and what its section says, seen as a user sees it
(pytester), against a stand-in for the service: each recording holds its own test's
exchanges only (a thread still calling after its test is refused, never forwarded nor
recorded); every live test is compared with its earlier recording, passed or not; every
live test not recorded is listed with why; an unchanged service changes no file; stale
entries are named."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from live_support import StandIn, point_at, snapshot_of

HEAD = """
import json
import threading

import pytest
import requests

def _http():
    http = requests.Session()
    http.trust_env = False
    return http

def _v1(mgmt_server, account):
    return _http().post(mgmt_server.url + "/v1/login",
                        data={"username": account.username, "password": account.password})

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


def _out(result: pytest.RunResult) -> str:
    return " ".join(result.stdout.str().split())


BACKGROUND = (
    HEAD
    + """
#: Real seconds the thread may take to call during the next test (a hang guard).
GUARD = 30.0
stop = threading.Event()
next_began = threading.Event()
late = threading.Event()
answers = []

@pytest.mark.mgmtauth_live
def test_background(mgmt_server, mgmt_account):
    url, username, key = mgmt_server.url, mgmt_account.username, mgmt_account.api_key

    def calls():
        http = _http()
        while not stop.is_set():
            answer = http.post(url + "/v2/auth", data={"username": username, "key": key})
            answers.append((answer.status_code, answer.json().get("message", "")))
            if next_began.is_set():
                answers.append("next")
                if answers.count("next") >= 2:  # the second call began within test_next
                    late.set()

    threading.Thread(target=calls, daemon=True).start()
    mgmt_server.wait(grants=1)  # only the fake can wait: the test is skipped here

@pytest.mark.mgmtauth_live
def test_next(mgmt_server, mgmt_account):
    next_began.set()
    assert late.wait(GUARD), "the thread of the test before never called during this one"
    assert _v2(mgmt_server, mgmt_account).status_code == 200
    stop.set()
    with open("answers.json", "w") as out:
        json.dump(answers, out)
"""
)


def test_a_thread_still_calling_after_its_test_reaches_neither_the_service_nor_the_next_test(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(test_background=BACKGROUND)
    before = len(stand_in.requests_seen())
    result = _live(folder)
    result.assert_outcomes(passed=1, skipped=1)
    answers = [a for a in json.loads((folder.path / "answers.json").read_text()) if a != "next"]
    forwarded = [message for status, message in answers if status == 200]
    refused = [message for status, message in answers if status == 503]
    assert refused
    assert set(refused) == {
        "not forwarded: this request came after its test (test_background.py::test_background) "
        "had ended or been skipped. In a live run each test has addresses of its own, so "
        "that a client still calling after its test (a thread it started) reaches neither "
        "the service nor another test's recording: stop the test's clients before it ends"
    }
    # The service saw the thread's calls made while its test ran, and the next test's one.
    assert len(stand_in.requests_seen()) - before == len(forwarded) + 1
    tests = snapshot_of(folder.path, "test_background")["tests"]
    assert list(tests) == ["test_next"]
    assert [e["path"] for e in tests["test_next"]["exchanges"]] == ["/v2/auth"]
    out = _out(result)
    assert "1 test(s) recorded against the service into 1 snapshot(s)" in out
    assert (
        "1 live test(s) not recorded: test_background.py::test_background: not recorded: it "
        "was skipped: mgmt_server.wait reads the fake's timeline" in out
    )


CLIENT = (
    HEAD
    + """
pytestmark = pytest.mark.mgmtauth_live

def test_login(mgmt_server, mgmt_account):
    answer = _v1(mgmt_server, mgmt_account)
    assert "JSESSIONID" in answer.cookies, "no JSESSIONID cookie"

def test_refused(mgmt_server, mgmt_account):
    mgmt_server.expect_refusals()
    answer = _http().get(mgmt_server.url + "/v2/things", headers={"Authorization": "Bearer x"})
    assert answer.status_code == 401, f"refused with {answer.status_code}"

def test_token(mgmt_server, mgmt_account):
    assert _v2(mgmt_server, mgmt_account).status_code == 200
"""
)


def test_a_failed_test_is_listed_with_why_and_what_the_service_changed(
    folder: pytest.Pytester, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder.makepyfile(test_client=CLIENT)
    with StandIn(key_file, "none", "--throttle", "none") as before:
        point_at(monkeypatch, before)
        _live(folder).assert_outcomes(passed=3)
    recorded = (folder.path / "mgmtauth_snapshots" / "test_client.json").read_bytes()
    with StandIn(key_file, "cookie", "--throttle", "none") as after:
        point_at(monkeypatch, after)
        cookie = _live(folder)
    cookie.assert_outcomes(passed=2, failed=1)
    cookie.stdout.fnmatch_lines(
        [
            "*= mgmtauth live =*",
            "2 test(s) recorded against the service into 1 snapshot(s):",
            "  mgmtauth_snapshots/test_client.json (unchanged)",
            "1 live test(s) not recorded:",
            "test_client.py::test_login: not recorded: it failed: AssertionError: no "
            "JSESSIONID cookie",
            "  the service answers unlike its recording of *-*-* "
            "(mgmtauth_snapshots/test_client.json):",
            "    POST /v1/login #1: headers.set-cookie: JSESSIONID gone, SESSIONID new (no option "
            "makes the fake answer so)",
        ]
    )
    # The failed test's earlier recording is kept, and the others' did not change.
    assert (folder.path / "mgmtauth_snapshots" / "test_client.json").read_bytes() == recorded
    with StandIn(key_file, "status_403", "--throttle", "none") as moved:
        point_at(monkeypatch, moved)
        status = _live(folder)
    status.assert_outcomes(passed=2, failed=1)
    status.stdout.fnmatch_lines(
        [
            "test_client.py::test_refused: not recorded: it failed: AssertionError: refused "
            "with 403",
            "  the service answers unlike its recording of *",
            "    GET /v2/things #1: status: it answered 401, now 403 (no option makes the fake "
            "answer so)",
        ]
    )


def test_an_unchanged_service_leaves_the_snapshot_byte_identical(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(test_same=CLIENT)
    _live(folder).assert_outcomes(passed=3)
    path = folder.path / "mgmtauth_snapshots" / "test_same.json"
    data = json.loads(path.read_text())
    for record in data["tests"].values():
        record["recorded"] = "2020-01-01"  # a recording of long ago
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    before, written = path.read_bytes(), path.stat().st_mtime_ns
    result = _live(folder)
    result.assert_outcomes(passed=3)
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == written
    result.stdout.fnmatch_lines(["  mgmtauth_snapshots/test_same.json (unchanged)"])


def test_the_live_tests_not_recorded_are_all_listed_with_why(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    monkeypatch.delenv("MGMTAUTH_LIVE_PASSWORD")
    folder.makepyfile(
        test_why=HEAD
        + """
pytestmark = pytest.mark.mgmtauth_live

def test_fails(mgmt_server, mgmt_account):
    _v2(mgmt_server, mgmt_account)
    raise RuntimeError("the client broke")

def test_needs_the_password(mgmt_server, mgmt_account):
    _v1(mgmt_server, mgmt_account)

def test_no_fake():
    pass

def test_recorded(mgmt_server, mgmt_account):
    _v2(mgmt_server, mgmt_account)
"""
    )
    result = _live(folder)
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_fails _*",
            "Verdicts:",
            "*",
            "  drift from the service's recording: not checked: a live run records the "
            "service's answers",
            "1 test(s) recorded against the service into 1 snapshot(s):",
            "3 live test(s) not recorded:",
            "test_why.py::test_fails: not recorded: it failed: RuntimeError: the client broke",
            "test_why.py::test_needs_the_password: not recorded: it was skipped: "
            "MGMTAUTH_LIVE_PASSWORD not set*",
            "test_why.py::test_no_fake: not recorded: it does not use mgmt_server, so it made "
            "no exchange to record",
        ]
    )


def test_why_a_test_failed_quotes_no_value_the_service_handed_out(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        test_jar=HEAD
        + """
@pytest.mark.mgmtauth_live
def test_login(mgmt_server, mgmt_account):
    login = _v1(mgmt_server, mgmt_account)
    with open("session.txt", "w") as kept:
        kept.write(login.cookies["JSESSIONID"])
    assert "SESSIONID" in login.cookies  # pytest's text of it shows the jar, values too
"""
    )
    result = _live(folder)
    result.assert_outcomes(failed=1)
    session = (folder.path / "session.txt").read_text()
    # pytest's own failure text is the user's assertion (the Checked against the service
    # page says how to keep values out of it); the plugin's section masks them.
    assert f"value='{session}'" in result.stdout.str()
    missed = result.stdout.lines.index("1 live test(s) not recorded:")
    line = result.stdout.lines[missed + 1]
    assert line.startswith("test_jar.py::test_login: not recorded: it failed: AssertionError")
    assert "name='JSESSIONID', value='#" in line
    assert session not in line


def test_a_renamed_test_leaves_its_old_entry_named_as_stale(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    body = (
        "\n@pytest.mark.mgmtauth_live\ndef {}(mgmt_server, mgmt_account):\n"
        "    _v2(mgmt_server, mgmt_account)\n"
    )
    folder.makepyfile(test_stale=HEAD + body.format("test_old") + body.format("test_kept"))
    _live(folder).assert_outcomes(passed=2)
    folder.makepyfile(test_stale=HEAD + body.format("test_new") + body.format("test_kept"))
    named = (
        "mgmtauth_snapshots/test_stale.json: stale entries, of tests test_stale.py no longer "
        "has: test_old. Delete them from the file: no test checks them, and no live run "
        "replaces them"
    )
    # Part of the module (-k deselects, a node id picks): what it did not run is not stale.
    partial = _live(folder, "-k", "test_new")
    partial.assert_outcomes(passed=1, deselected=1)
    partial.stdout.fnmatch_lines([named])
    picked = _live(folder, "test_stale.py::test_new")
    picked.assert_outcomes(passed=1)
    assert "stale entries" not in picked.stdout.str()
    whole = _live(folder)
    whole.assert_outcomes(passed=2)
    whole.stdout.fnmatch_lines([named])
    # Named, never dropped: the file holds the entry until the user deletes it.
    assert sorted(snapshot_of(folder.path, "test_stale")["tests"]) == [
        "test_kept",
        "test_new",
        "test_old",
    ]


def test_a_test_not_forwarded_that_failed_too_says_both(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    monkeypatch.delenv("MGMTAUTH_LIVE_CAFILE")  # the stand-in is not trusted: the fake's 502
    folder.makepyfile(
        test_both=HEAD
        + """
@pytest.mark.mgmtauth_live
def test_it(mgmt_server, mgmt_account):
    _v2(mgmt_server, mgmt_account)
    raise RuntimeError("the client gave up")
"""
    )
    result = _live(folder)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_both.py::test_it: not recorded: a request was not forwarded to the service: "
            "POST /v2/auth -> 502; and it failed: RuntimeError: the client gave up"
        ]
    )
