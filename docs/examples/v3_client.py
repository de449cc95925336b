"""A small v3 client: one token per account and profile, renewed before it expires,
and every call sent to the ``host`` the auth answer names.

It knows nothing about pytest: the tests point it at ``mgmt_server.url``. Against the
real service ``base_url`` is ``https://api.tealiumiq.com`` and ``host`` a region host;
against the fake, ``host`` is its region address, a second ``host:port`` of its own.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests


@dataclasses.dataclass(frozen=True)
class V3Token:
    token: str
    host: str
    exp: int


def _exp(token: str) -> int:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    exp: int = claims["exp"]
    return exp


# --8<-- [start:client]
class V3Client:
    def __init__(
        self,
        base_url: str,
        username: str,
        api_key: str,
        *,
        refresh_margin: float = 60.0,
        verify: str | bool = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url
        self.username = username
        self._api_key = api_key
        self.refresh_margin = refresh_margin
        self.sleep = sleep  # how Retry-After is waited (a test passes the simulated clock)
        # Calls go to https://{host} when the auth endpoint is HTTPS, as in production.
        self._scheme = urlsplit(base_url).scheme
        self._http = requests.Session()
        self._http.trust_env = False
        self._http.verify = verify
        self._tokens: dict[tuple[str, str], V3Token] = {}  # per (account, profile)
        self._lock = threading.Lock()

    def token_for(self, account: str, profile: str) -> V3Token:
        """The cached token of the pair; a new one only when it is near its exp."""
        with self._lock:  # single flight: threads wait for one refresh
            cached = self._tokens.get((account, profile))
            if cached is None or time.time() >= cached.exp - self.refresh_margin:
                cached = self._authenticate(account, profile)
                self._tokens[(account, profile)] = cached
            return cached

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        """Sent again after a 429 (once Retry-After has passed) or a 503, and a GET
        after a dropped connection: three attempts in all."""
        for attempt in (1, 2, 3):
            try:
                answer = self._http.request(method, url, timeout=10, **kwargs)
            except requests.ConnectionError:
                if attempt == 3 or method != "GET":
                    raise
                continue
            if answer.status_code not in (429, 503) or attempt == 3:
                return answer
            self.sleep(float(answer.headers.get("Retry-After", "1")))
        raise AssertionError("unreachable")

    def _authenticate(self, account: str, profile: str) -> V3Token:
        answer = self._send(
            "POST",
            f"{self.base_url}/v3/auth/accounts/{account}/profiles/{profile}",
            # A dict: requests URL-encodes the key, whose '+ & = %' would break otherwise.
            data={"username": self.username, "key": self._api_key},
        )
        answer.raise_for_status()
        body = answer.json()
        return V3Token(body["token"], body["host"], _exp(body["token"]))

    def get(self, account: str, profile: str, path: str) -> requests.Response:
        """``GET https://{host}/v3/{path}`` for the pair; one retry with a new token
        when the service answers 401 (revoked, or the clock moved under us); 429, 503
        and a dropped connection are retried by :meth:`_send`."""
        for attempt in range(2):
            token = self.token_for(account, profile)
            answer = self._send(
                "GET",
                f"{self._scheme}://{token.host}/v3/{path.lstrip('/')}",
                headers={"Authorization": f"Bearer {token.token}"},
            )
            if answer.status_code != 401 or attempt:
                return answer
            with self._lock:
                self._tokens.pop((account, profile), None)
        raise AssertionError("unreachable")


# --8<-- [end:client]
