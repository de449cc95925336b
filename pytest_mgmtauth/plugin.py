"""The pytest glue: fixtures, the ``mgmtauth`` and ``mgmtauth_sweep`` markers, options,
report header.

Thin on purpose: everything it builds comes from the modules below it.
"""

from __future__ import annotations

import re
import traceback
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import _sweep
from ._assertions import KINDS, WARNINGS, Finding
from ._domain._options import (
    OPTION_NAMES,
    OPTION_SPEC,
    OPTION_SPECS,
    Options,
    build_options,
    check_option_names,
    name_source,
)
from ._fake import MgmtServer
from ._pool import KeyCache, KeyLock, SessionPool, key_files
from ._report import figures, format_table
from ._simclock import MgmtClock

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator, Sequence

    from pluggy import Result

    from ._domain._accounts import Account

_BASE_OPTIONS = pytest.StashKey[Options]()
#: Whether the test's setup or call phase did not pass (the teardown check then only warns).
_CALL_FAILED = pytest.StashKey[bool]()
#: The test's fake, for its report section.
_FAKE = pytest.StashKey[MgmtServer]()
#: Whether a failed report of the test carries the section already.
_SECTION_SHOWN = pytest.StashKey[bool]()
#: The title of the report section that holds a test's timeline and verdicts.
SECTION_TITLE = "mgmtauth timeline"
#: Where the signing key is kept across runs: a PEM file, mode 0600, in pytest's cache
#: directory (``.pytest_cache/d/mgmtauth/signing-key.pem``).
_KEY_CACHE_DIR = "mgmtauth"
_KEY_CACHE_FILE = "signing-key.pem"
#: The cache entry of versions up to 0.x (a JSON value, world-readable): emptied when a
#: key is written to the file.
_OLD_KEY_CACHE_ENTRY = "mgmtauth/signing-key-pem"
_SWEEP = pytest.StashKey[_sweep.SweepConfig]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """One ini setting ``mgmtauth_<name>`` and one flag ``--mgmtauth-<name>`` per option,
    made from the declarations in ``_domain/_options.py``."""
    group = parser.getgroup("mgmtauth", "pytest-mgmtauth (fake management auth service)")
    group.addoption(
        "--mgmtauth-report",
        action="store_true",
        default=False,
        help="show the mgmtauth summary (grants, API calls, rejections, churn per test) "
        "in the terminal, and attach the 'mgmtauth timeline' section to passing tests too; "
        "-v does both too",
    )
    for spec in OPTION_SPECS:
        flag = "--mgmtauth-" + spec.flag[2:]
        help = f"{spec.flag_help} (overrides the ini; markers still win)"
        if spec.kind == "bool":
            # Switches the option away from its default (--mgmtauth-no-keep-alive).
            group.addoption(flag, action="store_true", default=None, help=help)
        else:
            group.addoption(
                flag, default=None, metavar=spec.metavar or spec.kind.upper(), help=help
            )
        parser.addini(f"mgmtauth_{spec.name}", spec.help, type="string", default=None)
    _sweep.add_options(parser, group)


def _shown(raw: str) -> str:
    return repr(raw) if len(raw) <= 40 else f"{raw[:20]!r}... ({len(raw)} characters)"


def _parse_ini(name: str, raw: str) -> Any:
    """The value of the ini setting ``mgmtauth_<name>``; ValueError naming it."""
    try:
        return OPTION_SPEC[name].parse(raw)
    except ValueError as exc:
        raise ValueError(f"mgmtauth_{name} = {_shown(raw)}: {exc}") from None


def _read_options(config: pytest.Config) -> Options:
    """The base options: defaults, then ini settings, then command-line flags."""
    overrides: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for spec in OPTION_SPECS:
        raw = config.getini(f"mgmtauth_{spec.name}")
        if raw:
            overrides[spec.name] = _parse_ini(spec.name, str(raw))
            labels[spec.name] = f"mgmtauth_{spec.name}"
        flag = "--mgmtauth-" + spec.flag[2:]
        given = config.getoption(flag.lstrip("-").replace("-", "_"))
        if given is None:
            continue
        if spec.kind == "bool":
            if given:
                overrides[spec.name] = not spec.default
            continue
        try:
            overrides[spec.name] = spec.parse(str(given))
        except ValueError as exc:
            raise ValueError(f"{flag} {_shown(str(given))}: {exc}") from None
        labels[spec.name] = flag
    try:
        return build_options(Options(), overrides, where="mgmtauth ini settings")
    except (TypeError, ValueError) as exc:
        # Name the ini setting (or command-line flag) the value came from.
        message = name_source(str(exc), lambda name: labels.get(name, f"mgmtauth_{name}"))
        raise type(exc)(message) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mgmtauth(**options): configure the fake management auth service (mgmt_server) for "
        f"this test, class or module; options: {', '.join(OPTION_NAMES)}",
    )
    config.addinivalue_line(
        "markers",
        "mgmtauth_sweep(faults=(...), points=N): run the test once without a fault and "
        "once per fault kind and point (docs/sweeps.md); faults: "
        f"{', '.join(_sweep.FAULT_KINDS)}",
    )
    try:
        options = _read_options(config)
        config.stash[_SWEEP] = _sweep.read_config(config)
    except (TypeError, ValueError) as exc:
        # A usage error, not an INTERNALERROR traceback: the message says how to fix it.
        raise pytest.UsageError(str(exc)) from None
    config.stash[_BASE_OPTIONS] = options
    config.pluginmanager.register(_Report(config), "mgmtauth-report")
    config.pluginmanager.register(_JunitTimelines(config), "mgmtauth-junit-timelines")
    config.pluginmanager.register(_sweep.SweepReport(), "mgmtauth-sweep")


def pytest_report_header(config: pytest.Config) -> str:
    return f"mgmtauth: {config.stash[_BASE_OPTIONS].describe()}"


def options_for(node: pytest.Item, base: Options) -> Options:
    """The options of one test: ini/CLI defaults, then markers from farthest to closest."""
    __tracebackhide__ = True
    merged: dict[str, Any] = {}
    for marker in reversed(list(node.iter_markers("mgmtauth"))):
        if marker.args:
            raise TypeError(
                f"@pytest.mark.mgmtauth takes keyword options only, got positional "
                f"{marker.args!r}; known options: {', '.join(OPTION_NAMES)}"
            )
        check_option_names(marker.kwargs, where="@pytest.mark.mgmtauth")
        merged.update(marker.kwargs)
    return build_options(base, merged, where="@pytest.mark.mgmtauth")


def _key_files(config: pytest.Config) -> tuple[KeyCache, KeyLock] | None:
    """The signing key's file in pytest's cache directory and its lock (see
    :func:`key_files`); None without a cache (``-p no:cacheprovider``)."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return None

    def forget_old_entry() -> None:
        if cache.get(_OLD_KEY_CACHE_ENTRY, None) is not None:
            cache.set(_OLD_KEY_CACHE_ENTRY, None)  # the old, world-readable copy

    return key_files(
        lambda: Path(cache.mkdir(_KEY_CACHE_DIR)) / _KEY_CACHE_FILE, after_write=forget_old_entry
    )


def _key_cache(config: pytest.Config) -> KeyCache | None:
    files = _key_files(config)
    return files[0] if files is not None else None


#: The session's pool, made at collection when a test uses the plugin's fixtures (so its
#: key is generated in the background from then on), else by the first fixture.
_POOL = pytest.StashKey[SessionPool]()


def _pool_of(config: pytest.Config) -> SessionPool:
    pool = config.stash.get(_POOL, None)
    if pool is None:
        files = _key_files(config)
        cache, lock = files if files is not None else (None, None)
        pool = SessionPool(cache, key_lock=lock)
        config.stash[_POOL] = pool
    return pool


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # After deselection (-k, -m): a run that uses no fixture of the plugin generates no
    # key. item.fixturenames is the closure: mgmt_server and mgmt_account need the pool.
    if any("_mgmtauth_pool" in getattr(item, "fixturenames", ()) for item in items):
        _pool_of(config).prepare_signing_key()


@pytest.fixture(scope="session")
def _mgmtauth_pool(pytestconfig: pytest.Config) -> Iterator[SessionPool]:
    """The session's servers, signing key and test CA (made on first use). Internal:
    tests reach all of it through ``mgmt_server``."""
    pool = _pool_of(pytestconfig)
    yield pool
    del pytestconfig.stash[_POOL]
    try:
        # A handler still answering a test that has ended (its client gave up) may yet
        # raise: give it a moment, so that its error is reported rather than lost.
        still_running = pool.late_errors.wait_idle(LATE_HANDLER_GRACE)
    finally:
        pool.close()
    message = _late_errors_message(pool.late_errors.errors, still_running)
    if message:
        # Reported at the teardown of the session's last test (of this xdist worker):
        # an error, so the run fails, naming the test each error belonged to.
        pytest.fail(message, pytrace=False)


#: Seconds the end of the session waits for route handlers still running.
LATE_HANDLER_GRACE = 5.0


def _late_errors_message(
    errors: Sequence[tuple[str, str, BaseException]], still_running: Sequence[tuple[str, str]]
) -> str | None:
    if not errors and not still_running:
        return None
    lines = []
    if errors:
        lines.append(
            f"pytest-mgmtauth: {len(errors)} error(s) raised in the fake service after the "
            "test they belonged to had ended (its client had stopped waiting for the "
            "answer), so that test could not report them:"
        )
        for owner, where, error in errors:
            lines.append("")
            lines.append(f"in {owner}: {where} raised {type(error).__name__}: {error}")
            lines.extend(line.rstrip("\n") for line in traceback.format_exception(error))
    if still_running:
        lines.append("")
        lines.append(
            f"pytest-mgmtauth: route handler(s) still running {LATE_HANDLER_GRACE:g} s after "
            "the last test ended; whatever they raise is lost:"
        )
        lines.extend(f"  in {owner}: {where}" for owner, where in still_running)
    return "\n".join(lines)


@pytest.fixture(scope="session")
def mgmt_server_pool(_mgmtauth_pool: SessionPool) -> SessionPool:
    """Deprecated, internal: the session's servers, key and CA. Use ``mgmt_server``."""
    warnings.warn(
        "the mgmt_server_pool fixture is internal and will be removed: use mgmt_server "
        "(its url, ca_bundle and client_ssl_context()) instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return _mgmtauth_pool


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    _sweep.expand(metafunc, metafunc.config.stash[_SWEEP])


@pytest.fixture
def _mgmtauth_sweep(request: pytest.FixtureRequest) -> _sweep.SweepPoint | None:
    """The sweep point of this item (parametrized by the sweep), or None."""
    point: _sweep.SweepPoint | None = getattr(request, "param", None)
    return point


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # Runs only when the test function passed: a sweep point it never reached skips.
    _sweep.check_reached(item)


def _clock_mover(item: pytest.Item) -> Callable[[float], bool]:
    """Moves the test's mgmt_clock, if it runs on one (a scheduled expire)."""

    def move(seconds: float) -> bool:
        clock = getattr(item, "funcargs", {}).get("mgmt_clock")
        if not isinstance(clock, MgmtClock) or clock._factory is None:
            return False
        clock.advance(seconds=seconds)
        return True

    return move


@pytest.fixture
def mgmt_server(
    request: pytest.FixtureRequest,
    _mgmtauth_pool: SessionPool,
    _mgmtauth_sweep: _sweep.SweepPoint | None,
) -> Iterator[MgmtServer]:
    """The fake management auth service, with fresh state for this test."""
    problem = None
    try:
        options = options_for(request.node, request.config.stash[_BASE_OPTIONS])
    except (TypeError, ValueError) as exc:
        # The message names the known options and the fix; a traceback through
        # dataclasses would only bury it.
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        # Outside the except block: failing inside it chained the two, and pytest
        # printed the message twice ("During handling of the above exception...").
        pytest.fail(problem, pytrace=False)
    fake = MgmtServer(options, _mgmtauth_pool, test_id=request.node.nodeid)
    request.node.stash[_FAKE] = fake
    fake.use_clock_mover(_clock_mover(request.node))
    _sweep.arm(request.node, _mgmtauth_sweep, fake)
    try:
        yield fake
        fake.check()
        _check_findings(request.node, fake)
    finally:
        # The figures travel with the teardown report: JUnit XML properties, and the
        # terminal summary (also from xdist workers).
        request.node.user_properties.extend(fake.summary().as_properties())
        _sweep.disarm(request.node)
        fake.close()


#: The assertion that takes over each kind's teardown check.
_ASSERTIONS = {
    "churn": "assert_token_reused",
    "expired_use": "assert_no_expired_token_used",
    "open_session": "assert_logged_out",
}


def _strict_hint(kind: str) -> str:
    return (
        "(pytest-mgmtauth checks this at the end of every test that uses mgmt_server. "
        "Fail such tests with @pytest.mark.mgmtauth(strict=True), the ini setting "
        "mgmtauth_strict = true or --mgmtauth-strict; check it in the test with "
        f"mgmt_server.{_ASSERTIONS[kind]}(), which replaces this check.)"
    )


def _check_findings(item: pytest.Item, fake: MgmtServer) -> None:
    """The teardown check: each finding (churn, expired-credential use, and open v1
    sessions with require_logout) fails a strict test, else becomes a warning of its
    kind's class. A test that failed already only warns, and when its report section
    holds the timeline the warning does not repeat it."""
    __tracebackhide__ = True
    found = fake.teardown_findings()
    if not found:
        return
    if fake.options.strict and not item.stash.get(_CALL_FAILED, False):
        pytest.fail("\n\n".join(f.message for f in found), pytrace=False)
    in_section = item.stash.get(_SECTION_SHOWN, False)
    # Attributed to the test function, not to this file, in pytest's warnings summary.
    path, lineno, _ = item.reportinfo()
    for kind in KINDS:
        mine = [f for f in found if f.kind == kind]
        if mine:
            category = WARNINGS[kind]
            warnings.warn_explicit(
                category(_warning_text(kind, mine, in_section=in_section)),
                category,
                filename=str(path),
                lineno=(lineno or 0) + 1,
            )


def _warning_text(kind: str, found: list[Finding], *, in_section: bool) -> str:
    if in_section:
        return (
            "\n".join(f.headline for f in found)
            + f"\n(the timeline is in the test's '{SECTION_TITLE}' report section)"
        )
    return "\n\n".join(f.message for f in found) + "\n" + _strict_hint(kind)


def _wants_passing_sections(config: pytest.Config) -> bool:
    return bool(config.getoption("mgmtauth_report") or config.getoption("verbose") > 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    if report.when in ("setup", "call") and not report.passed:
        # Failed, errored, skipped or xfailed (reported as skipped): findings only warn.
        item.stash[_CALL_FAILED] = True
    if report.when == "call":
        _sweep.after_call(item, report)
    fake = item.stash.get(_FAKE, None)
    if fake is None:
        return
    if report.when == "teardown":
        # Items live as long as the session: let the fake's timeline go with the test.
        del item.stash[_FAKE]
    if report.failed:
        if item.stash.get(_SECTION_SHOWN, False):
            return  # a call failure and a teardown error: the first one carries it
        item.stash[_SECTION_SHOWN] = True
    elif not (report.when == "call" and report.passed and _wants_passing_sections(item.config)):
        return
    try:
        text = fake.report_section()
    except Exception as exc:  # never let the report hide the test's own failure
        text = f"(pytest-mgmtauth could not build the timeline: {type(exc).__name__}: {exc})"
    report.sections.append((SECTION_TITLE, text))


def section_text(report: pytest.TestReport) -> str | None:
    """The ``mgmtauth timeline`` section of a report, or None."""
    for title, content in report.sections:
        if title == SECTION_TITLE:
            return content
    return None


#: Characters XML 1.0 cannot hold (a request path can bring them into a timeline).
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class _JunitTimelines:
    """Writes each test's ``mgmtauth timeline`` section into its JUnit XML testcase as
    ``<system-err>``, whatever ``junit_logging`` says (pytest writes only captured
    output there). Runs on the xdist controller, from the reports the workers send."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        #: Per test: the text to write, and the testcase's reporter, held at teardown.
        self._texts: dict[tuple[str, object], str] = {}
        self._held: dict[tuple[str, object], Any] = {}

    def _xml(self) -> Any:
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover - a pytest without it
            return None
        return self._config.stash.get(xml_key, None)

    @staticmethod
    def _key(report: pytest.TestReport) -> tuple[str, object]:
        return report.nodeid, getattr(report, "node", None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        text = section_text(report)
        key = self._key(report)
        if text is not None:
            self._texts[key] = text
        held = None
        if report.when == "teardown" and key in self._texts:
            xml = self._xml()
            # junitxml closes the testcase while it handles this report: take it now, and
            # add to it after, so the element follows the <failure> or <error> (as the
            # JUnit schema orders them).
            held = xml.node_reporter(report) if xml is not None else None
        yield
        if report.when != "teardown":
            return
        text = self._texts.pop(key, None)
        if held is None or text is None:
            return
        element = ET.Element("system-err")
        element.text = _NOT_XML.sub(
            lambda m: f"#x{ord(m.group()):02X}",
            "\n".join([f" {SECTION_TITLE} ".center(80, "-"), text, ""]),
        )
        if "to_xml" in vars(held):  # closed: its testcase element is final, add to it
            held.to_xml().append(element)
        else:
            held.append(element)


class _Report:
    """Collects each test's figures from its teardown report; prints the section."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._rows: list[tuple[str, dict[str, int]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        values = figures(report.user_properties)
        if values is not None:
            self._rows.append((report.nodeid, values))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        config = self._config
        if not self._rows or not (
            config.getoption("mgmtauth_report") or config.getoption("verbose") > 0
        ):
            return
        terminalreporter.write_sep("=", "mgmtauth: credentials per test")
        # By node id: reports arrive in completion order, which xdist shuffles.
        for line in format_table(sorted(self._rows, key=lambda row: row[0])):
            terminalreporter.write_line(line)


@pytest.fixture
def mgmt_account(mgmt_server: MgmtServer) -> Account:
    """One account on ``mgmt_server`` with every permission."""
    return mgmt_server.add_account()


@pytest.fixture
def mgmt_clock() -> Iterator[MgmtClock]:
    """Frozen simulated time (freezegun) that both the client and the fake see."""
    clock = MgmtClock().start()
    try:
        yield clock
    finally:
        clock.stop()
