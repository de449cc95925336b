"""What the benchmarks share: alternating measurement, medians, one result table.

Every figure is a ratio of two things measured in the same run, in alternating order
(A B B A ...), so that drift and noise of a shared machine hit both sides alike.
"""

from __future__ import annotations

import atexit
import dataclasses
import http.client
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    # Only named here: importing it would load the fake into every benchmark process.
    from pytest_mgmtauth import MgmtServer

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Figure:
    """One line of the final table."""

    name: str
    value: float
    baseline: float | None
    unit: str
    target: float
    #: "ratio": value/baseline <= target; "max": value <= target; "delta": value-baseline.
    kind: str = "ratio"
    note: str = ""
    #: The measured ratio when it is not value/baseline (a median of paired ratios).
    ratio: float | None = None

    @property
    def measured(self) -> float:
        if self.kind == "ratio":
            if self.ratio is not None:
                return self.ratio
            assert self.baseline
            return self.value / self.baseline
        if self.kind == "delta":
            assert self.baseline is not None
            return self.value - self.baseline
        return self.value

    @property
    def met(self) -> bool:
        return self.measured <= self.target

    def row(self) -> list[str]:
        base = "" if self.baseline is None else fmt(self.baseline, self.unit)
        if self.kind == "ratio":
            got, want = f"{self.measured:.2f}x", f"<= {self.target:g}x"
        else:
            got, want = fmt(self.measured, self.unit), f"<= {fmt(self.target, self.unit)}"
        return [
            self.name,
            fmt(self.value, self.unit),
            base,
            got,
            want,
            "met" if self.met else "MISSED",
        ]


def fmt(value: float, unit: str) -> str:
    if unit == "s":
        if abs(value) < 1e-3:
            return f"{value * 1e6:.0f} us"
        if abs(value) < 1:
            return f"{value * 1e3:.2f} ms"
        return f"{value:.2f} s"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    return f"{value:g} {unit}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


FIGURE_HEADER = ["figure", "plugin", "baseline", "measured", "target", ""]


def print_figures(figures: Sequence[Figure]) -> None:
    print(table(FIGURE_HEADER, [f.row() for f in figures]))
    for f in figures:
        if f.note:
            print(f"  - {f.name}: {f.note}")


def alternate(
    a: Callable[[], float], b: Callable[[], float], rounds: int
) -> tuple[list[float], list[float]]:
    """Run ``a`` and ``b`` ``rounds`` times each in ABBA order; each returns one sample."""
    xs: list[float] = []
    ys: list[float] = []
    for i in range(rounds):
        if i % 2 == 0:
            xs.append(a())
            ys.append(b())
        else:
            ys.append(b())
            xs.append(a())
    return xs, ys


def per_call(fn: Callable[[], object], batch: int) -> Callable[[], float]:
    """A sampler: seconds per call of ``fn``, over a batch of calls."""

    def sample() -> float:
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        return (time.perf_counter() - start) / batch

    return sample


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread(xs: Sequence[float]) -> str:
    """Interquartile range as text, for the per-benchmark tables."""
    if len(xs) < 4:
        return "-"
    q = statistics.quantiles(xs, n=4)
    return f"{q[0] * 1e3:.2f}-{q[2] * 1e3:.2f} ms"


@dataclasses.dataclass
class Run:
    wall: float
    cpu: float  # user + system seconds of the child: less disturbed by a busy machine
    proc: subprocess.CompletedProcess[str]


def stock_key_pem(bits: int = 4096) -> bytes:
    """The stock stubs' signing key: an ordinary RSA key, as a user's own stub would make
    (and as the plugin makes its own)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_cold(directory: Path) -> None:
    """A fresh checkout of a generated suite: no pytest cache (the plugin's signing key
    is not there) and no compiled test modules. Installed packages keep their bytecode
    (pip compiles it at install; see run_pytest)."""
    shutil.rmtree(directory / ".pytest_cache", ignore_errors=True)
    shutil.rmtree(directory / "__pycache__", ignore_errors=True)


def run_pytest(directory: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    """Times of ``python -m pytest`` in ``directory`` (a fresh process, as users run)."""
    full_env = dict(os.environ)
    # The generated suites are not part of this repository's configuration.
    full_env.pop("PYTEST_ADDOPTS", None)
    # Python's default: compiled modules are cached, as on a user's machine. A sandbox
    # may set PYTHONDONTWRITEBYTECODE=1 (this one does), which would have every run
    # compile, and pytest rewrite, each module again: the plugin's ~40 of them included.
    full_env.pop("PYTHONDONTWRITEBYTECODE", None)
    full_env.update(env or {})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args],
        cwd=directory,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(
            f"generated suite failed in {directory} ({' '.join(args)}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return Run(elapsed, cpu, proc)


def _proc_stat_cpu() -> list[int] | None:
    """The machine's CPU time by kind, in clock ticks (the ``cpu`` line of /proc/stat:
    user, nice, system, idle, iowait, irq, softirq, steal, ...), or None off Linux."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":  # steal is the 8th figure (Linux 2.6.11 on)
        return None
    return [int(value) for value in fields[1:9]]


def _own_cpu() -> float:
    """CPU seconds of this process and of its children waited for so far."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


class MachineLoad:
    """How busy the machine was while a benchmark ran, in cores (CPU seconds per second
    of wall time): this benchmark (its process and the suites it ran), every other
    process, and the time the hypervisor gave to other machines (steal). A ratio of
    wall times holds only while the benchmark has the cores it expects: when other
    processes take one, a plugin that works on the second core (signing ahead, the
    server's threads) loses more than a stub that does not. Linux only (/proc/stat)."""

    def __init__(self) -> None:
        self._ticks = _proc_stat_cpu()
        self._own = _own_cpu()
        self._start = time.perf_counter()

    def describe(self) -> str:
        ticks = _proc_stat_cpu()
        if self._ticks is None or ticks is None:
            return "machine load: not known (no /proc/stat)"
        wall = time.perf_counter() - self._start
        hz = os.sysconf("SC_CLK_TCK")
        delta = [after - before for before, after in zip(self._ticks, ticks, strict=True)]
        busy = (delta[0] + delta[1] + delta[2] + delta[5] + delta[6]) / hz
        own = _own_cpu() - self._own
        others = max(0.0, busy - own)
        return (
            f"machine load over these {wall:.0f} s, in cores of {os.cpu_count()}: this "
            f"benchmark {own / wall:.2f}, other processes {others / wall:.2f}, "
            f"steal {delta[7] / hz / wall:.2f}"
        )


def machine() -> str:
    return (
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )


# -- the plugin's fixtures in this process -----------------------------------------------

#: A benchmark's measurement in one test: ``body(index, mgmt_server)``.
Body = Callable[[int, "MgmtServer"], None]

#: The settings of the in-process runs: the plugin and pytest's own plugins only; the
#: churn a benchmark makes on purpose (a grant before every sample) is allowed, and so
#: is pytest-httpserver imported before the run (by a benchmark's own stock server).
IN_TESTS_INI = (
    "[pytest]\n"
    "addopts = -p no:xdist -p no:hypothesispytest -p no:asyncio -p no:anyio -p no:randomly\n"
    "filterwarnings =\n"
    "    ignore::pytest_mgmtauth.AuthFindingWarning\n"
    "    ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning\n"
)
IN_TESTS_MODULE = """
def test_measure(bench_body, bench_index, mgmt_server):
    bench_body(bench_index, mgmt_server)
"""
_in_tests_dir: list[Path] = []


class _InTests:
    """The pytest plugin that hands a benchmark's body and options to the generated test."""

    def __init__(self, body: Body, options: Sequence[Mapping[str, Any]]) -> None:
        self.body = body
        self.options = options

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "bench_index" in metafunc.fixturenames:
            cases = [
                pytest.param(index, marks=pytest.mark.mgmtauth(**options))
                for index, options in enumerate(self.options)
            ]
            metafunc.parametrize("bench_index", cases)

    @pytest.fixture
    def bench_body(self) -> Body:
        return self.body


def in_tests(body: Body, options: Sequence[Mapping[str, Any]]) -> None:
    """Call ``body(index, mgmt_server)`` in one test per entry of ``options`` (that test's
    ``mgmtauth`` marker keywords), in order, in one pytest run in this process: each
    test's fake is the one the ``mgmt_server`` fixture gives a user's test. The runs of
    one process share a directory, and so pytest's cache with the plugin's signing key.
    Raises when a test fails (pytest's output above says why)."""
    if not _in_tests_dir:
        directory = Path(tempfile.mkdtemp(prefix="mgmtauth-bench-in-tests-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        (directory / "pytest.ini").write_text(IN_TESTS_INI)
        (directory / "test_measure.py").write_text(IN_TESTS_MODULE)
        _in_tests_dir.append(directory)
    directory = _in_tests_dir[0]
    # This repository's settings are not the generated test's.
    addopts = os.environ.pop("PYTEST_ADDOPTS", None)
    try:
        status = pytest.main([str(directory), "-q"], plugins=[_InTests(body, options)])
    finally:
        if addopts is not None:
            os.environ["PYTEST_ADDOPTS"] = addopts
        sys.modules.pop("test_measure", None)
    if status != 0:
        raise RuntimeError(f"the benchmark's tests failed (exit status {status}): see above")


def request(
    address: tuple[str, int], method: str, path: str, body: str | None, headers: dict[str, str]
) -> bytes:
    """One request on a new connection (``http.client``); its answer's body, or
    RuntimeError unless the status is 200."""
    conn = http.client.HTTPConnection(*address, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{method} {path} -> {answer.status}: {data[:300]!r}")
        return data
    finally:
        conn.close()
