"""A v2 client that passes every sweep and fails an exploration (docs/explore.md).

``SyncClient`` renews its token before it expires, retries a 429 (after
``Retry-After``) and a 503 when it authenticates, and sends a GET up to three times,
re-authenticating after a 401 and resending after a 503 or a dropped connection: each
fault alone, at any point, it survives. But its 401 handler
logs in with a bare ``POST /v2/auth``, without those retries: a revoke followed by a
throttled re-authentication breaks it. ``FixedSyncClient`` is the one-line fix.

Nothing here knows about pytest: ``sleep`` is injectable, so a test on ``mgmt_clock``
waits in simulated time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests
from sweep_clients import token_expiry


# --8<-- [start:client]
class SyncClient:
    def __init__(
        self,
        base_url: str,
        username: str,
        api_key: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self._api_key = api_key
        self.sleep = sleep
        self._token: str | None = None
        self._http = requests.Session()
        self._http.trust_env = False

    def _login(self) -> str:
        """One POST /v2/auth."""
        answer = self._http.post(
            f"{self.base_url}/v2/auth",
            data={"username": self.username, "key": self._api_key},
            timeout=10,
        )
        answer.raise_for_status()
        token: str = answer.json()["token"]
        return token

    def _authenticate(self) -> str:
        """_login, with a wait of Retry-After on a 429 and a retry of a 503."""
        for attempt in range(1, 4):
            try:
                return self._login()
            except requests.HTTPError as exc:
                status = exc.response.status_code
                if status not in (429, 503) or attempt == 3:
                    raise
                self.sleep(float(exc.response.headers.get("Retry-After", "1")))
        raise AssertionError("unreachable")

    def connect(self) -> None:
        self._token = self._authenticate()

    def token(self) -> str:
        """The current token, renewed a minute before it expires."""
        if self._token is None or time.time() >= token_expiry(self._token) - 60:
            self._token = self._authenticate()
        return self._token

    def renew_after_401(self) -> None:
        self._token = self._login()

    def get(self, path: str) -> Any:
        for attempt in range(1, 4):
            last = attempt == 3
            try:
                answer = self._http.get(
                    f"{self.base_url}{path}",
                    headers={"Authorization": f"Bearer {self.token()}"},
                    timeout=10,
                )
            except requests.ConnectionError:
                if last:
                    raise
                continue  # the connection was dropped: a GET is safe to send again
            if answer.status_code == 401 and not last:
                self.renew_after_401()  # the service refused the token: get a new one
                continue
            if answer.status_code == 503 and not last:
                continue  # the service was busy: a GET is safe to send again
            answer.raise_for_status()
            return answer.json()
        raise AssertionError("unreachable")


# --8<-- [end:client]


# --8<-- [start:fix]
class FixedSyncClient(SyncClient):
    def renew_after_401(self) -> None:
        self._token = self._authenticate()  # was: self._login()


# --8<-- [end:fix]
