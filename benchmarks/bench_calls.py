"""Per-request cost of the fake against stock pytest-httpserver handlers.

1. A protected call (``GET /api/items`` with a bearer token) through the fake, which
   authenticates it before the route's handler answers, against the same call to a
   stock handler that answers without checking anything. Target: at most 1.25x.
2. ``POST /v2/auth`` against a stock handler that reads the same form and makes one
   RS512 signature with the same 4096-bit key. Target: at most 1.2x.

The fake is the ``mgmt_server`` fixture's, in tests of one pytest run in this process
(``mgmtauth(throttle=None)``: the benchmark asks for a token again and again on
purpose): the call figure in one test, each grant sample in a test of its own, as each
test gets a fresh fake. Baseline server: pytest-httpserver's ``HTTPServer(threaded=True)``,
its request log switched off (the fake logs nothing either); otherwise stock; it signs
with a 4096-bit RSA key of its own, as the plugin's. Client: ``http.client``, one new
connection per request on both sides (stock Werkzeug closes every connection; the fake
would keep it alive): the fastest common client, so the fake's own overhead shows most.

    python benchmarks/bench_calls.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from urllib.parse import urlencode, urlsplit

import jwt
from _bench import (
    Figure,
    alternate,
    in_tests,
    median,
    per_call,
    print_figures,
    request,
    spread,
    stock_key_pem,
    table,
)
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from pytest_mgmtauth import MgmtServer

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
ITEMS = {"items": [1, 2, 3]}


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


def main(quick: bool = False) -> list[Figure]:
    rounds, batch = (30, 20) if quick else (120, 25)
    auth_rounds = max(10, rounds // 2)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # stock: request log off
    key = load_pem_private_key(stock_key_pem(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    stock = HTTPServer(threaded=True)
    stock.start()
    call_fake: list[float] = []
    call_stock: list[float] = []
    auth_fake: list[float] = []
    auth_stock: list[float] = []
    try:

        def stock_auth(request: Request) -> Response:
            now = int(time.time())
            payload = {"sub": request.form["username"], "iat": now, "exp": now + 1800}
            signed = jwt.encode(payload, key, algorithm="RS512")
            return Response(json.dumps({"token": signed}), content_type="application/json")

        stock.expect_request("/api/items", method="GET").respond_with_json(ITEMS)
        stock.expect_request("/v2/auth", method="POST").respond_with_handler(stock_auth)
        stock_address = _address(stock.url_for("/"))

        def measure(index: int, fake: MgmtServer) -> None:
            account = fake.add_account()
            fake.route("GET", "/api/items").respond_with_json(ITEMS)
            fake_address = _address(fake.url)
            form = urlencode({"username": account.username, "key": account.api_key})

            def fake_auth() -> None:
                request(fake_address, "POST", "/v2/auth", form, FORM)

            def stock_auth_call() -> None:
                request(stock_address, "POST", "/v2/auth", form, FORM)

            # The account's first token is signed ahead (figure 9): take it untimed, so
            # that every timed grant signs on demand, as the stock handler does.
            token = json.loads(request(fake_address, "POST", "/v2/auth", form, FORM))["token"]
            if index > 0:  # a grant sample, on this test's fresh fake
                fake_sample = per_call(fake_auth, batch)
                stock_sample = per_call(stock_auth_call, batch)
                if index % 2:
                    auth_fake.append(fake_sample())
                    auth_stock.append(stock_sample())
                else:
                    auth_stock.append(stock_sample())
                    auth_fake.append(fake_sample())
                return
            bearer = {"Authorization": f"Bearer {token}"}

            def fake_call() -> None:
                request(fake_address, "GET", "/api/items", None, bearer)

            def stock_call() -> None:
                request(stock_address, "GET", "/api/items", None, bearer)

            for fn in (fake_call, stock_call, fake_auth, stock_auth_call):  # warm up
                for _ in range(10):
                    fn()
            xs, ys = alternate(per_call(fake_call, batch), per_call(stock_call, batch), rounds)
            call_fake.extend(xs)
            call_stock.extend(ys)

        # Test 0: the protected call, one fake for every round; then one test per grant
        # sample, the fake and the stock handler taking turns to go first (A B B A ...).
        in_tests(measure, [{"throttle": None}] * (1 + auth_rounds))
    finally:
        stock.stop()

    print(
        table(
            ["request", "fake median", "fake IQR", "stock median", "stock IQR", "samples"],
            [
                [
                    "GET /api/items (bearer)",
                    f"{median(call_fake) * 1e3:.3f} ms",
                    spread(call_fake),
                    f"{median(call_stock) * 1e3:.3f} ms",
                    spread(call_stock),
                    f"{rounds} x {batch}",
                ],
                [
                    "POST /v2/auth (RS512 4096)",
                    f"{median(auth_fake) * 1e3:.3f} ms",
                    spread(auth_fake),
                    f"{median(auth_stock) * 1e3:.3f} ms",
                    spread(auth_stock),
                    f"{auth_rounds} x {batch}",
                ],
            ],
        )
    )
    return [
        Figure(
            "protected call vs stock handler",
            median(call_fake),
            median(call_stock),
            "s",
            1.25,
        ),
        Figure(
            "/v2/auth vs stock POST + RS512 sign",
            median(auth_fake),
            median(auth_stock),
            "s",
            1.2,
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    figures = main(parser.parse_args().quick)
    print()
    print_figures(figures)
