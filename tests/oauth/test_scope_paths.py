"""The scope a call needs is read from its path normalised once, as the gateway reads
it: repeated slashes, ``..`` segments and their encodings (``%2E%2E``, ``%2F``) name no
other account, profile or resource than they reach (issue 43, part 2, defect 15)."""

from __future__ import annotations

import http.client
import re
from urllib.parse import urlsplit

import pytest
import requests

from pytest_mgmtauth import MgmtServer

BASE = "/v2026-07/cdp-api/accounts"


def _token(mgmt_server: MgmtServer, scope: str) -> str:
    client = mgmt_server.add_client([scope])
    answer = requests.post(
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials", "scope": scope},
        auth=(client.client_id, client.client_secret),
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["access_token"]
    return token


def _raw(mgmt_server: MgmtServer, method: str, path: str, token: str) -> int:
    """``path`` sent exactly as written (no client-side normalisation)."""
    where = urlsplit(mgmt_server.url)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.putheader("Authorization", "Bearer " + token)
        connection.putheader("Content-Length", "0")
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{BASE}/other/profiles/main//labels"),
        ("GET", f"{BASE}//other/profiles/main/labels"),
        ("POST", f"{BASE}/acme/profiles/main//labels"),
        ("GET", f"{BASE}/acme/profiles/main/labels/../../../../other/profiles/main/labels"),
        (
            "GET",
            f"{BASE}/acme/profiles/main/labels/%2E%2E/%2E%2E/%2E%2E/%2E%2E/other/profiles/main/labels",
        ),
        (
            "GET",
            f"{BASE}/acme/profiles/main/labels%2F..%2F..%2F..%2F..%2Fother%2Fprofiles%2Fmain%2Flabels",
        ),
        ("GET", f"{BASE}/acme/profiles/main/../../other/profiles/main/labels"),
    ],
    ids=[
        "double-slash",
        "leading-double-slash",
        "post-write",
        "dots",
        "encoded-dots",
        "encoded-slash",
        "profile-dots",
    ],
)
def test_a_path_that_reaches_another_scope_needs_that_scope(
    mgmt_server: MgmtServer, method: str, path: str
) -> None:
    mgmt_server.expect_refusals()
    route = mgmt_server.route(method, re.compile(rf"^{BASE}/.*"), auth="oauth")
    route.respond_with_json(["labels"])
    token = _token(mgmt_server, "acme:main:cdp-api:2026-07:labels:read")
    assert _raw(mgmt_server, method, path, token) == 403
    assert route.call_count == 0


def test_the_same_path_normalised_to_the_tokens_own_scope_is_answered(
    mgmt_server: MgmtServer,
) -> None:
    route = mgmt_server.route("GET", re.compile(rf"^{BASE}/.*"), auth="oauth")
    route.respond_with_json(["labels"])
    token = _token(mgmt_server, "acme:main:cdp-api:2026-07:labels:read")
    assert _raw(mgmt_server, "GET", f"{BASE}/acme/profiles/main//labels", token) == 200
    assert _raw(mgmt_server, "GET", f"{BASE}/other/../acme/profiles/main/labels", token) == 200
    assert route.call_count == 2
