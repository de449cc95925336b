"""Three v2 clients a sweep tells apart (docs/sweeps.md).

* ``ProactiveClient`` renews its token before it expires but never retries on a 401:
  it survives ``expire`` and fails ``revoke``.
* ``RecoveringClient`` also re-authenticates once on a 401 (1401), waits ``Retry-After``
  on a 429, retries a 503 and a dropped connection: it survives every fault.
* ``ImpatientClient`` retries a 429 at once, without honouring ``Retry-After``: it
  passes, and the sweep says what it did.

Nothing here knows about pytest: ``sleep`` is injectable, so a test on ``mgmt_clock``
waits in simulated time.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import requests


def token_expiry(token: str) -> float:
    """The ``exp`` claim of a JWT, read without verifying it (a client has no key)."""
    payload = token.split(".")[1]
    payload += "=" * (-len(payload) % 4)
    return float(json.loads(base64.urlsafe_b64decode(payload))["exp"])


# --8<-- [start:proactive]
class ProactiveClient:
    """Authenticates on ``connect()``, renews ``refresh_margin`` seconds before the token
    expires, and treats every error as final."""

    def __init__(
        self,
        base_url: str,
        username: str,
        api_key: str,
        *,
        refresh_margin: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self._api_key = api_key
        self.refresh_margin = refresh_margin
        self.sleep = sleep
        self._token: str | None = None
        self._http = requests.Session()
        self._http.trust_env = False

    def connect(self) -> None:
        self._token = self._authenticate()

    def _authenticate(self) -> str:
        answer = self._http.post(
            f"{self.base_url}/v2/auth",
            data={"username": self.username, "key": self._api_key},
            timeout=10,
        )
        answer.raise_for_status()
        token: str = answer.json()["token"]
        return token

    def token(self) -> str:
        """The current token, renewed first if it is about to expire."""
        if self._token is None or time.time() >= token_expiry(self._token) - self.refresh_margin:
            self._token = self._authenticate()
        return self._token

    def _send(self, method: str, path: str) -> requests.Response:
        return self._http.request(
            method,
            f"{self.base_url}{path}",
            headers={"Authorization": f"Bearer {self.token()}"},
            timeout=10,
        )

    def get(self, path: str) -> Any:
        answer = self._send("GET", path)
        answer.raise_for_status()
        return answer.json()


# --8<-- [end:proactive]


# --8<-- [start:recovering]
class RecoveringClient(ProactiveClient):
    """Also re-authenticates once on a 401 with 1401, waits ``Retry-After`` on a 429,
    retries a 503 and a dropped connection a few times."""

    attempts = 3

    def _authenticate(self) -> str:
        for attempt in range(1, self.attempts + 1):
            try:
                return super()._authenticate()
            except requests.HTTPError as exc:
                status = exc.response.status_code
                if status not in (429, 503) or attempt == self.attempts:
                    raise
                self.sleep(self._wait(exc.response))
        raise AssertionError("unreachable")

    def _wait(self, answer: requests.Response) -> float:
        return float(answer.headers.get("Retry-After", "1"))

    def get(self, path: str) -> Any:
        for attempt in (1, 2):
            try:
                answer = self._send("GET", path)
            except requests.ConnectionError:
                if attempt == 2:
                    raise
                continue  # the connection was dropped: a GET is safe to send again
            refused = answer.status_code == 401 and answer.json().get("returnCode") == 1401
            if refused and attempt == 1:
                self._token = None  # the service refused the token: get a new one
                continue
            answer.raise_for_status()
            return answer.json()
        raise AssertionError("unreachable")


# --8<-- [end:recovering]


# --8<-- [start:impatient]
class ImpatientClient(RecoveringClient):
    """Retries a 429 at once: Retry-After is ignored."""

    def _wait(self, answer: requests.Response) -> float:
        return 0.0


# --8<-- [end:impatient]
