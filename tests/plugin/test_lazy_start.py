"""A suite that installs the plugin but never uses its fixtures starts no server and
generates no key.

Each run is a fresh Python process (the plugin loaded by its entry point), so no
server or key of this outer session can leak into what is measured. The inner
conftest counts what the plugin does: RSA key generations (at the cryptography
function every path goes through), signing keys loaded, servers made, and threads
named ``mgmtauth-server`` alive after each test's call. The second run, which uses
``mgmt_server``, proves the counters see what they count.
"""

from __future__ import annotations

import pytest

COUNTING_CONFTEST = """
import threading

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

import pytest_mgmtauth._pool as pool_module
from pytest_mgmtauth._transport._server import FakeHTTPServer

counts = {"rsa_generated": 0, "keys_loaded": 0, "servers_made": 0, "server_threads": 0}

_generate = rsa.generate_private_key
_load = pool_module.load_private_key
_init = FakeHTTPServer.__init__


def generate(*args, **kwargs):
    counts["rsa_generated"] += 1
    return _generate(*args, **kwargs)


def load(*args, **kwargs):
    counts["keys_loaded"] += 1
    return _load(*args, **kwargs)


def init(self, *args, **kwargs):
    counts["servers_made"] += 1
    _init(self, *args, **kwargs)


rsa.generate_private_key = generate
pool_module.load_private_key = load
FakeHTTPServer.__init__ = init


def pytest_runtest_logreport(report):
    if report.when == "call":
        alive = [t for t in threading.enumerate() if t.name == "mgmtauth-server"]
        counts["server_threads"] = max(counts["server_threads"], len(alive))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        "lazy-check: " + " ".join(f"{name}={value}" for name, value in counts.items())
    )
"""

KEY_ENTRY = (".pytest_cache", "d", "mgmtauth", "signing-key.pem")


def test_suite_that_never_uses_the_fixtures_starts_nothing(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(COUNTING_CONFTEST)
    pytester.makepyfile(
        test_plain="""
        import requests

        def test_one():
            assert 1 + 1 == 2

        def test_two(tmp_path):
            assert tmp_path.exists()

        class TestMore:
            def test_three(self):
                assert requests.__name__ == "requests"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:hypothesispytest")
    result.assert_outcomes(passed=3)
    # The plugin is active (its header line is there)...
    result.stdout.fnmatch_lines(["mgmtauth: token_ttl=1800s *"])
    # ...and did nothing.
    result.stdout.fnmatch_lines(
        ["lazy-check: rsa_generated=0 keys_loaded=0 servers_made=0 server_threads=0"]
    )
    assert not pytester.path.joinpath(*KEY_ENTRY).exists()


def test_the_counters_see_a_suite_that_uses_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(COUNTING_CONFTEST)
    pytester.makepyfile(
        test_uses="""
        def test_plain():
            pass

        def test_with_server(mgmt_server, mgmt_account):
            assert mgmt_server.url.startswith("http://127.0.0.1:")

        def test_again(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:hypothesispytest")
    result.assert_outcomes(passed=3)
    # One key and one server for the session, shared by the tests that use them.
    result.stdout.fnmatch_lines(
        ["lazy-check: rsa_generated=1 keys_loaded=1 servers_made=1 server_threads=1"]
    )
    assert pytester.path.joinpath(*KEY_ENTRY).exists()
