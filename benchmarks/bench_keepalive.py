"""Keep-alive (issue 14): connections opened per 100 protected calls from one
``requests.Session`` (target 1), and the protected call's round trip with and without
connection reuse (the same fake and Session, alternating; without reuse each call sends
``Connection: close``).

    python benchmarks/bench_keepalive.py [--quick]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import Figure, alternate, median, per_call, print_figures, spread, table  # noqa: E402

from pytest_mgmtauth import Options  # noqa: E402
from pytest_mgmtauth._fake.server import MgmtServer  # noqa: E402
from pytest_mgmtauth._fake.session import SessionResources  # noqa: E402

CALLS = 100


def main(quick: bool = False) -> list[Figure]:
    rounds, batch = (10, 10) if quick else (60, 25)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    pool = SessionResources()
    kept = MgmtServer(Options(throttle=None), pool)
    try:
        account = kept.add_account()
        kept.route("GET", "/api/items").respond_with_json({"items": [1, 2, 3]})
        url = kept.url
        with requests.Session() as session:
            opened = kept._http.connections_accepted  # the auth's connection counts too
            answer = session.post(
                f"{url}/v2/auth", data={"username": account.username, "key": account.api_key}
            )
            bearer = {"Authorization": f"Bearer {answer.json()['token']}"}
            for _ in range(CALLS):
                session.get(f"{url}/api/items", headers=bearer).raise_for_status()
            per_100 = kept._http.connections_accepted - opened

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
            with_reuse, without_reuse = alternate(
                per_call(reuse, batch), per_call(no_reuse, batch), rounds
            )
    finally:
        kept.close()
        pool.close()
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
