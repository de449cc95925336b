"""Testing a client written from the developer portal's pages with pytest-mgmtauth
(docs/oauth.md): its tokens, its scopes, its calls, and its versions across their
lifecycle."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from oauth_client import PortalClient, VersionGone

from pytest_mgmtauth import MgmtClock, MgmtServer, OAuthClient

#: The scopes the portal granted (the authentication page's examples), requested as they
#: were granted.
LABELS_READ = "tealium-corp:*:cdp-api:2026-07:labels:read"
AUDIENCES_WRITE = "tealium-corp:*:cdp-api:2026-07:audiences:write"
LABELS = "/v2026-07/cdp-api/accounts/tealium-corp/profiles/main/labels"
AUDIENCES = "/v2026-07/cdp-api/accounts/tealium-corp/profiles/main/audiences"


@pytest.fixture(autouse=True)
def _late_2026(mgmt_clock: MgmtClock) -> None:
    """The versions these tests call leave Active 24 months after their month: the
    simulated time is pinned where they are Active, so the tests stay as they are when
    the real calendar moves on (the lifecycle test moves it on itself)."""
    mgmt_clock.move_to(datetime(2026, 11, 1, tzinfo=timezone.utc))


@pytest.fixture
def granted(mgmt_server: MgmtServer) -> OAuthClient:
    """The application the portal created, with its subscription's scopes."""
    return mgmt_server.add_client([LABELS_READ, AUDIENCES_WRITE])


@pytest.fixture
def api(mgmt_server: MgmtServer) -> None:
    # auth="oauth" and no scope=: the fake derives the scope from the path and method,
    # as the gateway matches "account, profile, resource, and action".
    mgmt_server.route("GET", LABELS, auth="oauth").respond_with_json(["vip"])
    mgmt_server.route("POST", AUDIENCES, auth="oauth").respond_with_json({}, status=201)


def _client(server: MgmtServer, client: OAuthClient) -> PortalClient:
    return PortalClient(client.client_id, client.client_secret, base_url=server.url)


# --8<-- [start:per-scope-set]
@pytest.mark.mgmtauth(strict=True)  # churn would fail this test at teardown
def test_one_token_per_scope_set_reused_and_renewed_before_expiry(
    mgmt_server: MgmtServer, granted: OAuthClient, mgmt_clock: MgmtClock, api: None
) -> None:
    client = _client(mgmt_server, granted)
    for _ in range(3):
        assert client.call("GET", LABELS, [LABELS_READ]).json() == ["vip"]
        assert client.call("POST", AUDIENCES, [AUDIENCES_WRITE], json={}).status_code == 201
    mgmt_server.assert_auth_count(2, version="oauth")  # one per scope set, not per call

    mgmt_clock.advance(hours=1, minutes=59)  # within refresh_margin of expires_in (7200 s)
    client.call("GET", LABELS, [LABELS_READ])
    mgmt_server.assert_auth_count(3, version="oauth")
    mgmt_server.assert_credential_reused()
    mgmt_server.assert_no_expired_credential_used()


# --8<-- [end:per-scope-set]


# --8<-- [start:scopes]
def test_a_token_without_the_calls_scope_is_403_and_not_renewed(
    mgmt_server: MgmtServer, granted: OAuthClient, api: None
) -> None:
    mgmt_server.expect_refusals()  # the 403 is this test's point, not a client bug
    client = _client(mgmt_server, granted)
    answer = client.call("POST", AUDIENCES, [LABELS_READ], json={})
    assert answer.status_code == 403
    # The body dev-portal-authentication publishes:
    assert answer.json() == {
        "error": "insufficient_scope",
        "message": "Token does not contain required scope: "
        "tealium-corp:main:cdp-api:2026-07:audiences:write",
    }
    mgmt_server.assert_auth_count(1, version="oauth")


# --8<-- [end:scopes]


# --8<-- [start:revoked]
def test_a_revoked_token_is_replaced_once(
    mgmt_server: MgmtServer, granted: OAuthClient, api: None
) -> None:
    client = _client(mgmt_server, granted)
    client.call("GET", LABELS, [LABELS_READ])
    mgmt_server.revoke(client.token_for([LABELS_READ]).token)
    assert client.call("GET", LABELS, [LABELS_READ]).json() == ["vip"]
    mgmt_server.assert_auth_count(2, version="oauth")
    mgmt_server.assert_credential_reused()  # a renewal after a 401 is no churn


# --8<-- [end:revoked]


# --8<-- [start:intercept]
@pytest.mark.mgmtauth(intercept=True)
def test_the_gateway_unchanged_through_interception(
    mgmt_server: MgmtServer, granted: OAuthClient, api: None
) -> None:
    # The client as it ships: its default base URL, https://api.tealiumapis.com, and
    # requests' default trust_env; the plugin's proxy and CA variables do the rest.
    client = PortalClient(granted.client_id, granted.client_secret)
    assert client.call("GET", LABELS, [LABELS_READ]).json() == ["vip"]
    mgmt_server.assert_auth_count(1, version="oauth")


# --8<-- [end:intercept]


# --8<-- [start:lifecycle]
def test_the_client_moves_to_the_successor_the_first_deprecated_answer_names(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock
) -> None:
    old = "/v2026-06/cdp/audiences"
    mgmt_server.route("GET", old, auth="oauth").respond_with_json(["old"])
    mgmt_server.route("GET", "/v2026-10/cdp/audiences", auth="oauth").respond_with_json(["new"])
    reader = mgmt_server.add_client(["tealium-corp:*:cdp:*:audiences:read"])
    client = _client(mgmt_server, reader)
    scopes = reader.scopes

    assert client.call("GET", old, scopes).json() == ["old"]  # November 2026 (the fixture)
    assert client.deprecations == {}  # Active: nothing to notice
    mgmt_clock.move_to(datetime(2028, 6, 1, tzinfo=timezone.utc))  # 24 months on
    assert client.call("GET", old, scopes).json() == ["old"]  # End of Support: it works...
    notice = client.deprecations["v2026-06"]  # ...and says until when, and what next
    assert notice.sunset == "Fri, 01 Jun 2029 00:00:00 GMT"
    assert notice.successor == "/v2026-10/cdp/audiences"
    # Every later call goes to the successor: the one answer that told the client is no
    # finding, so the default sunset_check lets this test pass.
    assert client.call("GET", old, scopes).json() == ["new"]
    mgmt_clock.move_to(datetime(2029, 6, 1, tzinfo=timezone.utc))  # End of Life of v2026-06
    assert client.call("GET", old, scopes).json() == ["new"]


@pytest.mark.mgmtauth(sunset_check="off")  # a call at End of Life is a finding: on purpose
def test_a_version_at_end_of_life_is_a_clear_error(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock
) -> None:
    mgmt_server.route("GET", "/v2026-06/cdp/audiences", auth="oauth").respond_with_json([])
    mgmt_server.route("GET", "/v2026-10/cdp/audiences", auth="oauth").respond_with_json([])
    reader = mgmt_server.add_client(["tealium-corp:*:cdp:*:audiences:read"])
    client = _client(mgmt_server, reader)  # one that never called during End of Support
    mgmt_clock.move_to(datetime(2029, 6, 1, tzinfo=timezone.utc))
    with pytest.raises(VersionGone, match="its successor: /v2026-10/cdp/audiences"):
        client.call("GET", "/v2026-06/cdp/audiences", reader.scopes)


# --8<-- [end:lifecycle]
