"""Transport benchmark: HTTPS against HTTP, and concurrent slow handlers.

A script, not a test: timings never decide whether a test passes. It measures, side by
side in one run, and reports medians:

* the round trip of a protected API call (``GET`` with a bearer token) with
  http.client, requests and httpx; target: HTTPS within 2.5x of HTTP. The http.client
  call opens a new connection each time, so its HTTPS side pays a TLS handshake per
  request; requests and httpx reuse their pooled connection (keep-alive);
* eight clients calling a route whose handler takes 100 ms, all at once; target: all
  eight answered within 200 ms (a serialising server would need 800 ms).

The fakes are the ``mgmt_server`` fixture's, in tests of one pytest run in this process:
a test serves one scheme (``mgmtauth(https=...)``), so the two schemes take turns test
by test (HTTP, HTTPS, HTTPS, HTTP, ...) so that machine noise hits both alike, each test
taking its share of every client's rounds.

Run from the repository root::

    python benchmarks/bench_transport.py            # about 20 s
    python benchmarks/bench_transport.py --rounds 1000 --check   # exit 1 on a miss
"""

from __future__ import annotations

import argparse
import http.client
import math
import os
import platform
import ssl
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import requests
from werkzeug import Request, Response

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import in_tests  # noqa: E402

from pytest_mgmtauth import MgmtServer  # noqa: E402

RATIO_TARGET = 2.5
CONCURRENT_CLIENTS = 8
HANDLER_SECONDS = 0.100
CONCURRENT_TARGET = 0.200
#: Tests per scheme: each takes its share of the rounds.
TESTS_PER_SCHEME = 10
#: Untimed calls per client at the start of each test (connections, TLS sessions).
WARMUP = 3

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


def make_target(fake: MgmtServer) -> Target:
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
    name = "https" if fake.url.startswith("https:") else "http"
    return Target(name, fake, reply.json()["token"], fake.url, fake.client_ssl_context())


# -- clients ----------------------------------------------------------------------------


def http_client_call(target: Target, stack: ExitStack, path: str = "/api/ping") -> Call:
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


def requests_call(target: Target, stack: ExitStack) -> Call:
    session = stack.enter_context(requests.Session())
    session.trust_env = False  # REQUESTS_CA_BUNDLE would override verify
    session.verify = target.fake.ca_bundle or True
    session.headers["Authorization"] = f"Bearer {target.token}"
    url = f"{target.url}/api/ping"

    def call() -> None:
        response = session.get(url, timeout=10)
        assert response.status_code == 200, response.status_code

    return call


def httpx_call(target: Target, stack: ExitStack) -> Call:
    client = stack.enter_context(
        httpx.Client(
            verify=target.client_context or True,
            headers={"Authorization": f"Bearer {target.token}"},
            timeout=10,
        )
    )
    url = f"{target.url}/api/ping"

    def call() -> None:
        response = client.get(url)
        assert response.status_code == 200, response.status_code

    return call


# -- measuring --------------------------------------------------------------------------


def timed(call: Call, count: int, warmup: int) -> list[float]:
    """Seconds each of ``count`` calls took, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    samples: list[float] = []
    clock = time.perf_counter
    for _ in range(count):
        start = clock()
        call()
        samples.append(clock() - start)
    return samples


def concurrent_slow_calls(target: Target, stack: ExitStack) -> Call:
    """Eight threads call the 100 ms route at once; the call returns when all are done."""

    def call() -> None:
        start = threading.Barrier(CONCURRENT_CLIENTS + 1)
        errors: list[BaseException] = []
        one = http_client_call(target, stack, "/api/slow")

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

    clients: list[tuple[str, Callable[[Target, ExitStack], Call]]] = [
        ("http.client", http_client_call),
        ("requests.Session", requests_call),
        ("httpx.Client", httpx_call),
    ]
    per_test = math.ceil(args.rounds / TESTS_PER_SCHEME)
    concurrent_per_test = math.ceil(args.concurrent_rounds / TESTS_PER_SCHEME)
    #: Seconds per call by (client, or "concurrent"; scheme).
    samples: dict[tuple[str, str], list[float]] = defaultdict(list)

    def measure(index: int, fake: MgmtServer) -> None:
        target = make_target(fake)
        with ExitStack() as stack:
            for label, make in clients if index % 2 == 0 else clients[::-1]:
                samples[label, target.name] += timed(make(target, stack), per_test, WARMUP)
            samples["concurrent", target.name] += timed(
                concurrent_slow_calls(target, stack), concurrent_per_test, warmup=1
            )

    https_by_test = [index % 4 in (1, 2) for index in range(2 * TESTS_PER_SCHEME)]
    in_tests(measure, [{"https": https, "throttle": None} for https in https_by_test])

    medians = {key: statistics.median(values) for key, values in samples.items()}
    rows: list[tuple[str, str, str, str, str, str]] = []
    missed = 0
    for label, _ in clients:
        ratio = medians[label, "https"] / medians[label, "http"]
        ok = ratio <= RATIO_TARGET
        missed += not ok
        rows.append(
            (
                f"round trip, {label}",
                ms(medians[label, "http"]),
                ms(medians[label, "https"]),
                f"{ratio:5.2f}x",
                f"<= {RATIO_TARGET}x",
                "ok" if ok else "MISSED",
            )
        )
    for scheme in ("http", "https"):
        ok = medians["concurrent", scheme] <= CONCURRENT_TARGET
        missed += not ok
        rows.append(
            (
                f"{CONCURRENT_CLIENTS} concurrent 100 ms handlers, {scheme}",
                ms(medians["concurrent", "http"]) if scheme == "http" else "",
                ms(medians["concurrent", "https"]) if scheme == "https" else "",
                "",
                f"<= {CONCURRENT_TARGET * 1000:.0f} ms",
                "ok" if ok else "MISSED",
            )
        )

    print(
        f"pytest-mgmtauth transport benchmark: Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, OpenSSL {ssl.OPENSSL_VERSION.split()[1]}; medians of "
        f"{per_test * TESTS_PER_SCHEME} calls per client (round trips) and "
        f"{concurrent_per_test * TESTS_PER_SCHEME} rounds (concurrency) per scheme, "
        f"HTTP and HTTPS taking turns over {2 * TESTS_PER_SCHEME} tests"
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
