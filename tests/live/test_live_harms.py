"""What a live run must never do to the user's account or suite, whatever the options,
the service's answers or the files say: forward outside the service's domains, trust the
fake's test CA, send a refused credential twice, run on xdist workers that each stop only
themselves, leave interception's variables set, or crash on a malformed snapshot or a
deeply nested answer. Each test here failed before its fix."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from live_support import StandIn, point_at, snapshot_of

HEAD = """
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
#: Words of a crash, where a message belongs.
CRASHES = ("Traceback", "TypeError", "AttributeError", "RecursionError", "failed internally")


@pytest.fixture
def folder(
    pytester: pytest.Pytester, seed_key: Callable[[pytest.Pytester], None]
) -> pytest.Pytester:
    seed_key(pytester)
    pytester.makeini("[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n")
    return pytester


def _live(folder: pytest.Pytester, *args: str) -> pytest.RunResult:
    return folder.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-live", "-rs", *args)


def _no_crash(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert not [word for word in CRASHES if word in text], text


# -- forwarding stays within the service's domains ------------------------------------

REGION_CALL = """
@pytest.mark.mgmtauth_live
MARK
def test_it(mgmt_server, mgmt_account, mgmt_profile):
    token = _http().post(
        mgmt_server.url + "/v3/auth/accounts/{}/profiles/{}".format(*mgmt_profile),
        data={"username": mgmt_account.username, "key": mgmt_account.api_key}).json()["token"]
    answer = _http().get(mgmt_server.url + "/v3/things/accounts/acme/profiles/main",
                         headers={"Host": "eu.evil.example", "Authorization": "Bearer " + token})
    assert answer.status_code == 403
    print(answer.json()["message"])
"""


@pytest.mark.parametrize("where", ["marker", "ini"])
def test_the_v3_host_option_never_widens_where_a_live_run_forwards(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    point_at(monkeypatch, stand_in)
    if where == "marker":
        mark = '@pytest.mark.mgmtauth(v3_host="eu.evil.example")'
    else:
        mark = ""
        folder.makeini(
            "[pytest]\nmgmtauth_v3_host = eu.evil.example\n"
            "filterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n"
        )
    folder.makepyfile(HEAD + REGION_CALL.replace("MARK", mark))
    before = len(stand_in.requests_seen())
    result = _live(folder, "-s")
    seen = stand_in.requests_seen()[before:]
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*not forwarded to eu.evil.example: a live run reaches only the service's*"]
    )
    assert [r["path"] for r in seen] == ["/v3/auth/accounts/acme/profiles/main"]


# -- TLS trust: never the fake's test CA ----------------------------------------------

IMPOSTOR = """
import os
import ssl
import threading

IMPOSTOR_PORT = int(os.environ["IMPOSTOR_PORT"])

@pytest.fixture
def impostor(mgmt_server):
    # A server that presents the fake's own certificate (its test CA's), at the upstream.
    context = mgmt_server._pool.ca.server_context()
    listener = socket.create_server(("127.0.0.1", IMPOSTOR_PORT))
    reached = []

    def serve():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                reached.append(tls.recv(65536))
                tls.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n"
                            b"Content-Type: application/json\\r\\n\\r\\n{}")
        except (OSError, ssl.SSLError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield reached
    try:
        listener.shutdown(socket.SHUT_RDWR)  # wakes a thread still in accept()
    except OSError:
        pass
    listener.close()
    thread.join(30)

@pytest.mark.mgmtauth_live
@pytest.mark.mgmtauth(intercept=True)
def test_it(mgmt_server, mgmt_account, impostor):
    assert "SSL_CERT_FILE" in os.environ  # interception's bundle, with the test CA
    answer = _v2(mgmt_server, mgmt_account)
    print(answer.json()["message"])
    assert answer.status_code == 502
    assert impostor == []
"""


def test_under_interception_forwarding_does_not_trust_the_fakes_test_ca(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    monkeypatch.setenv("MGMTAUTH_LIVE_UPSTREAM", f"https://127.0.0.1:{port}")
    monkeypatch.setenv("IMPOSTOR_PORT", str(port))
    monkeypatch.delenv("MGMTAUTH_LIVE_CAFILE")  # the system store only
    folder.makepyfile("import socket\n" + HEAD + IMPOSTOR)
    result = _live(folder, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*could not reach the service at*CERTIFICATE_VERIFY_FAILED*"])


# -- a refusal in any shape stops the run ---------------------------------------------

REFUSED = """
pytestmark = pytest.mark.mgmtauth_live

def test_a_wrong_key(mgmt_server, mgmt_account):
    http = _http()
    for _ in range(3):  # a client that retries a refusal: only the first is forwarded
        http.post(mgmt_server.url + "/v2/auth",
                  data={"username": mgmt_account.username, "key": "wrong"})

def test_after(mgmt_server, mgmt_account):
    _v2(mgmt_server, mgmt_account)
"""


@pytest.mark.parametrize(
    ("difference", "named"),
    [
        ("text_403", "1401 (403) at POST /v2/auth"),  # JSON labelled text/plain
        ("html_401", "401 at POST /v2/auth"),  # a gateway's HTML page
    ],
)
def test_a_refusal_in_any_shape_stops_the_run(
    folder: pytest.Pytester,
    key_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    difference: str,
    named: str,
) -> None:
    folder.makepyfile(HEAD + REFUSED)
    with StandIn(key_file, difference) as service:
        point_at(monkeypatch, service)
        result = _live(folder)
        seen = service.requests_seen()
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = " ".join(result.stdout.str().split())
    assert f"the service refused the live credentials ({named}); the live run stopped" in out
    assert len(seen) == 1


def test_a_live_run_on_xdist_workers_is_a_usage_error(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(HEAD + REFUSED)
    before = len(stand_in.requests_seen())
    result = _live(folder, "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--mgmtauth-live runs on one process: run it without -n*the first refused*"]
    )
    assert stand_in.requests_seen()[before:] == []


# -- the snapshot's write never skips the cleanup ---------------------------------------


def test_a_snapshot_that_cannot_be_written_is_that_tests_error_and_the_rest_goes_on(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        test_one=HEAD + "\n@pytest.mark.mgmtauth_live\n@pytest.mark.mgmtauth(intercept=True)\n"
        "def test_it(mgmt_server, mgmt_account):\n    _v2(mgmt_server, mgmt_account)\n"
    )
    (folder.path / "mgmtauth_snapshots").write_text("a file, not a folder")
    later = folder.path / "later"
    later.mkdir()
    (later / "test_two.py").write_text(
        "import os\n" + HEAD + "\n@pytest.mark.mgmtauth_live\n"
        "def test_after(mgmt_server, mgmt_account):\n"
        "    # interception's variables went with the test that set them\n"
        "    assert 'SSL_CERT_FILE' not in os.environ and 'HTTPS_PROXY' not in os.environ\n"
        "    _v2(mgmt_server, mgmt_account)\n"
    )
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    result = _live(folder, "test_one.py", "later/test_two.py")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_it*",
            "*pytest-mgmtauth: could not write the snapshot mgmtauth_snapshots/test_one.json (*)*",
        ]
    )
    assert list(snapshot_of(later, "test_two")["tests"]) == ["test_after"]


# -- malformed snapshots ----------------------------------------------------------------

_ENTRY = '{"recorded": "2026-01-01", "plugin_version": "0.1.0", "exchanges": EXCHANGES}'


def _snapshot_with(tests: str) -> bytes:
    return ('{"format": 1, "tests": ' + tests + "}").encode()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (_snapshot_with('["test_it"]'), ' is a snapshot whose "tests" is not an object*'),
        (_snapshot_with("5"), ' is a snapshot whose "tests" is not an object*'),
        (_snapshot_with('"test_it"'), ' is a snapshot whose "tests" is not an object*'),
        (
            _snapshot_with('{"test_it": ' + _ENTRY.replace("EXCHANGES", '"abc"') + "}"),
            ": the exchanges of 'test_it' are not a list of objects*",
        ),
        (
            _snapshot_with('{"test_it": ' + _ENTRY.replace("EXCHANGES", "[1, 2]") + "}"),
            ": the exchanges of 'test_it' are not a list of objects*",
        ),
        (
            _snapshot_with('{"test_it": ' + _ENTRY.replace("EXCHANGES", '{"a": 1}') + "}"),
            ": the exchanges of 'test_it' are not a list of objects*",
        ),
        (_snapshot_with("[" * 100_000 + "]" * 100_000), " is nested too deeply to be a snapshot*"),
        (b'{"format": 1, "tests": {}, "x": "\xff"}', " is not UTF-8*"),
    ],
    ids=[
        "tests-list",
        "tests-number",
        "tests-string",
        "exchanges-string",
        "exchanges-numbers",
        "exchanges-object",
        "deep",
        "not-utf8",
    ],
)
def test_a_malformed_snapshot_fails_its_modules_tests_naming_the_file_and_the_fix(
    folder: pytest.Pytester, content: bytes, problem: str
) -> None:
    folder.makepyfile(test_it="def test_it(mgmt_server):\n    pass\n")
    (folder.path / "mgmtauth_snapshots").mkdir()
    (folder.path / "mgmtauth_snapshots" / "test_it.json").write_bytes(content)
    result = folder.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*pytest-mgmtauth: mgmtauth_snapshots/test_it.json{problem}"
            "fix it or remove it, or record it anew from the service with pytest "
            "--mgmtauth-live*"
        ]
    )
    _no_crash(result)


def test_a_live_run_records_a_deeply_nested_snapshot_anew(
    folder: pytest.Pytester, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, stand_in)
    folder.makepyfile(
        test_it=HEAD + "\n@pytest.mark.mgmtauth_live\ndef test_it(mgmt_server, mgmt_account):\n"
        "    _v2(mgmt_server, mgmt_account)\n"
    )
    (folder.path / "mgmtauth_snapshots").mkdir()
    (folder.path / "mgmtauth_snapshots" / "test_it.json").write_bytes(
        _snapshot_with("[" * 100_000 + "]" * 100_000)
    )
    result = _live(folder)
    result.assert_outcomes(passed=1)
    _no_crash(result)
    assert list(snapshot_of(folder.path, "test_it")["tests"]) == ["test_it"]


# -- MGMTAUTH_LIVE_CAFILE is checked at the start ----------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"), [(None, "which does not exist"), ("garbage", "which holds no")]
)
def test_a_missing_or_garbage_cafile_is_a_usage_error_naming_it(
    folder: pytest.Pytester,
    stand_in: StandIn,
    monkeypatch: pytest.MonkeyPatch,
    content: str | None,
    problem: str,
) -> None:
    point_at(monkeypatch, stand_in)
    cafile = folder.path / "ca.pem"
    if content is not None:
        cafile.write_text(content)
    monkeypatch.setenv("MGMTAUTH_LIVE_CAFILE", str(cafile))
    folder.makepyfile(HEAD + REFUSED)
    before = len(stand_in.requests_seen())
    result = _live(folder)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*MGMTAUTH_LIVE_CAFILE names {cafile}, {problem}*"])
    assert stand_in.requests_seen()[before:] == []


# -- a deeply nested answer ---------------------------------------------------------------


def test_a_deeply_nested_answer_is_handed_back_and_recorded_as_not_json(
    folder: pytest.Pytester, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder.makepyfile(
        test_it=HEAD + "\n@pytest.mark.mgmtauth_live\ndef test_it(mgmt_server, mgmt_account):\n"
        "    answer = _v2(mgmt_server, mgmt_account)\n"
        "    assert answer.status_code == 200, answer.text[:300]\n"
        "    assert answer.content == b'[' * 100_000 + b']' * 100_000\n"
    )
    with StandIn(key_file, "deep") as service:
        point_at(monkeypatch, service)
        result = _live(folder)
    result.assert_outcomes(passed=1)
    _no_crash(result)
    record = snapshot_of(folder.path, "test_it")["tests"]["test_it"]
    assert [(e["path"], e["body"]) for e in record["exchanges"]] == [("/v2/auth", "non-json")]
