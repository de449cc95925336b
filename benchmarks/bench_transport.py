"""Transport benchmark: HTTPS against HTTP, and concurrent slow handlers.

A script, not a test: timings never decide whether a test passes. It measures, side by
side in one run, with the two schemes alternating in every round (ABBA order) so that
machine noise hits both alike, and reports medians:

* the round trip of a protected API call (``GET`` with a bearer token) with
  http.client, requests and httpx; target: HTTPS within 2.5x of HTTP. The http.client
  call opens a new connection each time, so its HTTPS side pays a TLS handshake per
  request; requests and httpx reuse their pooled connection (keep-alive);
* the same over HTTPS with TLS session tickets switched back on, the server's setting
  before it was tuned: the diagnostic row that shows where the time went;
* eight clients calling a route whose handler takes 100 ms, all at once; target: all
  eight answered within 200 ms (a serialising server would need 800 ms).

Run from the repository root::

    python benchmarks/bench_transport.py            # about 20 s
    python benchmarks/bench_transport.py --rounds 1000 --check   # exit 1 on a miss
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import ssl
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import requests
from werkzeug import Request, Response

from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionResources
from pytest_mgmtauth._http.server import FakeHTTPServer
from pytest_mgmtauth._service.options import Options

RATIO_TARGET = 2.5
CONCURRENT_CLIENTS = 8
HANDLER_SECONDS = 0.100
CONCURRENT_TARGET = 0.200

Call = Callable[[], None]


@dataclass
class Target:
    """One fake (HTTP or HTTPS) with a token, a fast route and a slow route."""

    name: str
    fake: MgmtServer
    token: str
    url: str
    client_context: ssl.SSLContext | None

    @property
    def hostport(self) -> str:
        return urlsplit(self.url).netloc


def make_target(name: str, pool: SessionResources, *, https: bool) -> Target:
    fake = MgmtServer(Options(https=https, throttle=None), pool)
    fake.route("GET", "/api/ping").respond_with_json({"ok": True})

    def slow(request: Request) -> Response:
        time.sleep(HANDLER_SECONDS)
        return Response("done", content_type="text/plain")

    fake.route("GET", "/api/slow").respond_with_handler(slow)
    account = fake.add_account()
    reply = requests.post(
        f"{fake.url}/v2/auth",
        data={"username": account.username, "key": account.api_key},
        verify=fake.ca_bundle or True,
        timeout=10,
    )
    reply.raise_for_status()
    return Target(name, fake, reply.json()["token"], fake.url, fake.client_ssl_context())


def ticketed_twin(pool: SessionResources, https_target: Target) -> tuple[Target, FakeHTTPServer]:
    """A second HTTPS server bound to the same state, with TLS session tickets on (the
    server's setting before tuning): the diagnostic row."""
    context = pool.ca.server_context()
    context.num_tickets = 2  # OpenSSL's default for TLS 1.3
    context.options &= ~ssl.OP_NO_TICKET
    server = FakeHTTPServer(ssl_context=context)
    server.start()
    server.app.bind(https_target.fake._binding)
    twin = Target(
        "https+tickets",
        https_target.fake,
        https_target.token,
        server.base_url,
        https_target.client_context,
    )
    return twin, server


# -- clients ----------------------------------------------------------------------------


def http_client_call(target: Target, path: str = "/api/ping") -> Call:
    headers = {"Authorization": f"Bearer {target.token}"}

    def call() -> None:
        if target.client_context is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                target.hostport, context=target.client_context, timeout=10
            )
        else:
            conn = http.client.HTTPConnection(target.hostport, timeout=10)
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
        finally:
            conn.close()

    return call


def requests_call(target: Target) -> Call:
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would override verify
    session.verify = target.fake.ca_bundle or True
    session.headers["Authorization"] = f"Bearer {target.token}"
    url = f"{target.url}/api/ping"

    def call() -> None:
        response = session.get(url, timeout=10)
        assert response.status_code == 200, response.status_code

    return call


def httpx_call(target: Target) -> Call:
    client = httpx.Client(
        verify=target.client_context or True,
        headers={"Authorization": f"Bearer {target.token}"},
        timeout=10,
    )
    url = f"{target.url}/api/ping"

    def call() -> None:
        response = client.get(url)
        assert response.status_code == 200, response.status_code

    return call


# -- measuring --------------------------------------------------------------------------


def alternate(calls: dict[str, Call], rounds: int, warmup: int) -> dict[str, float]:
    """Median seconds per call, the calls taking turns in ABBA order every round."""
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    clock = time.perf_counter
    for index in range(warmup + rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            start = clock()
            calls[name]()
            elapsed = clock() - start
            if index >= warmup:
                samples[name].append(elapsed)
    return {name: statistics.median(values) for name, values in samples.items()}


def concurrent_slow_calls(target: Target) -> Call:
    """Eight threads call the 100 ms route at once; the call returns when all are done."""

    def call() -> None:
        start = threading.Barrier(CONCURRENT_CLIENTS + 1)
        errors: list[BaseException] = []
        one = http_client_call(target, "/api/slow")

        def worker() -> None:
            start.wait()
            try:
                one()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(CONCURRENT_CLIENTS)]
        for thread in threads:
            thread.start()
        start.wait()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    return call


# -- report -----------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=400, help="round-trip rounds (400)")
    parser.add_argument("--concurrent-rounds", type=int, default=25, help="rounds of 8 (25)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    pool = SessionResources()
    plain = make_target("http", pool, https=False)
    tls = make_target("https", pool, https=True)
    ticketed, ticketed_server = ticketed_twin(pool, tls)
    rows: list[tuple[str, str, str, str, str, str]] = []
    missed = 0
    try:
        clients: list[tuple[str, Callable[[Target], Call]]] = [
            ("http.client", http_client_call),
            ("requests.Session", requests_call),
            ("httpx.Client", httpx_call),
        ]
        for label, make in clients:
            calls = {"http": make(plain), "https": make(tls)}
            if label == "http.client":
                calls["https+tickets"] = make(ticketed)
            medians = alternate(calls, args.rounds, warmup=max(10, args.rounds // 20))
            ratio = medians["https"] / medians["http"]
            ok = ratio <= RATIO_TARGET
            missed += not ok
            rows.append(
                (
                    f"round trip, {label}",
                    ms(medians["http"]),
                    ms(medians["https"]),
                    f"{ratio:5.2f}x",
                    f"<= {RATIO_TARGET}x",
                    "ok" if ok else "MISSED",
                )
            )
            if "https+tickets" in medians:
                rows.append(
                    (
                        "  same, TLS session tickets on",
                        ms(medians["http"]),
                        ms(medians["https+tickets"]),
                        f"{medians['https+tickets'] / medians['http']:5.2f}x",
                        "(diagnostic)",
                        "",
                    )
                )
        medians = alternate(
            {"http": concurrent_slow_calls(plain), "https": concurrent_slow_calls(tls)},
            args.concurrent_rounds,
            warmup=2,
        )
        for scheme in ("http", "https"):
            ok = medians[scheme] <= CONCURRENT_TARGET
            missed += not ok
            rows.append(
                (
                    f"{CONCURRENT_CLIENTS} concurrent 100 ms handlers, {scheme}",
                    ms(medians["http"]) if scheme == "http" else "",
                    ms(medians["https"]) if scheme == "https" else "",
                    "",
                    f"<= {CONCURRENT_TARGET * 1000:.0f} ms",
                    "ok" if ok else "MISSED",
                )
            )
    finally:
        ticketed_server.stop()
        pool.close()

    print(
        f"pytest-mgmtauth transport benchmark: Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, OpenSSL {ssl.OPENSSL_VERSION.split()[1]}; medians of "
        f"{args.rounds} rounds (round trips) and {args.concurrent_rounds} rounds "
        "(concurrency), HTTP and HTTPS alternating"
    )
    header = ("measure", "HTTP", "HTTPS", "ratio", "target", "")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
