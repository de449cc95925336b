"""``mgmtauth-server`` / ``python -m pytest_mgmtauth`` as a process: startup output,
accounts from the command line and a file, clean stops on SIGTERM and Ctrl-C, errors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
from standalone_support import GUARD, ServerProcess, console_script

from pytest_mgmtauth import __version__
from pytest_mgmtauth._standalone.cli import build_parser, main, server_from_args
from pytest_mgmtauth._standalone.messages import is_loopback, options_json
from pytest_mgmtauth._standalone.server import read_accounts_file


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_mgmtauth", *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )


def test_the_console_script_is_installed_and_serves(key_file: Path, http: requests.Session) -> None:
    script = console_script()
    assert script is not None, "mgmtauth-server is not installed: pip install -e ."
    with ServerProcess(["--key-file", str(key_file)], command=[script]) as server:
        account = server.account
        answer = http.post(
            f"{server.url}/v2/auth",
            data={"username": account["username"], "key": account["api_key"]},
        )
        assert answer.status_code == 200
        assert len(answer.json()["token"]) > 800
        code, err = server.stop(signal.SIGTERM)
    assert code == 0
    assert "mgmtauth-server: stopped" in err


def test_ctrl_c_stops_it_cleanly_even_with_a_request_held_by_a_hang(
    key_file: Path, http: requests.Session
) -> None:
    with ServerProcess(["--key-file", str(key_file)]) as server:
        http.post(
            f"{server.url}/_mgmtauth/faults", json={"kind": "hang", "seconds": 600}
        ).raise_for_status()
        held: list[BaseException] = []

        def call() -> None:
            with requests.Session() as own:
                own.trust_env = False
                try:
                    own.post(
                        f"{server.url}/v2/auth",
                        data={"username": server.account["username"], "key": "x"},
                        timeout=GUARD,
                    )
                except requests.RequestException as exc:
                    held.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        for _ in range(1000):  # wait (real time, at most ~10 s) until the hang holds it
            events = http.get(f"{server.url}/_mgmtauth/events").json()["events"]
            if events:
                break
            threading.Event().wait(0.01)
        assert events[0]["fault"] == "hang"
        code, err = server.stop(signal.SIGINT)
        caller.join(GUARD)
    assert code == 0
    assert "Traceback" not in err
    assert held, "the held request should have been dropped when the server stopped"


def test_human_banner_prints_url_credentials_and_how_to_stop(key_file: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_mgmtauth", "--port", "0", "--key-file", str(key_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        assert lines[0].startswith(f"mgmtauth-server {__version__}")
        assert lines[1].split()[:2] == ["base", "URL"]
        assert lines[1].split()[2].startswith("http://127.0.0.1:")
        assert "/_mgmtauth/" in lines[2]
        rest = []
        for line in process.stdout:
            rest.append(line)
            if line.startswith("Stop with"):
                break
        text = "".join(rest)
        assert "api key" in text
        assert "password" in text
        # Only the options that mean something to a server (strict fails tests).
        assert "token_ttl=1800s" in text
        assert "strict=" not in text
        assert "https=" not in text
        assert "require_logout=" not in text
    finally:
        process.terminate()
        process.communicate(timeout=GUARD)
    assert process.returncode == 0


def test_accounts_from_the_command_line_and_a_file(
    key_file: Path, tmp_path: Path, http: requests.Session
) -> None:
    accounts = tmp_path / "accounts.json"
    accounts.write_text(
        json.dumps(
            [{"username": "carol@example.com", "api_key": "c+a&r=o%l", "permissions": ["read"]}]
        )
    )
    args = [
        "--key-file",
        str(key_file),
        "--account",
        "alice@example.com",
        "--account",
        '{"username": "bob@example.com", "password": "b0b+&"}',
        "--accounts-file",
        str(accounts),
        "--route",
        "GET /v2/things",
        "--https",
        "--throttle",
        "none",
        "--token-ttl",
        "600",
    ]
    with ServerProcess(args) as server:
        info = server.info
        assert [a["username"] for a in info["accounts"]] == [
            "alice@example.com",
            "bob@example.com",
            "carol@example.com",
        ]
        assert info["accounts"][1]["password"] == "b0b+&"
        assert info["accounts"][2]["permissions"] == ["read"]
        assert info["options"]["throttle"] is None
        # Whole seconds, as a JSON integer: clients in typed languages read it as one.
        assert type(info["options"]["token_ttl"]) is int
        assert info["options"]["token_ttl"] == 600
        # HTTPS shows in the URL; strict has no test to fail here.
        assert "https" not in info["options"]
        assert "strict" not in info["options"]
        # The teardown check's option: /_mgmtauth/check?require_logout=true does that here.
        assert "require_logout" not in info["options"]
        assert "sunset_check" not in info["options"]
        assert info["url"].startswith("https://")
        assert Path(info["ca_bundle"]).is_file()
        answer = http.post(
            f"{server.url}/v2/auth",
            data={"username": "carol@example.com", "key": "c+a&r=o%l"},
            verify=info["ca_bundle"],
        )
        assert answer.status_code == 200


@pytest.mark.parametrize(
    "account",
    [
        '{"username": "a@example.com", "api_key": ["s3cret+KEY"]}',
        '{"username": "a@example.com", "password": {"p": "s3cret+KEY"}}',
        '{"username": ["s3cret+KEY"]}',
    ],
)
def test_a_value_of_the_wrong_type_is_named_by_kind_never_shown(
    account: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A secret put in a list or object by mistake: no account exists yet to mask it by.
    with pytest.raises(SystemExit):
        main(["--port", "0", "--account", account])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "must be a string, got a JSON " in last
    assert "s3cret" not in last


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--throttle", "lots"], "expected a number of premature grants per 60 s, or 'none'"),
        (["--token-ttl", "0"], "--token-ttl must be > 0 and <= 315360000 seconds"),
        (["--lockout-duration", "nan"], "--lockout-duration must be > 0 and <= 315360000"),
        (["--lockout-duration", "inf"], "--lockout-duration must be > 0 and <= 315360000"),
        (["--session-timeout", "NaN"], "--session-timeout must be > 0 and <= 315360000"),
        (["--refresh-margin", "nan"], "--refresh-margin must be >= 0 and <= 315360000"),
        (["--token-ttl", "1000000000000"], "--token-ttl must be > 0 and <= 315360000"),
        (["--token-ttl", "1" + "0" * 400], "--token-ttl must be > 0 and <= 315360000"),
        (["--session-timeout", "1e400"], "got inf"),
        (["--refresh-margin", "-0.0"], "got -0.0"),
        (
            ["--token-ttl", "60", "--refresh-margin", "60"],
            "--refresh-margin (60 s) must be shorter",
        ),
        (["--lockout-threshold", "0"], "--lockout-threshold must be an int >= 1 and <= 1000000"),
        (["--throttle", "10000000"], "--throttle must be an int >= 1 and <= 1000000"),
        (["--account", "bob"], "usernames of the service are e-mail addresses"),
        (["--account", '{"username": 1}'], "'username' must be a string"),
        (["--account", '{"colour": 1}'], "unknown field 'colour'; known fields: username,"),
        (["--account", '{"profiles": "acme"}'], "('account/*': every profile of the account)"),
        (["--accounts-file", "/nonexistent/accounts.json"], "No such file or directory"),
        (["--accounts-file", __file__], "not valid JSON"),
        (["--route", "GET things"], "expected 'METHOD /path'"),
        (["--port", "70000"], "expected 0-65535"),
    ],
)
def test_bad_command_lines_exit_2_with_one_line_saying_why(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["--port", "0", *args])
    assert excinfo.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the usage lines
    assert last.startswith("mgmtauth-server: error: ")
    assert message in last


def test_a_key_file_that_is_not_a_key_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    precious = tmp_path / "notes.txt"
    precious.write_text("not a key")
    with pytest.raises(SystemExit) as excinfo:
        main(["--port", "0", "--key-file", str(precious)])
    assert excinfo.value.code == 2
    assert "is not a private key made by mgmtauth-server" in capsys.readouterr().err
    assert precious.read_text() == "not a key"
    with pytest.raises(SystemExit):
        main(["--port", "0", "--key-file", str(tmp_path / "missing" / "key.pem")])
    assert "its directory does not exist" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_key_file_that_is_a_fifo_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 38, item 12: reading it blocked the server's start until something wrote to it.
    fifo = tmp_path / "key.pem"
    os.mkfifo(fifo)
    exits: list[object] = []

    def start() -> None:
        try:
            main(["--port", "0", "--key-file", str(fifo)])
        except SystemExit as exc:
            exits.append(exc.code)

    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    starting.join(GUARD)
    if starting.is_alive():
        with contextlib.suppress(OSError):  # unblock the reader, then fail
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        starting.join(GUARD)
        pytest.fail("mgmtauth-server blocked reading a FIFO as its --key-file")
    assert exits == [2]
    err = capsys.readouterr().err
    assert f"--key-file {fifo} is a named pipe (FIFO), not a regular file" in err
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # never overwritten


def test_a_bad_command_line_as_a_process(key_file: Path) -> None:
    result = _run("--account", "bob@example.com", "--account", "bob@example.com")
    assert result.returncode == 2
    assert "the account 'bob@example.com' is given twice" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_taken_port_exits_1_and_suggests_port_0(key_file: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run("--port", str(port), "--key-file", str(key_file))
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "--port 0" in result.stderr


def test_version() -> None:
    result = _run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"mgmtauth-server {__version__}"


def test_token_ttl_alone_gets_a_derived_refresh_margin() -> None:
    server = server_from_args(build_parser().parse_args(["--port", "0", "--token-ttl", "60"]))
    assert (server.options.token_ttl, server.options.refresh_margin) == (60, 10)
    explicit = ["--port", "0", "--token-ttl", "60", "--refresh-margin", "0"]
    assert server_from_args(build_parser().parse_args(explicit)).options.refresh_margin == 0


def test_keep_alive_is_on_unless_no_keep_alive() -> None:
    # Issue 14: the flag is generated from the option's declaration.
    assert server_from_args(build_parser().parse_args(["--port", "0"])).options.keep_alive
    args = build_parser().parse_args(["--port", "0", "--no-keep-alive"])
    server = server_from_args(args)
    assert server.options.keep_alive is False
    assert options_json(server.options)["keep_alive"] is False


def test_standalone_package_imports_on_its_own_without_a_cycle() -> None:
    # Each module of the standalone package first, in a fresh interpreter: no import
    # cycle between the control API, the server and the fake.
    for module in ("control", "server", "cli"):
        code = f"import pytest_mgmtauth._standalone.{module}"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
def test_an_accounts_file_is_read_in_the_encodings_json_detects(
    tmp_path: Path, encoding: str
) -> None:
    accounts = tmp_path / "accounts.json"
    accounts.write_bytes(json.dumps([{"username": "carol@example.com"}]).encode(encoding))
    specs = read_accounts_file(str(accounts))
    assert [spec.username for spec in specs] == ["carol@example.com"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("api.localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("localhost.example.com", False),
    ],
)
def test_the_not_loopback_warning_spares_loopback_names_and_addresses(
    host: str, loopback: bool
) -> None:
    # The check main() warns with, the same one the control API's Host guard uses.
    assert is_loopback(host) is loopback
