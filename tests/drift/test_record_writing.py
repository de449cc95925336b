"""Writing a test's record (``write_record``, the path a live run takes), here from the
fake's own answers: an entry moves, date included, only when its exchanges changed as the
drift check reads them, and a file whose text would not change is not written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CONFTEST = """
import pytest
from pytest_mgmtauth._glue.drift import write_record

@pytest.fixture
def recorded(request, mgmt_server):
    kept = mgmt_server.record_exchanges()
    yield
    write_record(request.node, kept, today="2026-11-28", region_host=mgmt_server.options.v3_host)
"""

TESTS = """
import requests

def test_v1(recorded, mgmt_server, mgmt_account):
    http = requests.Session()
    http.trust_env = False
    answer = http.post(mgmt_server.url + "/v1/login",
                       data={"username": mgmt_account.username,
                             "password": mgmt_account.password})
    assert answer.status_code == 200
"""


@pytest.fixture
def snapshot(pytester: pytest.Pytester) -> Path:
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_mod=TESTS)
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    return pytester.path / "mgmtauth_snapshots" / "test_mod.json"


def _rewrite(path: Path, **changes: object) -> bytes:
    """The snapshot with its entry's date, and the login's fields, changed; written as
    the plugin writes it (sorted keys, two spaces, a newline at the end)."""
    data = json.loads(path.read_text())
    record = data["tests"]["test_v1"]
    record["recorded"] = "2020-01-01"
    login = record["exchanges"][0]
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        place = login
        for part in parents:
            place = place[part]
        place[last] = value
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    path.write_text(text)
    return text.encode()


def test_an_unchanged_entry_keeps_its_date_and_the_file_is_not_written(
    pytester: pytest.Pytester, snapshot: Path
) -> None:
    # A utk that happened to hold no digit is the same format: not a change either.
    before = _rewrite(snapshot, body__utk__opaque__alphabet="A-Z")
    written = snapshot.stat().st_mtime_ns
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    assert snapshot.read_bytes() == before
    assert snapshot.stat().st_mtime_ns == written


def test_a_changed_entry_is_recorded_anew_with_the_days_date(
    pytester: pytest.Pytester, snapshot: Path
) -> None:
    _rewrite(snapshot, status=201)
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    record = json.loads(snapshot.read_text())["tests"]["test_v1"]
    assert record["recorded"] == "2026-11-28"
    assert record["exchanges"][0]["status"] == 200
