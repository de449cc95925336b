"""The process environment of interception (the ``intercept`` option): the proxy
variables that send clients' HTTPS to the fake's proxy, the CA variables that make them
trust its certificates, setting them for a test and restoring them after, and aiohttp's
default SSL context, which is made once, when aiohttp is imported."""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

#: The proxy variables, in both cases: curl reads only lower-case ``http_proxy``;
#: Python's urllib reads both, and lower-case first.
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
#: Where requests, Python's ssl (urllib, httpx, aiohttp at import), curl and Node find the
#: CA certificates they trust.
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
#: Reached directly, never through the proxy: the loopback names and addresses, so that
#: local services (and ``mgmt_server.url``) keep working.
NO_PROXY = "localhost,127.0.0.1,::1"

_environ_lock = threading.Lock()


def intercept_environment(proxy_url: str, ca_bundle: str) -> dict[str, str]:
    """The variables that point unchanged clients at the fake's proxy and CA."""
    env = {}
    for name in PROXY_VARIABLES:
        env[name] = NO_PROXY if name.lower() == "no_proxy" else proxy_url
    for name in CA_VARIABLES:
        env[name] = ca_bundle
    return env


def set_environment(env: Mapping[str, str]) -> Callable[[], None]:
    """Set ``env`` in ``os.environ``; returns what restores each variable as it was
    (unset again where it was unset).

    urllib's global opener is set aside for the test and restored after it: ``urlopen``
    builds it on first use with the proxies of that moment and keeps it, so one built
    before the test would go around the proxy (to the real host), and one built during
    the test would send every later test's requests to this test's proxy."""
    urllib_request = sys.modules.get("urllib.request")
    opener = getattr(urllib_request, "_opener", None)
    with _environ_lock:
        before = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        if urllib_request is not None:
            urllib_request._opener = None  # type: ignore[attr-defined]

    def restore() -> None:
        with _environ_lock:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        module = sys.modules.get("urllib.request")
        if module is not None and getattr(module, "_opener", None) is not opener:
            module._opener = opener  # type: ignore[attr-defined]

    return restore


def trust_in_aiohttp(ca_bundle: str) -> bool:
    """Add the test CA to aiohttp's default verified SSL context, if aiohttp is loaded:
    aiohttp makes that context once, at import, from the CA variables of that moment,
    so a client session created with default SSL settings would not trust the fake.
    The CA stays trusted by that context for the rest of the process (a context cannot
    forget a CA); it is the session's own test CA, whose key never leaves the process.
    Whether aiohttp was loaded."""
    connector = sys.modules.get("aiohttp.connector")
    context = getattr(connector, "_SSL_CONTEXT_VERIFIED", None)
    if context is None:
        return False
    context.load_verify_locations(cafile=ca_bundle)
    return True
