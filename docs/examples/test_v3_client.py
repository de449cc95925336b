"""Testing a v3 client with pytest-mgmtauth (docs/v3.md)."""

from __future__ import annotations

import pytest
from v3_client import V3Client

from pytest_mgmtauth import Account, MgmtClock, MgmtServer

PROFILES = ("main", "dev", "qa")


@pytest.fixture
def visitors(mgmt_server: MgmtServer) -> None:
    for profile in PROFILES:
        path = f"/v3/customers/accounts/acme/profiles/{profile}/visitors"
        mgmt_server.route("GET", path).respond_with_json({"profile": profile})


def _client(server: MgmtServer, account: Account) -> V3Client:
    verify = server.ca_bundle or True
    return V3Client(server.url, account.username, account.api_key, verify=verify)


# --8<-- [start:per-profile]
@pytest.mark.mgmtauth(strict=True)  # churn would fail this test at teardown
def test_one_token_per_profile_reused_and_renewed_before_expiry(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, visitors: None
) -> None:
    client = _client(mgmt_server, mgmt_account)
    for _ in range(3):
        for profile in PROFILES:
            answer = client.get(
                "acme", profile, f"customers/accounts/acme/profiles/{profile}/visitors"
            )
            assert answer.json() == {"profile": profile}
    mgmt_server.assert_auth_count(3, version="v3")  # one per profile, not one per call

    mgmt_clock.advance(minutes=29, seconds=30)  # within refresh_margin of exp
    client.get("acme", "main", "customers/accounts/acme/profiles/main/visitors")
    mgmt_server.assert_auth_count(4, version="v3")
    mgmt_server.assert_token_reused()
    mgmt_server.assert_no_expired_token_used()


# --8<-- [end:per-profile]


# --8<-- [start:https]
@pytest.mark.mgmtauth(https=True)
def test_a_client_that_builds_https_host_needs_the_https_fake(
    mgmt_server: MgmtServer, mgmt_account: Account, visitors: None
) -> None:
    client = _client(mgmt_server, mgmt_account)
    answer = client.get("acme", "dev", "customers/accounts/acme/profiles/dev/visitors")
    assert answer.status_code == 200
    assert mgmt_server.region_url == f"https://{client.token_for('acme', 'dev').host}"


# --8<-- [end:https]


# --8<-- [start:wrong-profile]
def test_a_token_used_for_another_profile_is_refused_naming_both(
    mgmt_server: MgmtServer, mgmt_account: Account, visitors: None
) -> None:
    mgmt_server.expect_refusals()  # the wrong token is this test's point
    client = _client(mgmt_server, mgmt_account)
    main = client.token_for("acme", "main")
    answer = client._http.get(
        f"http://{main.host}/v3/customers/accounts/acme/profiles/dev/visitors",
        headers={"Authorization": f"Bearer {main.token}"},
    )
    # The published v3 body exactly; the diagnosis in the fake's own header.
    assert answer.status_code == 401
    assert answer.json() == {"message": "Unauthorized"}
    assert (
        "token T1 is for acme/main, but this call is for profile acme/dev"
        in answer.headers["X-Mgmtauth-Diagnosis"]
    )


# --8<-- [end:wrong-profile]


def test_a_revoked_token_is_replaced_once_without_churn(
    mgmt_server: MgmtServer, mgmt_account: Account, visitors: None
) -> None:
    client = _client(mgmt_server, mgmt_account)
    path = "customers/accounts/acme/profiles/qa/visitors"
    assert client.get("acme", "qa", path).status_code == 200
    mgmt_server.revoke("T1")
    assert client.get("acme", "qa", path).status_code == 200
    mgmt_server.assert_auth_count(2, version="v3")
    mgmt_server.assert_token_reused()
