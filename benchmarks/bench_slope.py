"""Issue 14: what each further test costs (the slope between a small and a large suite,
so that fixed costs cancel), and the fixed cost of a cold checkout (no pytest cache).

Three suites, each test authenticating and making one protected call with requests:
the plugin; a stock pytest-httpserver handler signing a real RS512-4096 JWT (key loaded
once per session); a stock handler answering a canned token. Small and large suites run
alternately; the fastest of several rounds of each counts. How busy the machine was
during the rounds (this benchmark, other processes, steal) is printed with the figures.

    python benchmarks/bench_slope.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import (  # noqa: E402
    Figure,
    MachineLoad,
    make_cold,
    print_figures,
    run_pytest,
    stock_key_pem,
    table,
)
from bench_suites import FAKE_TEST, STOCK_CONFTEST, STOCK_TEST, _suite  # noqa: E402

CANNED_CONFTEST = """
import json

import pytest
from werkzeug import Response

TOKEN = "eyJhbGciOiJSUzUxMiJ9.eyJzdWIiOiJzb21lb25lIn0.c2lnbmF0dXJl"


@pytest.fixture
def stock_auth():
    def handler(request):
        request.form["username"]
        return Response(json.dumps({"token": TOKEN}), content_type="application/json")

    return handler
"""


def _fastest(directory: Path, rounds: list[float], *, cold: bool = False) -> None:
    if cold:
        make_cold(directory)
    rounds.append(run_pytest(directory).wall)


def main(quick: bool = False) -> list[Figure]:
    small, large, rounds = (5, 25, 2) if quick else (100, 700, 5)
    key_pem = stock_key_pem()
    with tempfile.TemporaryDirectory(prefix="mgmtauth-slope-") as tmp:
        root = Path(tmp)
        suites: dict[tuple[str, int], Path] = {}
        for n in (small, large):
            suites["plugin", n] = _suite(root, f"plugin{n}", "import requests\n", FAKE_TEST, n)
            signing = _suite(
                root, f"signing{n}", "import requests\n", STOCK_TEST, n, STOCK_CONFTEST
            )
            (signing / "key.pem").write_bytes(key_pem)
            suites["signing", n] = signing
            suites["canned", n] = _suite(
                root, f"canned{n}", "import requests\n", STOCK_TEST, n, CANNED_CONFTEST
            )
        cold_plugin = _suite(root, "cold-plugin", "import requests\n", FAKE_TEST, 1)
        cold_canned = _suite(
            root, "cold-canned", "import requests\n", STOCK_TEST, 1, CANNED_CONFTEST
        )
        for directory in suites.values():  # warm-up (the plugin's key goes in its cache)
            run_pytest(directory)
        walls: dict[tuple[str, int], list[float]] = {key: [] for key in suites}
        cold: dict[str, list[float]] = {"plugin": [], "canned": []}
        order = list(suites)
        load = MachineLoad()
        for i in range(rounds):
            for key in order if i % 2 == 0 else reversed(order):
                _fastest(suites[key], walls[key])
            pair = [("plugin", cold_plugin), ("canned", cold_canned)]
            for name, directory in pair if i % 2 == 0 else reversed(pair):
                _fastest(directory, cold[name], cold=True)
        machine_load = load.describe()
    slope = {
        name: (min(walls[name, large]) - min(walls[name, small])) / (large - small)
        for name in ("plugin", "signing", "canned")
    }
    print(
        table(
            ["suite", f"fastest {small}", f"fastest {large}", "each further test"],
            [
                [
                    name,
                    f"{min(walls[name, small]):.2f} s",
                    f"{min(walls[name, large]):.2f} s",
                    f"{slope[name] * 1e3:.2f} ms",
                ]
                for name in ("plugin", "signing", "canned")
            ],
        )
    )
    print(
        f"cold 1-test run (no .pytest_cache): plugin {min(cold['plugin']):.2f} s, "
        f"canned {min(cold['canned']):.2f} s (fastest of {len(cold['plugin'])}); medians "
        f"{median(cold['plugin']):.2f} s and {median(cold['canned']):.2f} s, "
        f"{(median(cold['plugin']) - median(cold['canned'])) * 1e3:.0f} ms apart (both move: "
        "the plugin's key generation varies widely, the stock server's stop waits up to "
        "0.5 s)"
    )
    print(machine_load + "\n")
    return [
        Figure(
            "each further test vs a stock handler signing RS512-4096 (slope)",
            slope["plugin"],
            slope["signing"],
            "s",
            1.0,
            note=machine_load,
        ),
        Figure(
            "each further test vs a stock handler answering a canned token (slope)",
            slope["plugin"],
            slope["canned"],
            "s",
            1.45,
            note=machine_load,
        ),
        Figure(
            "fixed cost on a cold checkout (no pytest cache) beyond the canned suite's",
            min(cold["plugin"]),
            min(cold["canned"]),
            "s",
            1.0,
            kind="delta",
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    print_figures(main(parser.parse_args().quick))
