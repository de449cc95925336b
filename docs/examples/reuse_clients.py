"""Three v2 clients that differ only in when they get a new bearer token.

* ``ChurningClient`` authenticates before every call: the production bug the plugin
  exists to catch (the real service throttles it).
* ``ReactiveClient`` reuses its token and authenticates again when a call is answered
  401 with returnCode 1401: no churn, but every expiry costs a refused call.
* ``ProactiveClient`` reuses its token and authenticates again ``refresh_margin``
  seconds before the token's ``exp``; one lock makes the refresh single-flight when
  threads share the client.

None of them knows about pytest: the tests point them at ``mgmt_server.url``.
"""

from __future__ import annotations

import base64
import json
import threading
import time

import requests


class _Client:
    def __init__(self, base_url: str, username: str, api_key: str) -> None:
        self.base_url = base_url
        self.username = username
        self._api_key = api_key
        self._http = requests.Session()
        self._http.trust_env = False

    def _authenticate(self) -> str:
        # A dict: requests URL-encodes the key, whose '+ & = %' would break otherwise.
        answer = self._http.post(
            f"{self.base_url}/v2/auth",
            data={"username": self.username, "key": self._api_key},
            timeout=10,
        )
        answer.raise_for_status()
        token: str = answer.json()["token"]
        return token

    def _call(self, path: str, token: str) -> requests.Response:
        return self._http.get(
            f"{self.base_url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )


# --8<-- [start:churning]
class ChurningClient(_Client):
    """The bug: a new token for every call."""

    def get(self, path: str) -> requests.Response:
        return self._call(path, self._authenticate())


# --8<-- [end:churning]


# --8<-- [start:reactive]
class ReactiveClient(_Client):
    """Reuses its token; gets a new one when the service refuses the old one."""

    def __init__(self, base_url: str, username: str, api_key: str) -> None:
        super().__init__(base_url, username, api_key)
        self._token: str | None = None

    def get(self, path: str) -> requests.Response:
        if self._token is None:
            self._token = self._authenticate()
        answer = self._call(path, self._token)
        if answer.status_code == 401 and answer.json().get("returnCode") == 1401:
            self._token = self._authenticate()
            answer = self._call(path, self._token)
        return answer


# --8<-- [end:reactive]


def expiry_of(token: str) -> float:
    """The token's ``exp`` claim, read without verifying (a client has no key to)."""
    payload = token.split(".")[1]
    return float(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"])


# --8<-- [start:proactive]
class ProactiveClient(_Client):
    """Reuses its token until ``refresh_margin`` seconds before it expires."""

    def __init__(
        self, base_url: str, username: str, api_key: str, *, refresh_margin: float = 60
    ) -> None:
        super().__init__(base_url, username, api_key)
        self.refresh_margin = refresh_margin
        self._token: str | None = None
        self._lock = threading.Lock()  # one refresh at a time: single flight

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.time() >= expiry_of(self._token) - self.refresh_margin:
                self._token = self._authenticate()
            return self._token

    def get(self, path: str) -> requests.Response:
        return self._call(path, self.token())


# --8<-- [end:proactive]
