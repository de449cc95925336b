"""A small client of the developer portal's OAuth 2.0 client credentials: one access
token per set of scopes, renewed ``refresh_margin`` seconds before ``expires_in`` runs
out, and renewed once more if the API answers 401 ``invalid_token`` (revoked).

It knows nothing about pytest: the tests point it at ``mgmt_server.url``. Against the
real portal ``base_url`` is the gateway's, ``https://api.tealiumapis.com``, whose token
path is ``/oauth/token``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote_plus

import requests


@dataclasses.dataclass(frozen=True)
class AccessToken:
    token: str
    scopes: frozenset[str]
    #: When it stops being valid: the moment it was granted plus ``expires_in``.
    expires_at: float


# --8<-- [start:client]
class PortalClient:
    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        token_path: str = "/oauth/token",
        refresh_margin: float = 60.0,
        verify: str | bool = True,
        trust_env: bool = False,
    ) -> None:
        self.base_url = base_url
        self.token_url = base_url + token_path
        # RFC 6749 2.3.1: the id and secret are form-encoded before HTTP Basic encodes
        # them; requests' auth=(id, secret) does not, and secrets with '+', '&', '%'
        # would arrive changed.
        self._auth = (quote_plus(client_id), quote_plus(client_secret))
        self.refresh_margin = refresh_margin
        self._http = requests.Session()
        # Proxy and CA variables of the environment (interception sets them) only when
        # asked: a client should not pick up a stray REQUESTS_CA_BUNDLE by accident.
        self._http.trust_env = trust_env
        self._http.verify = verify
        self._tokens: dict[frozenset[str], AccessToken] = {}  # per set of scopes
        self._lock = threading.Lock()

    def token_for(self, scopes: Iterable[str]) -> AccessToken:
        """The cached token of this set of scopes; a new one only near its expiry."""
        wanted = frozenset(scopes)
        with self._lock:  # single flight: threads wait for one renewal
            cached = self._tokens.get(wanted)
            if cached is None or time.time() >= cached.expires_at - self.refresh_margin:
                cached = self._grant(wanted)
                self._tokens[wanted] = cached
            return cached

    def _grant(self, scopes: frozenset[str]) -> AccessToken:
        asked = time.time()  # expires_in counts from the answer; asking is earlier
        answer = self._http.post(
            self.token_url,
            data={"grant_type": "client_credentials", "scope": " ".join(sorted(scopes))},
            auth=self._auth,
            timeout=10,
        )
        answer.raise_for_status()
        body = answer.json()
        granted = frozenset(body["scope"].split())
        return AccessToken(body["access_token"], granted, asked + body["expires_in"])

    def request(
        self, method: str, path: str, scopes: Iterable[str], **kwargs: Any
    ) -> requests.Response:
        """Call the API with a token for ``scopes``. A 401 (the token was revoked, or
        the clock moved under us) gets one retry with a new token; a 403
        ``insufficient_scope`` does not: another token of the same scopes cannot help."""
        wanted = frozenset(scopes)
        for attempt in range(2):
            token = self.token_for(wanted)
            answer = self._http.request(
                method,
                self.base_url + path,
                headers={"Authorization": f"Bearer {token.token}"},
                timeout=10,
                **kwargs,
            )
            if answer.status_code != 401 or attempt:
                return answer
            with self._lock:
                self._tokens.pop(wanted, None)
        raise AssertionError("unreachable")


# --8<-- [end:client]
