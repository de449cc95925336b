"""The rows of CI's matrix, for contributors too: ``nox`` runs the rows CI runs,
``nox -l`` lists every row, ``nox -s tests-3.12`` runs one.

CI (``.ci/run``) runs the README's install and commands first: the whole suite at full
depth (``pytest``, then ``pytest -n 2``) on the Python ``python3`` names, 3.11 with the
newest dependencies. That is its main row; the rows here run beside it:

- ``examples``: the README's first minutes: ``pip install -e .`` and the HTTP clients
  the examples use, nothing else (no test extra: no pytest-asyncio), then
  ``pytest docs/examples`` (the async examples skip and say what they need);
- ``release``: sdist and wheel built, ``twine check``, then tests/release against them
  (the sdist holds the tests and the docs, the wheel installed in a new virtualenv runs a
  user's first test). It runs in the environment nox runs in (``.[test]`` installed);
- ``plugins``: docs/examples and the pytester tests (``PLUGIN_TESTS``) beside
  pytest-asyncio in auto mode, pytest-randomly, pytest-rerunfailures and pytest-pretty;
  docs/examples again under ``--import-mode=importlib``;
- ``floors``: the whole suite on the oldest Python with every runtime dependency at its
  floor, pinned exactly by constraints/floors.txt;
- ``pytest8``: the plugin's hooks and fixtures at work in pytest (``PLUGIN_TESTS``,
  tests/sweeps, docs/examples) with the newest pytest 8.x (the other rows have 9.x), on
  the newest Python;
- ``tests-3.13``: the suite and docs/examples on the newest Python with the newest
  dependencies, without ``PLUGIN_TESTS`` and tests/concurrency (pytester and xdist runs
  of pytest itself: the main and floors rows run them, and pytest8 runs ``PLUGIN_TESTS``
  on this Python);
- ``tests-3.12``: a smoke selection (``SMOKE_ROW``: docs/examples, the v2 flow, the HTTP
  layer, routes) on the Python between; the whole suite runs on the oldest (floors), the
  main row's (3.11) and the newest, which keeps CI's time in bounds as the suite grows;
- ``tests-3.10``, ``tests-3.11`` (not in CI's list: floors and the main row run the
  whole suite on them): the same selection as ``tests-3.13``, for a contributor.

Every row runs the hostile fuzz tests at ``ROW_HOSTILE_EXAMPLES`` generated requests
each; the main row at the suite's default (1000).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nox

SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
OLDEST, NEWEST = SUPPORTED[0], SUPPORTED[-1]
ROOT = Path(__file__).resolve().parent
FLOORS = ROOT / "constraints" / "floors.txt"
#: Generated requests per hostile fuzz test in the matrix rows (the suite's default: 1000).
ROW_HOSTILE_EXAMPLES = "100"
#: Plugins users often have installed beside ours (the plugins row).
USER_PLUGINS = ("pytest-asyncio", "pytest-randomly", "pytest-rerunfailures", "pytest-pretty")
#: Every row but plugins runs in the suite's own order (no pytest-randomly there anyway).
RUN = ("-n", "2", "-p", "no:randomly", "-q")
WHOLE_SUITE = ("docs/examples", "tests")
#: The plugin's hooks and fixtures as a user's suite meets them: the modules that run a
#: suite with pytester (in process, in subprocesses, under xdist). tests/ is sorted by
#: feature, so they are named one by one.
PLUGIN_TESTS = (
    "tests/fixtures/test_fixtures.py",
    "tests/fixtures/test_late_errors.py",
    "tests/fixtures/test_lazy_start.py",
    "tests/flows/test_flow_defined_here.py",
    "tests/options/test_marker_options.py",
    "tests/rate_limits/test_rate_limits_plugin.py",
    "tests/scim/test_scim_flow.py",
    "tests/tokens/test_signing_key_cache.py",
    "tests/verdicts/test_right_verdicts_plugin.py",
    "tests/verdicts/test_teardown_and_report.py",
    "tests/verdicts/test_verdicts.py",
)
#: The tests that drive pytest itself: in-process and subprocess pytester runs, xdist.
PYTEST_DRIVEN = (*PLUGIN_TESTS, "tests/concurrency")
#: The Pythons between the oldest, the main row's (3.11) and the newest: a smoke selection.
BETWEEN = ("3.12",)
SMOKE_ROW = ("docs/examples", "tests/v2", "tests/http", "tests/routes")
# A moved or renamed module would silently drop out of --ignore: say so instead.
_MISSING = [path for path in (*PYTEST_DRIVEN, *SMOKE_ROW) if not (ROOT / path).exists()]
if _MISSING:
    raise SystemExit(f"noxfile.py names test paths that are not there: {_MISSING}")
PYTHON_ROW = (*WHOLE_SUITE, *(f"--ignore={path}" for path in PYTEST_DRIVEN))
PYTEST_ROW = ("docs/examples", *PLUGIN_TESTS, "tests/sweeps")
#: What docs/examples import beside the plugin and its dependencies (the examples row).
EXAMPLE_CLIENTS = ("requests", "httpx", "aiohttp")

# What `nox` runs, in this order (the quick and the pytest-facing rows first), and CI too.
nox.options.sessions = [
    "examples",
    "release",
    "plugins",
    "floors",
    "pytest8",
    *(f"tests-{version}" for version in (*BETWEEN, NEWEST)),
]
nox.options.error_on_missing_interpreters = True
# A missing Python is an error to fix on the machine, not something to download.
nox.options.download_python = "never"
nox.options.reuse_venv = "yes"
# uv (in the test extra) makes a row's virtualenv and installs into it in seconds.
nox.options.default_venv_backend = "uv|virtualenv"


def _let_pyenv_shims_answer_for(versions: tuple[str, ...]) -> None:
    """Make ``python3.10`` ... ``python3.13`` resolve through pyenv's shims.

    A shim answers only for the versions pyenv has selected (one, usually). Listing every
    supported version in PYENV_VERSION, the selected one first so ``python3`` keeps its
    meaning, lets nox find each interpreter by name. Without pyenv, or with
    PYENV_VERSION already set, nothing changes and nox looks on PATH as usual.
    """
    if os.environ.get("PYENV_VERSION") or shutil.which("pyenv") is None:
        return

    def pyenv(*args: str) -> str | None:
        done = subprocess.run(["pyenv", *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    names = [name for name in [pyenv("version-name")] if name]
    for version in versions:
        prefix = pyenv("prefix", version)
        if prefix and Path(prefix).name not in names:
            names.append(Path(prefix).name)
    os.environ["PYENV_VERSION"] = ":".join(names)


_let_pyenv_shims_answer_for(SUPPORTED)


def _row_env() -> dict[str, str]:
    return {"MGMTAUTH_HOSTILE_EXAMPLES": ROW_HOSTILE_EXAMPLES}


@nox.session(python=SUPPORTED)
def tests(session: nox.Session) -> None:
    """The suite but the pytest-driven tests, newest dependencies (3.12: a smoke set)."""
    session.install(".[test]")
    selection = SMOKE_ROW if session.python in BETWEEN else PYTHON_ROW
    session.run("pytest", *RUN, *(session.posargs or selection), env=_row_env())


@nox.session(python="3.11")
def examples(session: nox.Session) -> None:
    """`pytest docs/examples` after `pip install -e .` and the HTTP clients alone."""
    session.install("-e", ".", *EXAMPLE_CLIENTS)
    session.run("pytest", "docs/examples", *session.posargs)


@nox.session(python=OLDEST)
def floors(session: nox.Session) -> None:
    """The suite on the oldest Python with every runtime dependency at its declared floor."""
    session.install("-c", str(FLOORS), ".[test]")
    # pip honours a constraint only for what it installs: make sure each floor is what
    # the suite runs against, so a dependency dropped from pyproject cannot pass silently.
    session.run("python", "-c", _CHECK_PINNED, str(FLOORS))
    # pytest-asyncio 0.23, the newest for pytest 7.4, leaves a new event loop open after
    # each of its tests (for code that calls get_event_loop); garbage-collected later, it
    # warns, and filterwarnings=error turns that into another test's error.
    leak = ("-W", "ignore:unclosed event loop:ResourceWarning")
    session.run("pytest", *RUN, *leak, *(session.posargs or WHOLE_SUITE), env=_row_env())


@nox.session(python=NEWEST)
def pytest8(session: nox.Session) -> None:
    """The plugin's hooks and fixtures at work, with the newest pytest 8.x."""
    session.install(".[test]", "pytest>=8,<9")
    session.run("pytest", *RUN, *(session.posargs or PYTEST_ROW), env=_row_env())


@nox.session(python="3.11")
def plugins(session: nox.Session) -> None:
    """docs/examples and the pytester tests beside plugins users have installed."""
    session.install(".[test]", *USER_PLUGINS)
    # pytest-randomly reorders (its seed is printed for a rerun); pytest-asyncio in auto
    # mode takes every async test (strict mode is the ini's, the main row's).
    session.run(
        "pytest", "-n", "2", "-o", "asyncio_mode=auto", "docs/examples", *PLUGIN_TESTS,
        *session.posargs,
    )  # fmt: skip
    session.run("pytest", "-n", "2", "--import-mode=importlib", "docs/examples")


@nox.session(venv_backend="none")
def release(session: nox.Session) -> None:
    """Build the sdist and the wheel, check their metadata, and test what they hold."""
    # Not session.create_tmp(): it points TMPDIR into the checkout, and the wheel's test
    # must run in a project outside it.
    dist = ROOT / ".nox" / "release-dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT))
    session.run("twine", "check", "--strict", *sorted(str(path) for path in dist.iterdir()))
    session.run(
        "pytest", "-p", "no:randomly", "tests/release", *session.posargs,
        env={"MGMTAUTH_DIST_DIR": str(dist)},
    )  # fmt: skip


_CHECK_PINNED = """
import sys
from importlib.metadata import version
from packaging.requirements import Requirement

wrong = []
for line in open(sys.argv[1]).read().splitlines():
    line = line.split("#")[0].strip()
    if line:
        pin = Requirement(line)
        (wanted,) = [spec.version for spec in pin.specifier]
        if version(pin.name) != wanted:
            wrong.append(f"{pin.name} {version(pin.name)} (floor {wanted})")
if wrong:
    sys.exit("not at the floor: " + ", ".join(wrong))
print("every runtime dependency at its floor")
"""
