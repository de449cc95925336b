"""Issue 14, cold start: the signing key starts in the background as soon as collection
meets a test module (or conftest.py) whose source names a fixture that needs it, before
that module is imported; a suite that names none reads each test module once and starts
nothing (the import and thread checks are in test_lazy_start.py).

Each run is a fresh Python process. The observable is the session's signing key in the
config's stash, started, as seen by a test module's body while it is imported:
the end-of-collection fallback cannot have made it yet, so it cannot pass by accident.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_mgmtauth.plugin import (
    _KEY,
    _KEY_CACHE_DIR,
    _KEY_CACHE_FILE,
    _KEY_STARTED,
    _start_key_if_named,
)

if TYPE_CHECKING:
    from pathlib import Path

#: Hands the config to the test modules (the conftest names none of the fixtures).
CONFIG_CONFTEST = """
CONFIG = None


def pytest_configure(config):
    global CONFIG
    CONFIG = config
"""

#: Whether the key had started when this module's body ran: its first lines.
STARTED_AT_IMPORT = """
import sys

from pytest_mgmtauth.plugin import _KEY

_key = sys.modules["conftest"].CONFIG.stash.get(_KEY, None)
STARTED_AT_IMPORT = _key is not None and _key.started
"""

KEY_ENTRY = (".pytest_cache", "d", _KEY_CACHE_DIR, _KEY_CACHE_FILE)


def test_a_module_that_names_mgmt_server_starts_the_key_before_it_is_imported(
    mgmt_pytester: pytest.Pytester,
) -> None:
    pytester = mgmt_pytester
    pytester.makeconftest(CONFIG_CONFTEST)
    # Collected depth first: a_plain is imported before collection meets b_uses, so its
    # body sees no key; b_uses's body, imported after its own file was read, sees one.
    pytester.mkpydir("a_plain").joinpath("test_plain.py").write_text(
        STARTED_AT_IMPORT
        + """

def test_plain():
    assert STARTED_AT_IMPORT is False
"""
    )
    pytester.mkpydir("b_uses").joinpath("test_uses.py").write_text(
        STARTED_AT_IMPORT
        + """
# Started without the pool: importing it loads the transport and the fake (~70 ms).
POOL_LOADED = "pytest_mgmtauth._fake.session" in sys.modules


def test_uses(mgmt_server):
    assert STARTED_AT_IMPORT is True
    assert POOL_LOADED is False
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=2)


def test_a_conftest_that_names_the_fixtures_starts_the_key_before_the_test_modules(
    mgmt_pytester: pytest.Pytester,
) -> None:
    # The test module names only the conftest's own fixture.
    pytester = mgmt_pytester
    pytester.makeconftest(
        CONFIG_CONFTEST
        + """
import pytest


@pytest.fixture
def user(mgmt_account):
    return mgmt_account
"""
    )
    pytester.makepyfile(
        test_user=STARTED_AT_IMPORT
        + """

def test_user(user):
    assert user.username
    assert STARTED_AT_IMPORT is True
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("name", ["mgmt_server_pool", "_mgmtauth_pool"])
def test_the_deprecated_and_internal_fixture_names_start_it_too(
    mgmt_pytester: pytest.Pytester, name: str
) -> None:
    pytester = mgmt_pytester
    pytester.makeconftest(CONFIG_CONFTEST)
    pytester.makepyfile(
        test_it=STARTED_AT_IMPORT
        + f"""

def test_it({name}):
    assert STARTED_AT_IMPORT is True
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:hypothesispytest", "-W", "ignore::DeprecationWarning"
    )
    result.assert_outcomes(passed=1)


def test_a_deselected_module_that_names_the_fixtures_leaves_the_key_cached(
    pytester: pytest.Pytester,
) -> None:
    # The trade-off docs/reference.md names: the module is read before -k deselects its
    # test, so a cold cache gets a key this run did not need; the run waits for it to be
    # written, and the next run reads it instead of generating one.
    pytester.makepyfile(
        test_mixed="""
        def test_one():
            pass

        def test_two(mgmt_server):
            pass
        """
    )
    key = pytester.path.joinpath(*KEY_ENTRY)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-k", "test_one")
    result.assert_outcomes(passed=1, deselected=1)
    assert key.exists()
    pem = key.read_bytes()
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert key.read_bytes() == pem


def test_a_module_in_another_encoding_is_searched_and_a_broken_one_left_to_pytest(
    mgmt_pytester: pytest.Pytester,
) -> None:
    pytester = mgmt_pytester
    pytester.makeconftest(CONFIG_CONFTEST)
    # Latin-1 with its coding line: valid Python, not UTF-8; the bytes still name it.
    pytester.mkpydir("latin").joinpath("test_latin.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n"
        + STARTED_AT_IMPORT.encode()
        + b"\nLABEL = '\xe9t\xe9'\n\ndef test_latin(mgmt_server):\n"
        + b"    assert STARTED_AT_IMPORT is True\n    assert LABEL == '\\xe9t\\xe9'\n"
    )
    # Not UTF-8 and no coding line: pytest's own collection error, for this module only.
    pytester.mkpydir("broken").joinpath("test_broken.py").write_bytes(
        b"def test_broken(mgmt_server):\n    assert '\xff\xfe'\n"
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:hypothesispytest", "--continue-on-collection-errors"
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR collecting broken/test_broken.py*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


UNREADABLE_CONFTEST = (
    CONFIG_CONFTEST
    + """
import pathlib
import sys

_read_bytes = pathlib.Path.read_bytes


def read_bytes(self):
    # Unreadable to the plugin only: pytest itself still reads the module.
    if sys._getframe(1).f_globals.get("__name__") == "pytest_mgmtauth.plugin":
        raise PermissionError(13, "Permission denied", str(self))
    return _read_bytes(self)


pathlib.Path.read_bytes = read_bytes
"""
)


def test_a_module_the_plugin_cannot_read_is_ignored_silently(
    mgmt_pytester: pytest.Pytester,
) -> None:
    pytester = mgmt_pytester
    pytester.makeconftest(UNREADABLE_CONFTEST)
    pytester.makepyfile(
        test_uses=STARTED_AT_IMPORT
        + """

def test_uses(mgmt_server):
    # Not started early; the fallback at the end of collection started it.
    assert STARTED_AT_IMPORT is False
    assert mgmt_server.add_account().username
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:hypothesispytest", "-W", "error"
    )
    result.assert_outcomes(passed=1)


def test_the_reader_ignores_what_it_cannot_read_and_reads_nothing_once_started(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    config = pytester.parseconfig()
    _start_key_if_named(config, tmp_path)  # a directory: IsADirectoryError
    _start_key_if_named(config, tmp_path / "missing.py")
    plain = tmp_path / "test_plain.py"
    plain.write_text("def test_plain():\n    pass\n")
    _start_key_if_named(config, plain)
    assert _KEY_STARTED not in config.stash
    assert _KEY not in config.stash
    config.stash[_KEY_STARTED] = True  # as after a module that named them
    uses = tmp_path / "test_uses.py"
    uses.write_text("def test_uses(mgmt_server):\n    pass\n")
    _start_key_if_named(config, uses)
    assert _KEY not in config.stash  # not even read
