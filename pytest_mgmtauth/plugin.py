"""The pytest glue: fixtures, the ``mgmtauth`` marker, options, report header.

Thin on purpose: everything it builds comes from the modules below it.
"""

from __future__ import annotations

import dataclasses
import traceback
import warnings
from typing import TYPE_CHECKING, Any

import pytest

from ._assertions import TokenChurnWarning
from ._domain._options import OPTION_NAMES, Options, build_options, check_option_names
from ._fake import MgmtServer
from ._pool import KeyCache, SessionPool
from ._report import figures, format_table
from ._simclock import MgmtClock

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator, Sequence

    from pluggy import Result

    from ._domain._accounts import Account

_BASE_OPTIONS = pytest.StashKey[Options]()
#: Whether the test's call phase did not pass (the teardown check then only warns).
_CALL_FAILED = pytest.StashKey[bool]()
_KEY_CACHE_ENTRY = "mgmtauth/signing-key-pem"

_OPTION_HELP = {
    "token_ttl": "bearer token validity in seconds (default 1800)",
    "refresh_margin": "re-auth this many seconds before expiry counts as reuse (default 60)",
    "lockout_threshold": "failed v1 logins in a row that lock an account (default 5)",
    "lockout_duration": "seconds a lockout (error 1402) lasts (default 600)",
    "session_timeout": "idle seconds after which a v1 session ends (default 1800)",
    "throttle": "premature grants per account per 60 s before 429; 'none' turns it off (default 5)",
    "strict": "fail tests on token churn instead of warning (default false)",
    "https": "serve the fake over HTTPS with a per-session test CA (default false)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mgmtauth", "pytest-mgmtauth (fake management auth service)")
    group.addoption(
        "--mgmtauth-strict",
        action="store_true",
        default=None,
        help="fail tests whose client churns tokens (overrides the ini; markers still win)",
    )
    group.addoption(
        "--mgmtauth-report",
        action="store_true",
        default=False,
        help="show the mgmtauth summary (grants, API calls, rejections, churn per test) "
        "in the terminal; -v shows it too",
    )
    group.addoption(
        "--mgmtauth-https",
        action="store_true",
        default=None,
        help="serve the fake over HTTPS by default (overrides the ini; markers still win)",
    )
    for name in OPTION_NAMES:
        parser.addini(f"mgmtauth_{name}", _OPTION_HELP[name], type="string", default=None)


def _parse_ini(name: str, raw: str) -> Any:
    field_type = {f.name: f.type for f in dataclasses.fields(Options)}[name]
    text = raw.strip().lower()
    if field_type == "bool":
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"mgmtauth_{name} = {raw!r}: expected true or false")
    if name == "throttle" and text in ("none", "off", ""):
        return None
    whole = field_type.startswith("int")
    try:
        return int(text) if whole else float(text)
    except ValueError:
        wanted = "a whole number" if whole else "a number of seconds"
        raise ValueError(f"mgmtauth_{name} = {raw!r}: expected {wanted}") from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mgmtauth(**options): configure the fake management auth service (mgmt_server) for "
        f"this test, class or module; options: {', '.join(OPTION_NAMES)}",
    )
    overrides: dict[str, Any] = {}
    try:
        for name in OPTION_NAMES:
            raw = config.getini(f"mgmtauth_{name}")
            if raw:
                overrides[name] = _parse_ini(name, str(raw))
        for name in ("strict", "https"):
            if config.getoption(f"mgmtauth_{name}"):
                overrides[name] = True
        options = build_options(Options(), overrides, where="mgmtauth ini settings")
    except (TypeError, ValueError) as exc:
        # A usage error, not an INTERNALERROR traceback: the message says how to fix it.
        raise pytest.UsageError(str(exc)) from None
    config.stash[_BASE_OPTIONS] = options
    config.pluginmanager.register(_Report(config), "mgmtauth-report")


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


def _key_cache(config: pytest.Config) -> KeyCache | None:
    cache = getattr(config, "cache", None)
    if cache is None:  # -p no:cacheprovider
        return None

    def read() -> bytes | None:
        value = cache.get(_KEY_CACHE_ENTRY, None)
        return value.encode() if isinstance(value, str) else None

    def write(pem: bytes) -> None:
        cache.set(_KEY_CACHE_ENTRY, pem.decode())

    return read, write


@pytest.fixture(scope="session")
def _mgmtauth_pool(pytestconfig: pytest.Config) -> Iterator[SessionPool]:
    """The session's servers, signing key and test CA (made on first use). Internal:
    tests reach all of it through ``mgmt_server``."""
    pool = SessionPool(_key_cache(pytestconfig))
    yield pool
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


@pytest.fixture
def mgmt_server(
    request: pytest.FixtureRequest, _mgmtauth_pool: SessionPool
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
    try:
        yield fake
        fake._raise_server_errors()
        _check_churn(request.node, fake)
    finally:
        # The figures travel with the teardown report: JUnit XML properties, and the
        # terminal summary (also from xdist workers).
        request.node.user_properties.extend(fake._summary().as_properties())
        fake._close()


_STRICT_HINT = (
    "(pytest-mgmtauth checks this at the end of every test that uses mgmt_server. "
    "Fail such tests with @pytest.mark.mgmtauth(strict=True), the ini setting "
    "mgmtauth_strict = true or --mgmtauth-strict; check it in the test with "
    "mgmt_server.assert_token_reused(), which replaces this check.)"
)


def _check_churn(item: pytest.Item, fake: MgmtServer) -> None:
    """The teardown check: churn fails a strict test, else becomes a TokenChurnWarning."""
    __tracebackhide__ = True
    message = fake._churn_report()
    if message is None:
        return
    if fake.options.strict and not item.stash.get(_CALL_FAILED, False):
        pytest.fail(message, pytrace=False)
    # Attributed to the test function, not to this file, in pytest's warnings summary.
    path, lineno, _ = item.reportinfo()
    warnings.warn_explicit(
        TokenChurnWarning(f"{message}\n{_STRICT_HINT}"),
        TokenChurnWarning,
        filename=str(path),
        lineno=(lineno or 0) + 1,
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        # Failed, or xfailed (reported as skipped): churn then only warns.
        item.stash[_CALL_FAILED] = not report.passed


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
