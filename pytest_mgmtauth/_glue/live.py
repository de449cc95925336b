"""Live runs: ``pytest --mgmtauth-live`` runs the tests marked ``mgmtauth_live`` against
the service itself (the fake forwards every request, ``_http/forward.py``) and writes
each test's exchanges into its module's snapshot, which ordinary runs verify the fake
against (``drift.py``).

Credentials come from the ``MGMTAUTH_LIVE_*`` variables only (docs/live.md); without the
flag nothing is live, whatever the environment holds. At the first refusal of the
credentials the run stops, so that a wrong variable cannot lock the user's account."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .._service.accounts import TEST_PROFILE, Account, Profile

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._fake.live import LiveRun
    from .._fake.server import MgmtServer
    from .._service.exchange_shape import Exchange


#: The marker of the tests a live run runs.
MARKER = "mgmtauth_live"
#: The live account's secrets and their variables.
_ACCOUNT_SECRETS = {"api_key": "MGMTAUTH_LIVE_API_KEY", "password": "MGMTAUTH_LIVE_PASSWORD"}
#: The variables that hold secrets: masked wherever a text quotes them.
_SECRET_VARIABLES = (*_ACCOUNT_SECRETS.values(), "MGMTAUTH_LIVE_CLIENT_SECRET")
#: For the project's own tests (docs/architecture.md): an https URL that receives every
#: forwarded request, and the CA bundle it is trusted by.
UPSTREAM = "MGMTAUTH_LIVE_UPSTREAM"
CAFILE = "MGMTAUTH_LIVE_CAFILE"
#: The user property that carries a test's recording to the terminal summary (also from
#: xdist workers).
_PROPERTY = "mgmtauth_live"
_RUN = pytest.StashKey["LiveRun"]()
#: The name :class:`LiveReport` is registered under.
_REPORT = "mgmtauth-live-report"


def _skip(reason: str) -> NoReturn:
    # Shown at the test's line, not this one (as a skip marker's reason is).
    raise pytest.skip.Exception(reason, _use_item_location=True)


def _value(name: str) -> str | None:
    return os.environ.get(name) or None


def configure(config: pytest.Config) -> None:
    from .._fake.live import live_run

    # A worker, or xdist's own test of whether the tests are distributed.
    dist = getattr(config.option, "dist", "no")
    if hasattr(config, "workerinput") or (dist != "no" and getattr(config.option, "tx", None)):
        raise pytest.UsageError(
            "--mgmtauth-live runs on one process: run it without -n (and without --dist "
            "or --tx). A live run stops at the first refused credential, and on xdist "
            "workers each would stop only itself: every worker would send the wrong "
            "credentials again, toward the service's lockout of the account"
        )
    secrets = tuple(value for name in _SECRET_VARIABLES if (value := _value(name)) is not None)
    try:
        run = live_run(
            upstream=_value(UPSTREAM), cafile=_value(CAFILE), secrets=secrets, fake_only=_skip
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_RUN] = run
    config.pluginmanager.register(LiveReport(config), _REPORT)


def run_of(config: pytest.Config) -> LiveRun | None:
    """The live run's link to the service (``--mgmtauth-live``); None in an ordinary run."""
    return config.stash.get(_RUN, None)


def skip_unmarked(items: list[pytest.Item]) -> None:
    """A live run runs only the tests marked ``mgmtauth_live``, and no sweep."""
    for item in items:
        if item.get_closest_marker(MARKER) is None:
            reason = (
                "not marked mgmtauth_live: a live run (--mgmtauth-live) runs only the tests "
                "marked @pytest.mark.mgmtauth_live, against the service"
            )
        elif _sweep_point(item):
            reason = (
                "a sweep point injects faults, which only the fake can do: skipped in a live "
                "run (--mgmtauth-live)"
            )
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=reason))


def _sweep_point(item: pytest.Item) -> bool:
    """Whether ``item`` runs a sweep's fault (its parametrization gives the point)."""
    callspec = getattr(item, "callspec", None)
    point = None if callspec is None else callspec.params.get("_mgmtauth_sweep")
    return getattr(point, "kind", None) is not None  # None: the baseline, no fault


def _needed(*names: str) -> list[str]:
    """The values of the variables ``names``; the test skips when some are not set."""
    missing = [name for name in names if _value(name) is None]
    if missing:
        _skip(
            f"{' and '.join(missing)} not set: a live run takes its credentials from the "
            "environment (the page Checked against the service)"
        )
    return [os.environ[name] for name in names]


class _LiveAccount(Account):
    """The live account: reading a secret whose variable is not set skips the test."""

    def __getattribute__(self, name: str) -> Any:
        if name in _ACCOUNT_SECRETS:
            _needed(_ACCOUNT_SECRETS[name])
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        return f"Account(username={self.username!r}, live)"


def account() -> Account:
    """The ``mgmt_account`` of a live run: the credentials of the variables."""
    (username,) = _needed("MGMTAUTH_LIVE_USERNAME")
    api_key, password = (_value(variable) or "" for variable in _ACCOUNT_SECRETS.values())
    return _LiveAccount(username=username, api_key=api_key, password=password)


def profile(config: pytest.Config) -> Profile:
    """The ``mgmt_profile``: the fake's (``acme``/``main``), or the variables' live."""
    if run_of(config) is None:
        return TEST_PROFILE
    return Profile(*_needed("MGMTAUTH_LIVE_ACCOUNT", "MGMTAUTH_LIVE_PROFILE"))


def oauth_client() -> Any:
    """The ``mgmt_oauth_client`` of a live run: a client of the flow whose clients are
    its own (the registry's), with the default one's scopes, for the variables' account
    and profile."""
    from .._service.flows.registry import client_flow

    return client_flow().live_client(
        *_needed(
            "MGMTAUTH_LIVE_CLIENT_ID",
            "MGMTAUTH_LIVE_CLIENT_SECRET",
            "MGMTAUTH_LIVE_ACCOUNT",
            "MGMTAUTH_LIVE_PROFILE",
        )
    )


def finish(item: pytest.Item, fake: MgmtServer, kept: list[Exchange], *, passed: bool) -> None:
    """After a live test, passed or not: what changed in the service since its earlier
    recording; its recording written (if it passed and every request was forwarded); the
    run stopped if the service refused the credentials. Why a test was not recorded is
    said by :class:`LiveReport`, from the test's reports. A snapshot that cannot be
    written fails the test (after the rest is done), naming it."""
    from .._service.exchange_shape import normalise
    from .drift import moved, shown, snapshot_path, write_record

    run = run_of(item.config)
    assert run is not None
    fake.stop_forwarding()  # a thread of the test still calling: refused from now on
    report = item.config.pluginmanager.get_plugin(_REPORT)
    if isinstance(report, LiveReport):
        # Still here: the secrets the service handed out in this test, to mask with.
        report.mask_why(item.nodeid, fake._service.timeline.redact)
    entry: dict[str, Any] = {"test": item.nodeid}
    problem = None
    region_host = fake.options.v3_host
    made = [normalise(e, region_host=region_host) for e in kept]
    changed = moved(item, made, whole=passed)
    if changed is not None:
        entry["changed"] = changed
    answered_here = fake.not_forwarded()
    if answered_here is not None:
        entry["not_recorded"] = f"a request was not forwarded to the service: {answered_here}"
    elif passed:
        today = datetime.now(timezone.utc).date().isoformat()
        path = snapshot_path(item.path)
        try:
            written = write_record(item, kept, today=today, region_host=region_host)
        except OSError as exc:
            problem = _not_written(item.config, path, exc)
            entry["not_recorded"] = problem
        else:
            entry["written"] = shown(item.config, path)
            entry["exchanges"] = len(kept)
            entry["file_changed"] = written
    if run.refused is not None:
        entry["refused"] = run.refused
        item.session.shouldstop = stop_message(run.refused)
    item.user_properties.append((_PROPERTY, json.dumps(entry)))
    if problem is not None:
        pytest.fail(f"pytest-mgmtauth: {problem}", pytrace=False)


def _not_written(config: pytest.Config, path: Path, exc: OSError) -> str:
    from .drift import shown

    cause = exc.strerror or type(exc).__name__
    if exc.filename:
        cause += f": {shown(config, Path(exc.filename))}"
    return (
        f"could not write the snapshot {shown(config, path)} ({cause}); the service's "
        f"answers to this test are not recorded: make {shown(config, path.parent)} a folder "
        "this run can write to, and run the test again with --mgmtauth-live"
    )


def stop_message(refused: str) -> str:
    return (
        f"pytest-mgmtauth: the service refused the live credentials ({refused}); the live "
        "run stopped here. Check the MGMTAUTH_LIVE_* variables before you run it again: the "
        "service locks an account after repeated failed logins (1402, for 10 minutes), "
        "and every run with wrong credentials counts"
    )


class LiveReport:
    """A live run's plugin: it skips the tests a live run does not run, and writes the
    ``mgmtauth live`` terminal section: the snapshots written, what changed since their
    earlier recordings (the service moved), every live test not recorded and why (with
    what changed: the client's failure beside the service's change), and a refusal that
    stopped the run."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self.entries: list[dict[str, Any]] = []
        #: Why each test did not pass: its first report that did not.
        self._why: dict[str, str] = {}
        #: Per module collected whole, the snapshot keys of its tests (stale entries).
        self._modules: dict[Path, set[str]] = {}

    @pytest.hookimpl(tryfirst=True)  # every test collected, before -k or -m deselect some
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from .drift import snapshot_key

        picked = _picked_tests(self._config)
        for item in items:
            if item.path not in picked:
                self._modules.setdefault(item.path, set()).add(snapshot_key(item))
        skip_unmarked(items)

    def mask_why(self, nodeid: str, redact: Callable[[str], str]) -> None:
        """Mask the service's secrets in why a live test did not pass: pytest's text of a
        failed assertion quotes the test's values (a cookie jar, with each cookie's
        value), and this section is written after the test's secrets are gone."""
        if nodeid in self._why:
            self._why[nodeid] = redact(self._why[nodeid])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.passed and report.nodeid not in self._why:
            self._why[report.nodeid] = _why(report)
        if report.when != "teardown":
            return
        found = [v for n, v in report.user_properties if n == _PROPERTY and isinstance(v, str)]
        if not found and MARKER not in report.keywords:
            return  # not a live test: skipped, and said so
        entry = json.loads(found[-1]) if found else {"test": report.nodeid}
        why = self._why.get(report.nodeid)
        if "not_recorded" in entry and why is not None and entry["not_recorded"] not in why:
            entry["not_recorded"] += f"; and {why}"  # a request not forwarded, and more
        elif "written" not in entry and "not_recorded" not in entry:
            entry["not_recorded"] = why or _NO_FAKE
        self.entries.append(entry)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        written = [e for e in self.entries if "written" in e]
        terminalreporter.section("mgmtauth live")
        snapshots = sorted({e["written"] for e in written})
        changed = {e["written"] for e in written if e.get("file_changed", True)}
        terminalreporter.line(
            f"{len(written)} test(s) recorded against the service into "
            f"{len(snapshots)} snapshot(s)" + (":" if snapshots else "")
        )
        for path in snapshots:
            terminalreporter.line(f"  {path}" + ("" if path in changed else " (unchanged)"))
        for entry in written:
            if "changed" in entry:
                terminalreporter.line(f"{entry['test']}: {entry['changed']}")
        missed = [e for e in self.entries if "not_recorded" in e]
        if missed:
            terminalreporter.line(f"{len(missed)} live test(s) not recorded:")
        for entry in missed:
            terminalreporter.line(f"{entry['test']}: not recorded: {entry['not_recorded']}")
            if "changed" in entry:
                for line in entry["changed"].splitlines():
                    terminalreporter.line(f"  {line}")
        for line in self._stale():
            terminalreporter.line(line)
        refused = next((e["refused"] for e in self.entries if "refused" in e), None)
        if refused is not None:
            terminalreporter.line(stop_message(refused), red=True)

    def _stale(self) -> list[str]:
        """The entries of tests a module collected whole no longer has: named, never
        dropped (a test that only some environments collect keeps its recording)."""
        from .._service.exchange_shape import Snapshot
        from .drift import shown, snapshot_path

        lines = []
        for module, keys in sorted(self._modules.items()):
            path = snapshot_path(module)
            try:
                recorded = Snapshot.loads(path.read_bytes()).tests
            except (OSError, ValueError):
                continue  # none, or broken: its tests' messages say so
            stale = sorted(set(recorded) - keys)
            if stale:
                lines.append(
                    f"{shown(self._config, path)}: stale entries, of tests "
                    f"{shown(self._config, module)} no longer has: {', '.join(stale)}. "
                    "Delete them from the file: no test checks them, and no live run "
                    "replaces them"
                )
        return lines


def _picked_tests(config: pytest.Config) -> set[Path]:
    """The modules some of whose tests the command line names (``mod.py::test_x``): not
    collected whole."""
    base = config.invocation_params.dir
    # As pytest makes an item's path: absolute, symbolic links not followed.
    return {Path(os.path.abspath(base / a.split("::", 1)[0])) for a in config.args if "::" in a}


#: Why a live test that passed has no recording when it left none: it used no fake.
_NO_FAKE = "it does not use mgmt_server, so it made no exchange to record"


def _why(report: pytest.TestReport) -> str:
    """Why the test was not recorded, from its report that did not pass."""
    if report.skipped:
        if hasattr(report, "wasxfail"):
            return "it failed, as marked xfail"
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return "it was skipped: " + reason.removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or report.longreprtext
    first = next((line for line in str(message).splitlines() if line.strip()), "")
    what = "it failed" if report.when == "call" else f"its {report.when} failed"
    return f"{what}: {first.strip()}" if first else what
