"""A suite that installs the plugin but never uses its fixtures starts no server and
generates no key.

Each run is a fresh Python process (the plugin loaded by its entry point), so no
server or key of this outer session can leak into what is measured. The inner
conftest counts what the plugin does: RSA key generations (at the cryptography
function every path goes through), token signers made, servers made, and threads
named ``mgmtauth-server`` alive after each test's call. The second run, which uses
``mgmt_server``, proves the counters see what they count.
"""

from __future__ import annotations

import pytest

COUNTING_CONFTEST = """
import threading

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from pytest_mgmtauth._http.server import FakeHTTPServer
from pytest_mgmtauth._service.tokens import TokenSigner

counts = {"rsa_generated": 0, "signers_made": 0, "servers_made": 0, "server_threads": 0}

_generate = rsa.generate_private_key
_signer_init = TokenSigner.__init__
_init = FakeHTTPServer.__init__


def generate(*args, **kwargs):
    counts["rsa_generated"] += 1
    return _generate(*args, **kwargs)


def signer_init(self, *args, **kwargs):
    counts["signers_made"] += 1
    _signer_init(self, *args, **kwargs)


def init(self, *args, **kwargs):
    counts["servers_made"] += 1
    _init(self, *args, **kwargs)


rsa.generate_private_key = generate
TokenSigner.__init__ = signer_init
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

KEY_ENTRY = (".pytest_cache", "d", "mgmtauth", "rsa4096.pem")


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
        ["lazy-check: rsa_generated=0 signers_made=0 servers_made=0 server_threads=0"]
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
    # One key (generated once: the cache is cold), one signer and one server for the
    # session, shared by the tests that use them.
    result.stdout.fnmatch_lines(
        ["lazy-check: rsa_generated=1 signers_made=1 servers_made=1 server_threads=1"]
    )
    assert pytester.path.joinpath(*KEY_ENTRY).exists()


#: Modules a suite that never uses the plugin must not import: the fake, the transport
#: and its HTTP stack, the token and TLS libraries.
HEAVY_MODULES = (
    "werkzeug",
    "pytest_httpserver",
    "pytest_mgmtauth._fake.server",
    "pytest_mgmtauth._http.app",
    "pytest_mgmtauth._fake.session",
    "pytest_mgmtauth._glue.sweep",
    "pytest_mgmtauth._service.faults",
    "pytest_mgmtauth._service.tokens",
    "jwt",
    "cryptography",
)

MODULES_CONFTEST = """
import sys
import threading


def pytest_sessionfinish(session):
    with open("modules.txt", "w") as f:
        f.write("\\n".join(sorted(sys.modules)))
    with open("threads.txt", "w") as f:
        f.write("\\n".join(sorted(t.name for t in threading.enumerate())))
"""


#: Three tests that never use the plugin.
PLAIN_MODULE = """
import pytest

def test_one():
    assert 1 + 1 == 2

@pytest.mark.parametrize("n", [1, 2])
def test_two(n, tmp_path):
    assert tmp_path.exists()
"""


def _run_reading_modules(
    pytester: pytest.Pytester, *args: str
) -> tuple[pytest.RunResult, set[str]]:
    """A subprocess run (hypothesis's plugin off: it imports its own world) and the
    modules it had imported at its end, as MODULES_CONFTEST wrote them."""
    result = pytester.runpytest_subprocess("-p", "no:hypothesispytest", *args)
    modules = set(pytester.path.joinpath("modules.txt").read_text().splitlines())
    return result, modules


def test_suite_that_never_uses_the_plugin_imports_nothing_heavy(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(MODULES_CONFTEST)
    pytester.makepyfile(test_plain=PLAIN_MODULE)
    # pytest-httpserver's own pytest plugin imports Werkzeug: off, to see what ours imports.
    result, modules = _run_reading_modules(
        pytester, "-p", "no:pytest_httpserver", "--junitxml=junit.xml"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["mgmtauth: token_ttl=1800s *"])
    assert "pytest_mgmtauth.plugin" in modules
    imported = [
        name
        for name in sorted(modules)
        if any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY_MODULES)
    ]
    assert imported == []


#: All of the package a run of pytest imports when it never uses the plugin (no -v, no
#: --mgmtauth-report, no --junitxml, no sweep): the options (the developer portal's in
#: their own module), their flags and ini settings,
#: the sweep's plan (names and defaults for the flags' help). Not the sweep's glue or the
#: fault table, not the token module, not the terminal table, not the JUnit timelines:
#: each would cost every run of pytest its import.
STARTUP_MODULES = {
    "pytest_mgmtauth",
    "pytest_mgmtauth._service",
    "pytest_mgmtauth._service.options",
    "pytest_mgmtauth._service.limits",
    "pytest_mgmtauth._service.portal_options",
    "pytest_mgmtauth._glue",
    "pytest_mgmtauth._glue.settings",
    "pytest_mgmtauth._verdicts",
    "pytest_mgmtauth._verdicts.sweep_plan",
    "pytest_mgmtauth.plugin",
}


def test_a_plain_run_imports_only_the_plugins_startup_modules(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(MODULES_CONFTEST)
    # Files that name the fixtures without a test using them start nothing.
    pytester.makepyfile(
        test_plain=PLAIN_MODULE, helper="def use(mgmt_server, mgmt_account):\n    pass\n"
    )
    result, modules = _run_reading_modules(
        pytester, "-p", "no:pytest_httpserver", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["mgmtauth: token_ttl=1800s *"])
    ours = {name for name in modules if name.split(".")[0] == "pytest_mgmtauth"}
    assert ours == STARTUP_MODULES
    assert not {"jwt", "cryptography"} & {name.split(".")[0] for name in modules}
    # Only the plugin's threads count (all named mgmtauth-...): other plugins a user has
    # installed may start their own (pytest-rerunfailures does, at configure).
    threads = pytester.path.joinpath("threads.txt").read_text().splitlines()
    assert [name for name in threads if name.startswith("mgmtauth")] == []
    assert not pytester.path.joinpath(*KEY_ENTRY).exists()


def test_the_startup_check_sees_what_a_sweep_and_the_reports_load(
    pytester: pytest.Pytester,
) -> None:
    # The same kind of run, with the sweep flag, -v and --junitxml: the modules held back
    # are loaded then, so the check above is not passing because they never load.
    pytester.makeconftest(MODULES_CONFTEST)
    pytester.makepyfile(
        test_plain="""
        def test_one():
            assert 1 + 1 == 2
        """
    )
    result, modules = _run_reading_modules(
        pytester, "-p", "no:randomly", "-v", "--junitxml=junit.xml"
    )
    result.assert_outcomes(passed=1)
    assert "pytest_mgmtauth._glue.report" in modules
    assert "pytest_mgmtauth._glue.sweep" not in modules
    pytester.makepyfile(
        test_swept="""
        import pytest

        @pytest.mark.mgmtauth_sweep(faults=("throttle",), points=1)
        def test_swept(mgmt_server):
            pass
        """
    )
    result, modules = _run_reading_modules(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=2, skipped=1)
    assert {"pytest_mgmtauth._glue.sweep", "pytest_mgmtauth._service.faults"} <= modules


def test_the_module_check_sees_a_suite_that_uses_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(MODULES_CONFTEST)
    pytester.makepyfile(
        test_uses="""
        def test_with_server(mgmt_server):
            assert mgmt_server.url.startswith("http://127.0.0.1:")
        """
    )
    result, modules = _run_reading_modules(pytester, "-p", "no:pytest_httpserver")
    result.assert_outcomes(passed=1)
    assert {"werkzeug", "pytest_mgmtauth._fake.server", "pytest_mgmtauth._http.app"} <= modules


#: Run in a fresh interpreter: in this one, an in-process pytester run earlier in the
#: session may have imported a module of the package again (pytester drops what it
#: imported from sys.modules), leaving the package's cached name and the module's fresh
#: one two different objects (seen under `pytest tests/plugin -p no:randomly`).
PUBLIC_NAMES_CHECK = """
import importlib

import pytest_mgmtauth

lazy = pytest_mgmtauth._LAZY
assert set(lazy) == set(pytest_mgmtauth.__all__) - {"__version__"}
for name, module in lazy.items():
    own = getattr(importlib.import_module(module, "pytest_mgmtauth"), name)
    assert getattr(pytest_mgmtauth, name) is own, name
assert set(pytest_mgmtauth.__all__) <= set(dir(pytest_mgmtauth))
try:
    pytest_mgmtauth.Nope
except AttributeError as exc:
    assert "no attribute 'Nope'" in str(exc), exc
else:
    raise AssertionError("pytest_mgmtauth.Nope resolved")
print("public names ok")
"""


def test_every_public_name_resolves_from_its_module() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", PUBLIC_NAMES_CHECK], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "public names ok"
