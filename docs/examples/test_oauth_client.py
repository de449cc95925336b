"""Testing a client of the developer portal's OAuth flow with pytest-mgmtauth
(docs/oauth.md)."""

from __future__ import annotations

import pytest
from oauth_client import PortalClient

from pytest_mgmtauth import MgmtClock, MgmtServer, OAuthClient

READ = "acme:main:tiq:2026-07:profiles:read"
WRITE = "acme:main:tiq:2026-07:profiles:write"


@pytest.fixture
def granted(mgmt_server: MgmtServer) -> OAuthClient:
    """A client granted both scopes: it asks for each as it was granted."""
    return mgmt_server.add_client([READ, WRITE])


@pytest.fixture
def profiles(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", "/profiles", scope=READ).respond_with_json(["main"])
    mgmt_server.route("PUT", "/profiles/main", scope=WRITE).respond_with_json({})


def _client(server: MgmtServer, client: OAuthClient) -> PortalClient:
    return PortalClient(server.url, client.client_id, client.client_secret)


# --8<-- [start:per-scope-set]
@pytest.mark.mgmtauth(strict=True)  # churn would fail this test at teardown
def test_one_token_per_scope_set_reused_and_renewed_before_expiry(
    mgmt_server: MgmtServer,
    granted: OAuthClient,
    mgmt_clock: MgmtClock,
    profiles: None,
) -> None:
    client = _client(mgmt_server, granted)
    for _ in range(3):
        assert client.request("GET", "/profiles", [READ]).json() == ["main"]
        assert client.request("PUT", "/profiles/main", [WRITE], json={}).ok
    mgmt_server.assert_auth_count(2, version="oauth")  # one per scope set, not per call

    mgmt_clock.advance(hours=1, minutes=59, seconds=30)  # within refresh_margin of expires_in
    client.request("GET", "/profiles", [READ])
    mgmt_server.assert_auth_count(3, version="oauth")
    mgmt_server.assert_credential_reused()
    mgmt_server.assert_no_expired_credential_used()


# --8<-- [end:per-scope-set]


# --8<-- [start:scopes]
def test_a_token_without_the_routes_scope_is_403_and_not_renewed(
    mgmt_server: MgmtServer, granted: OAuthClient, profiles: None
) -> None:
    mgmt_server.expect_refusals()  # the 403 is this test's point, not a client bug
    client = _client(mgmt_server, granted)
    answer = client.request("PUT", "/profiles/main", [READ], json={})
    assert answer.status_code == 403
    assert answer.headers["WWW-Authenticate"] == (
        f'Bearer error="insufficient_scope", scope="{WRITE}"'
    )
    mgmt_server.assert_auth_count(1, version="oauth")
    assert f"lacks the scope {WRITE}" in mgmt_server.timeline()


# --8<-- [end:scopes]


# --8<-- [start:revoked]
def test_a_revoked_token_is_replaced_once(
    mgmt_server: MgmtServer, granted: OAuthClient, profiles: None
) -> None:
    client = _client(mgmt_server, granted)
    client.request("GET", "/profiles", [READ])
    mgmt_server.revoke(client.token_for([READ]).token)
    assert client.request("GET", "/profiles", [READ]).json() == ["main"]
    mgmt_server.assert_auth_count(2, version="oauth")
    mgmt_server.assert_credential_reused()  # a renewal after a 401 is no churn


# --8<-- [end:revoked]


# --8<-- [start:intercept]
@pytest.mark.mgmtauth(intercept=True)
def test_the_gateway_host_unchanged_through_interception(
    mgmt_server: MgmtServer, granted: OAuthClient, profiles: None
) -> None:
    # The base URL public code uses; the plugin's proxy and CA variables do the rest.
    client = PortalClient(
        "https://api.tealiumapis.com",
        granted.client_id,
        granted.client_secret,
        trust_env=True,  # the proxy and CA variables the plugin sets for the test
    )
    assert client.request("GET", "/profiles", [READ]).json() == ["main"]
    mgmt_server.assert_auth_count(1, version="oauth")


# --8<-- [end:intercept]
