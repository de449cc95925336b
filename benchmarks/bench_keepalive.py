"""Keep-alive (issue 14): connections opened per 100 protected calls from one
``requests.Session`` (target 1), and the protected call's round trip with and without
connection reuse (the same fake and Session, alternating; without reuse each call sends
``Connection: close``).

The fake is the ``mgmt_server`` fixture's, in one test of a pytest run in this process;
the Session counts the TCP connections it opens (reconnections too) through a transport
adapter of its own.

    python benchmarks/bench_keepalive.py [--quick]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import (  # noqa: E402
    Figure,
    alternate,
    in_tests,
    median,
    per_call,
    print_figures,
    spread,
    table,
)

from pytest_mgmtauth import MgmtServer  # noqa: E402

CALLS = 100
#: TCP connections the counting adapter's pools have opened.
OPENED = [0]


class _CountingConnection(urllib3.connection.HTTPConnection):
    """urllib3's connection, counting each TCP connection it opens (reconnections too)."""

    def connect(self) -> None:
        OPENED[0] += 1
        super().connect()


class _CountingPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _CountingConnection


class _CountingAdapter(HTTPAdapter):
    """requests' own adapter, its plain-HTTP pools counting their connections."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            **self.poolmanager.pool_classes_by_scheme,
            "http": _CountingPool,
        }


def main(quick: bool = False) -> list[Figure]:
    rounds, batch = (10, 10) if quick else (60, 25)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    measured: dict[str, Any] = {}

    def measure(index: int, kept: MgmtServer) -> None:
        account = kept.add_account()
        kept.route("GET", "/api/items").respond_with_json({"items": [1, 2, 3]})
        url = kept.url
        with requests.Session() as session:
            session.trust_env = False  # no proxy from the environment: the fake is local
            session.mount("http://", _CountingAdapter())
            opened = OPENED[0]  # the auth's connection counts too
            answer = session.post(
                f"{url}/v2/auth", data={"username": account.username, "key": account.api_key}
            )
            bearer = {"Authorization": f"Bearer {answer.json()['token']}"}
            for _ in range(CALLS):
                session.get(f"{url}/api/items", headers=bearer).raise_for_status()
            measured["per_100"] = OPENED[0] - opened

            def reuse() -> None:
                session.get(f"{url}/api/items", headers=bearer).raise_for_status()

            def no_reuse() -> None:
                # The same Session, told to close: a new TCP connection per call, as
                # before keep-alive (Connection: close on every answer).
                session.get(
                    f"{url}/api/items", headers={**bearer, "Connection": "close"}
                ).raise_for_status()

            for fn in (reuse, no_reuse):  # warm up
                for _ in range(10):
                    fn()
            measured["reuse"], measured["no_reuse"] = alternate(
                per_call(reuse, batch), per_call(no_reuse, batch), rounds
            )

    in_tests(measure, [{"throttle": None}])
    per_100: int = measured["per_100"]
    with_reuse: list[float] = measured["reuse"]
    without_reuse: list[float] = measured["no_reuse"]
    print(
        table(
            ["protected call (requests.Session)", "median", "IQR", "samples"],
            [
                [
                    "keep-alive (reused)",
                    f"{median(with_reuse) * 1e3:.3f} ms",
                    spread(with_reuse),
                    str(len(with_reuse)),
                ],
                [
                    "new connection each",
                    f"{median(without_reuse) * 1e3:.3f} ms",
                    spread(without_reuse),
                    str(len(without_reuse)),
                ],
            ],
        )
    )
    print(f"connections opened for {CALLS} protected calls from one Session: {per_100}\n")
    return [
        Figure(
            f"connections opened per {CALLS} protected calls from one requests.Session",
            float(per_100),
            None,
            "",
            1.0,
            kind="max",
        ),
        Figure(
            "protected call round trip, reused connection vs a new one each call",
            median(with_reuse),
            median(without_reuse),
            "s",
            1.0,
            note="the reused connection must not be slower than a new one",
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    print_figures(main(parser.parse_args().quick))
