"""The pytest plugin: its hooks and fixtures. Thin on purpose: what they build comes
from the modules below it, and ``_glue/`` holds the rest of what needs pytest."""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import TYPE_CHECKING, Any

import pytest

# Only what the options, the markers and the report header need: a suite that never uses
# the plugin imports none of the fake, the transport (Werkzeug, pytest-httpserver), the key
# pool, the findings, the sweep's glue, the terminal table (without -v or
# --mgmtauth-report) or the JUnit timelines (without --junitxml). The fixtures and hooks
# import those when a test uses them.
from ._glue import settings as _settings
from ._glue.settings import options_for
from ._service.options import OPTION_NAMES, Options
from ._verdicts.sweep_plan import (
    EXPLORE_MARKER as _EXPLORE_MARKER,
    EXPLORE_PROP as _EXPLORE_PROP,
    FAULT_KINDS,
    FIXTURE as _SWEEP_FIXTURE,
    MARKER as _SWEEP_MARKER,
    PROP_TEST,
    SweepConfig,
    SweepPoint,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator

    from pluggy import Result

    from ._fake.key_cache import SigningKey
    from ._fake.live import LiveRun
    from ._fake.server import MgmtServer
    from ._fake.session import SessionResources
    from ._glue.clock import MgmtClock
    from ._service.accounts import Account, Profile
    from .flows import OAuthClient

_BASE_OPTIONS = pytest.StashKey[Options]()
#: Whether the test's setup or call phase did not pass (the teardown check then only warns).
_CALL_FAILED = pytest.StashKey[bool]()
#: The test's fake, for its report section.
_FAKE = pytest.StashKey["MgmtServer"]()
#: Whether a failed report of the test carries the section already.
_SECTION_SHOWN = pytest.StashKey[bool]()
#: Where the signing key is kept across runs: a directory of pytest's cache, which holds
#: the key as a PEM file, mode 0600 (``.pytest_cache/d/mgmtauth/rsa4096.pem``).
_KEY_CACHE_DIR = "mgmtauth"
#: The cache entry of versions up to 0.x (a JSON value, world-readable): emptied when a
#: session uses the key.
_OLD_KEY_CACHE_ENTRY = "mgmtauth/signing-key-pem"
_SWEEP = pytest.StashKey[SweepConfig]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """One ini setting ``mgmtauth_<name>`` and one flag ``--mgmtauth-<name>`` per option,
    made from the declarations in ``_service/options.py``."""
    group = parser.getgroup("mgmtauth", "pytest-mgmtauth (fake management auth service)")
    group.addoption(
        "--mgmtauth-report",
        action="store_true",
        default=False,
        help="show the mgmtauth summary (grants, API calls, rejections, churn per test) "
        "in the terminal, and attach the 'mgmtauth timeline' section to passing tests too; "
        "-v does both too",
    )
    group.addoption(
        "--mgmtauth-live",
        action="store_true",
        default=False,
        help="run the tests marked mgmtauth_live against the service itself, with the "
        "credentials of the MGMTAUTH_LIVE_* variables, and record their exchanges as "
        "snapshots (mgmtauth_snapshots/); skip every other test",
    )
    _settings.add_options(parser, group)
    _settings.add_sweep_options(parser, group)


_MARKERS = (
    "mgmtauth(**options): configure the fake management auth service (mgmt_server) for "
    f"this test, class or module; options: {', '.join(OPTION_NAMES)}",
    "mgmtauth_sweep(faults=(...), points=N): run the test once without a fault and once "
    "per fault kind and point (the documentation's page Sweeps); faults: "
    f"{', '.join(FAULT_KINDS)}",
    f"{_EXPLORE_MARKER}(runs=100, max_faults=2, faults=(...), seed=None, replay=None): "
    "run the test's body `runs` times in one item, each run under its own schedule of "
    "faults and clock moves, and shrink a failure to its shortest story (the "
    "documentation's page Explore)",
    "mgmtauth_live: run this test against the service itself under --mgmtauth-live, "
    "recording its exchanges (the documentation's page Checked against the service)",
)


def pytest_configure(config: pytest.Config) -> None:
    for marker in _MARKERS:
        config.addinivalue_line("markers", marker)
    if config.getoption("mgmtauth_live", False):
        from ._glue import live as _live

        _live.configure(config)
    try:
        config.stash[_BASE_OPTIONS] = _settings.read_options(config)
        config.stash[_SWEEP] = _settings.read_sweep_config(config)
    except (TypeError, ValueError) as exc:
        # A usage error, not an INTERNALERROR traceback: the message says how to fix it.
        raise pytest.UsageError(str(exc)) from None
    if _wants_passing_sections(config):
        # The per-test table is printed with -v or --mgmtauth-report only: without them
        # its collector (and _report) is not loaded.
        from ._glue.report import TerminalReport

        config.pluginmanager.register(TerminalReport(), "mgmtauth-report")
    if config.getoption("xmlpath", None):
        # The timelines go into the JUnit XML of --junitxml only.
        from ._glue.report import JunitTimelines

        config.pluginmanager.register(JunitTimelines(config), "mgmtauth-junit-timelines")
    sweeps = _SectionOnDemand(PROP_TEST, "._glue.sweep", "SweepReport")
    config.pluginmanager.register(sweeps, "mgmtauth-sweep")
    explorations = _SectionOnDemand(_EXPLORE_PROP, "._glue.explore", "ExploreReport")
    config.pluginmanager.register(explorations, "mgmtauth-explore")


def pytest_report_header(config: pytest.Config) -> str:
    return f"mgmtauth: {config.stash[_BASE_OPTIONS].describe()}"


class SigningKeyCacheWarning(pytest.PytestWarning):
    """pytest-mgmtauth replaced the signing key it keeps in pytest's cache (it was no
    usable 4096-bit RSA key, or could not be read), or cannot write its key there.

    Warned in the first test that uses the fake; the tests run with a new key either
    way. Like pytest's own cache warnings (``PytestCacheWarning``), ``filterwarnings =
    error`` makes it an error of that test;
    ``ignore::pytest_mgmtauth.SigningKeyCacheWarning`` silences it."""


#: The session's signing key, started at the end of collection if a test uses the
#: plugin's fixtures (see pytest_collection_modifyitems), else by the first fixture.
_KEY = pytest.StashKey["SigningKey"]()


def _key_of(config: pytest.Config) -> SigningKey:
    """The session's signing key, made (not started) on first call; kept in pytest's
    cache if there is one (not with ``-p no:cacheprovider``)."""
    key = config.stash.get(_KEY, None)
    if key is None:
        from ._fake.key_cache import SigningKey, cached_key, fresh_key

        cache = getattr(config, "cache", None)
        make = fresh_key if cache is None else cached_key(cache.mkdir, _KEY_CACHE_DIR)
        key = SigningKey(make, warning=SigningKeyCacheWarning)
        config.stash[_KEY] = key
    return key


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # After deselection (-k, -m): if a test that runs uses the fake (mgmt_server and
    # mgmt_account need the pool), its key is read or generated in the background from
    # now on, while pytest sets up. A run that uses no fixture of the plugin makes none.
    if any("_mgmtauth_pool" in getattr(item, "fixturenames", ()) for item in items):
        _key_of(config).start()


@pytest.fixture(scope="session")
def _mgmtauth_pool(pytestconfig: pytest.Config) -> Iterator[SessionResources]:
    """The session's servers, signing key and test CA (made on first use). Internal:
    tests reach all of it through ``mgmt_server``."""
    from ._fake.session import SessionResources
    from ._glue.report import late_errors_message

    cache = getattr(pytestconfig, "cache", None)
    if cache is not None and cache.get(_OLD_KEY_CACHE_ENTRY, None) is not None:
        cache.set(_OLD_KEY_CACHE_ENTRY, None)  # the old, world-readable copy
    pool = SessionResources(signing_key=_key_of(pytestconfig))
    yield pool
    try:
        # A handler still answering a test that has ended (its client gave up) may yet
        # raise: give it a moment, so that its error is reported rather than lost.
        still_running = pool.late_errors.wait_idle(LATE_HANDLER_GRACE)
    finally:
        pool.close()
    message = late_errors_message(pool.late_errors.errors, still_running, grace=LATE_HANDLER_GRACE)
    if message:
        # Reported at the teardown of the session's last test (of this xdist worker):
        # an error, so the run fails, naming the test each error belonged to.
        pytest.fail(message, pytrace=False)


#: Seconds the end of the session waits for route handlers still running.
LATE_HANDLER_GRACE = 5.0


@pytest.fixture(scope="session")
def mgmt_server_pool(_mgmtauth_pool: SessionResources) -> SessionResources:
    """Deprecated, internal: the session's servers, key and CA. Use ``mgmt_server``."""
    warnings.warn(
        "the mgmt_server_pool fixture is internal and will be removed: use mgmt_server "
        "(its url, ca_bundle and client_ssl_context()) instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return _mgmtauth_pool


class _SectionOnDemand:
    """The ``mgmtauth sweep`` or ``mgmtauth explore`` terminal section: hands the
    reports to the section's collector (``module.name``), made (and its module imported)
    at the first report that carries the user property ``prop``, so that a run that
    sweeps or explores nothing never imports it. Reports, not items: the xdist
    controller sees only the reports its workers send."""

    def __init__(self, prop: str, module: str, name: str) -> None:
        self._prop, self._module, self._name = prop, module, name
        self._report: Any = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self._report is None:
            if not any(name == self._prop for name, _ in report.user_properties):
                return
            module = importlib.import_module(self._module, __package__)
            self._report = getattr(module, self._name)()
        self._report.pytest_runtest_logreport(report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._report is not None:
            self._report.pytest_terminal_summary(terminalreporter)


def _may_sweep(item: pytest.Item) -> bool:
    """Whether the item can be a sweep item: only those depend on the sweep's fixture
    (through mgmt_server). The others never import ``_sweep``."""
    return _SWEEP_FIXTURE in getattr(item, "fixturenames", ())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker(_EXPLORE_MARKER) is not None:
        from ._glue import explore as _explore

        _explore.check(metafunc.definition, metafunc.fixturenames)
        return  # explored, never swept (a sweep marker beside it is refused above)
    if (
        _SWEEP_FIXTURE not in metafunc.fixturenames
        and metafunc.definition.get_closest_marker(_SWEEP_MARKER) is None
    ):
        return  # nothing to sweep, nothing to report (a marker here is an error)
    from ._glue import sweep as _sweep

    _sweep.expand(metafunc, metafunc.config.stash[_SWEEP])


@pytest.fixture(scope="session")
def _mgmtauth_sweep() -> SweepPoint | None:
    """None: the item is not swept. A swept item's parametrization gives this name its
    sweep point directly, in place of this fixture (``_sweep.expand``).

    Session-scoped so that an item the sweep does not parametrize (nearly all) finds the
    None cached instead of running a fixture."""
    return None


def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    # An explored item runs its body many times (_glue/explore.py); any other item: pytest's.
    if item.get_closest_marker(_EXPLORE_MARKER) is None:
        return None
    from ._glue import explore as _explore

    return _explore.run(item, nextitem)


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # Runs only when the test function passed: a sweep point it never reached skips.
    if _may_sweep(item):
        from ._glue import sweep as _sweep

        _sweep.check_reached(item)


def _clock_mover(item: pytest.Item) -> Callable[[float], bool]:
    """Moves the test's mgmt_clock, if it runs on one (a scheduled expire)."""

    from ._glue.clock import MgmtClock

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
    _mgmtauth_pool: SessionResources,
    _mgmtauth_sweep: SweepPoint | None,
) -> Iterator[MgmtServer]:
    """The fake management auth service, with fresh state for this test."""
    from ._fake.server import MgmtServer
    from ._glue import drift as _drift, sweep as _sweep
    from ._glue.report import check_findings

    item = request.node
    try:
        options = options_for(item, item.config.stash[_BASE_OPTIONS])
    except (TypeError, ValueError) as exc:
        # The message names the known options and the fix; a traceback through
        # dataclasses would only bury it. Not chained (from None): pytest printed the
        # message twice ("During handling of the above exception...").
        raise pytest.fail.Exception(f"{type(exc).__name__}: {exc}", pytrace=False) from None
    live = _live_run(item.config)
    if live is not None:  # the one seam of a live run: what the service does not do skips
        from ._fake.live import LiveMgmtServer as MgmtServer
    fake = MgmtServer(options, _mgmtauth_pool, test_id=item.nodeid, live=live)
    item.stash[_FAKE] = fake
    fake.use_clock_mover(_clock_mover(item))
    _sweep.arm(item, _mgmtauth_sweep, fake)
    scheduled = False  # whether an exploration's run brings faults of its own
    if item.get_closest_marker(_EXPLORE_MARKER) is not None:
        from ._glue import explore as _explore

        scheduled = _explore.arm(item, fake)  # this run's schedule
    restore_environment = fake.apply_environment()  # the intercept option's variables
    recorded = None if live is None else fake.record_exchanges()  # the service's answers
    checked = False
    try:
        # None: no snapshot records this test (or a live run, which writes them), or a
        # run of an exploration with faults, which the service's recording never met.
        drift = None if live is not None or scheduled else _drift.watch(item, fake)
        yield fake
        fake.check()
        check_findings(
            item,
            fake,
            call_failed=item.stash.get(_CALL_FAILED, False),
            in_section=item.stash.get(_SECTION_SHOWN, False),
        )
        if drift is not None:
            drift.check(item, fake)
        checked = True
    finally:
        try:
            if recorded is not None:
                from ._glue import live as _live

                passed = checked and not item.stash.get(_CALL_FAILED, False)
                _live.finish(item, fake, recorded, passed=passed)
        finally:
            # Whatever the recording did: interception's variables left set would send
            # every later test of the session to a closed fake.
            # The figures travel with the teardown report: JUnit XML properties, and the
            # terminal summary (also from xdist workers).
            item.user_properties.extend(fake.summary().as_properties())
            _sweep.disarm(item)
            restore_environment()
            fake.close()


def _wants_passing_sections(config: pytest.Config) -> bool:
    return bool(config.getoption("mgmtauth_report") or config.getoption("verbose") > 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown" and "pytest_mgmtauth._fake.session" in sys.modules:
        sys.modules["pytest_mgmtauth._fake.session"].settle_environment()  # see its text
    if report.when == "setup":
        # A rerun of the item (an exploration's, pytest-rerunfailures') starts afresh.
        item.stash[_CALL_FAILED] = False
        item.stash[_SECTION_SHOWN] = False
    if report.when in ("setup", "call") and not report.passed:
        # Failed, errored, skipped or xfailed (reported as skipped): findings only warn.
        item.stash[_CALL_FAILED] = True
    if report.when == "call" and _may_sweep(item):
        from ._glue import sweep as _sweep

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
    from ._glue.report import SECTION_TITLE

    try:
        text = fake.report_section()
    except Exception as exc:  # never let the report hide the test's own failure
        text = f"(pytest-mgmtauth could not build the timeline: {type(exc).__name__}: {exc})"
    report.sections.append((SECTION_TITLE, text))


def _live_run(config: pytest.Config) -> LiveRun | None:
    # Not a live run: the live glue is not imported.
    if not config.getoption("mgmtauth_live", False):
        return None
    from ._glue import live as _live

    return _live.run_of(config)


@pytest.fixture
def mgmt_account(mgmt_server: MgmtServer, pytestconfig: pytest.Config) -> Account:
    """One account on ``mgmt_server`` with every permission; in a live run, the account
    of the ``MGMTAUTH_LIVE_*`` variables."""
    if _live_run(pytestconfig) is not None:
        from ._glue import live as _live

        return _live.account()
    return mgmt_server.add_account()


@pytest.fixture
def mgmt_oauth_client(mgmt_server: MgmtServer, pytestconfig: pytest.Config) -> OAuthClient:
    """One OAuth client on ``mgmt_server`` whose scope is
    ``acme:main:tiq:2026-07:profiles:manage`` (account ``acme``, profile ``main``); in a
    live run, the client of the ``MGMTAUTH_LIVE_*`` variables."""
    if _live_run(pytestconfig) is not None:
        from ._glue import live as _live

        client: OAuthClient = _live.oauth_client()
        return client
    return mgmt_server.add_client()


@pytest.fixture
def mgmt_profile(pytestconfig: pytest.Config) -> Profile:
    """The v3 account and profile to use: ``Profile(account="acme", profile="main")``;
    in a live run, ``MGMTAUTH_LIVE_ACCOUNT`` and ``MGMTAUTH_LIVE_PROFILE``."""
    from ._glue import live as _live

    return _live.profile(pytestconfig)


@pytest.fixture
def mgmt_clock(pytestconfig: pytest.Config) -> Iterator[MgmtClock]:
    """Frozen simulated time (freezegun) that both the client and the fake see; in a
    live run, moving it skips the test."""
    from ._glue.clock import MgmtClock

    clock = MgmtClock().start()
    live = _live_run(pytestconfig)
    if live is not None:
        clock.fake_only = live.fake_only
    try:
        yield clock
    finally:
        clock.stop()
