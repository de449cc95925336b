"""Per-request cost of the fake against stock pytest-httpserver handlers.

1. A protected call (``GET /api/items`` with a bearer token) through the fake, which
   authenticates it before the route's handler answers, against the same call to a
   stock handler that answers without checking anything. Target: at most 1.25x.
2. ``POST /v2/auth`` against a stock handler that reads the same form and makes one
   RS512 signature with the same 4096-bit key. Target: at most 1.2x.

Baseline server: pytest-httpserver's ``HTTPServer(threaded=True)``, its request log
switched off (the fake logs nothing either); otherwise stock. Client: ``http.client``,
one new connection per request on both sides (stock Werkzeug closes every connection;
the fake would keep it alive): the fastest common client, so the fake's own overhead
shows most.

    python benchmarks/bench_calls.py [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import time
from urllib.parse import urlencode, urlsplit

import jwt
from _bench import Figure, alternate, median, per_call, print_figures, spread, table
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionResources
from pytest_mgmtauth._service.options import Options

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
ITEMS = {"items": [1, 2, 3]}


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


def _request(
    address: tuple[str, int], method: str, path: str, body: str | None, headers: dict[str, str]
) -> bytes:
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


def main(quick: bool = False) -> list[Figure]:
    rounds, batch = (30, 20) if quick else (120, 25)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # stock: request log off
    pool = SessionResources()
    signer = pool.signer
    # Throttling off: the benchmark asks for a token again and again on purpose.
    fake = MgmtServer(Options(throttle=None), pool)
    stock = HTTPServer(threaded=True)
    stock.start()
    try:
        account = fake.add_account()
        fake.route("GET", "/api/items").respond_with_json(ITEMS)
        fake_address = _address(fake.url)
        form = urlencode({"username": account.username, "key": account.api_key})
        token = json.loads(_request(fake_address, "POST", "/v2/auth", form, FORM))["token"]
        bearer = {"Authorization": f"Bearer {token}"}

        key = signer._private_key  # the very key object the fake signs with

        def stock_auth(request: Request) -> Response:
            now = int(time.time())
            payload = {"sub": request.form["username"], "iat": now, "exp": now + 1800}
            signed = jwt.encode(payload, key, algorithm="RS512")
            return Response(json.dumps({"token": signed}), content_type="application/json")

        stock.expect_request("/api/items", method="GET").respond_with_json(ITEMS)
        stock.expect_request("/v2/auth", method="POST").respond_with_handler(stock_auth)
        stock_address = _address(stock.url_for("/"))

        def fake_call() -> None:
            _request(fake_address, "GET", "/api/items", None, bearer)

        def stock_call() -> None:
            _request(stock_address, "GET", "/api/items", None, bearer)

        def fake_auth() -> None:
            _request(fake_address, "POST", "/v2/auth", form, FORM)

        def stock_auth_call() -> None:
            _request(stock_address, "POST", "/v2/auth", form, FORM)

        for fn in (fake_call, stock_call, fake_auth, stock_auth_call):  # warm up
            for _ in range(10):
                fn()

        call_fake, call_stock = alternate(
            per_call(fake_call, batch), per_call(stock_call, batch), rounds
        )

        auth_rounds = max(10, rounds // 2)
        fresh = [fake]

        def fake_auth_sample() -> float:
            # A new fake per sample, as each test gets: per-test state stays small.
            fresh[0].close()
            fresh[0] = MgmtServer(Options(throttle=None), pool)
            fresh[0]._service.accounts.add_account(
                account.username, api_key=account.api_key, password=account.password
            )
            # The account's first token is signed ahead (figure 9): take it untimed, so
            # that every timed grant signs on demand, as the stock handler does.
            fake_auth()
            return float(per_call(fake_auth, batch)())

        auth_fake, auth_stock = alternate(
            fake_auth_sample, per_call(stock_auth_call, batch), auth_rounds
        )
        fresh[0].close()
    finally:
        fake.close()
        stock.stop()
        pool.close()

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
