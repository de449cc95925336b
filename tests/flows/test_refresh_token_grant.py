"""A refresh-token grant (RFC 6749 section 6) added to the built-in OAuth flow through
its grant hook, with public names only and nothing unregistered: client credentials
answer a refresh token too, ``grant_type=refresh_token`` redeems it once for a new
access token and a new refresh token (rotation), and a refresh token used twice is
``invalid_grant``. Both tokens are masked wherever the fake writes them."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from urllib.parse import quote_plus

import pytest
import requests

from pytest_mgmtauth import MgmtClock, MgmtServer, OAuthClient
from pytest_mgmtauth.flows import (
    Answer,
    TokenRequest,
    client_credentials_grant,
    register_grant,
    registered_grant,
    unregister_grant,
)

# -- the grant (what a suite would write in its conftest.py) ----------------------------


def new_refresh_token(request: TokenRequest, scopes: tuple[str, ...]) -> str:
    """A refresh token for the request's client and ``scopes``, masked from now on."""
    value = secrets.token_urlsafe(32)
    request.hold_secret(value)
    with request.lock:
        request.state.setdefault("refresh", {})[value] = [request.client.client_id, scopes, False]
    return value


def redeem(request: TokenRequest) -> Answer:
    """grant_type=refresh_token: each refresh token once; a second use is invalid_grant."""
    sent = request.form.get("refresh_token")
    if not sent:
        request.reject("invalid_request", "refresh_token is missing: send the one last issued")
    with request.lock:
        held = request.state.setdefault("refresh", {}).get(sent)
        if held is None or held[0] != request.client.client_id:
            request.reject("invalid_grant", "the refresh token was not issued to this client")
        _, scopes, used = held
        if used:
            request.reject(
                "invalid_grant",
                "the refresh token was used already: refresh tokens rotate, send the one "
                "the last refresh answered",
            )
        held[2] = True
    return request.access_token(scopes, extra={"refresh_token": new_refresh_token(request, scopes)})


def with_refresh(request: TokenRequest) -> Answer:
    """Client credentials, answered with a refresh token too."""
    answer = client_credentials_grant(request)
    refresh = new_refresh_token(request, tuple(str(answer.body["scope"]).split(" ")))
    return Answer({**answer.body, "refresh_token": refresh}, headers=answer.headers)


@pytest.fixture(autouse=True, scope="module")
def _refresh_grant() -> Iterator[None]:
    with (
        registered_grant("client_credentials", with_refresh),
        registered_grant("refresh_token", redeem),
    ):
        yield


# -- a client ---------------------------------------------------------------------------

READ = "acme:main:tiq:2026-07:profiles:read"


def token(server: MgmtServer, client: OAuthClient, **form: str) -> requests.Response:
    return requests.post(
        server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials", **form},
        auth=(quote_plus(client.client_id), quote_plus(client.client_secret)),
        timeout=10,
    )


def call(server: MgmtServer, access_token: str) -> requests.Response:
    headers = {"Authorization": f"Bearer {access_token}"}
    return requests.get(server.url_for("/api/profiles"), headers=headers, timeout=10)


@pytest.fixture
def profiles(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", "/api/profiles", scope=READ).respond_with_json([])


# -- the tests --------------------------------------------------------------------------


@pytest.mark.usefixtures("profiles")
def test_refresh_rotates_and_a_reused_refresh_token_is_invalid_grant(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient, mgmt_clock: MgmtClock
) -> None:
    first = token(mgmt_server, mgmt_oauth_client).json()
    assert set(first) == {"access_token", "token_type", "expires_in", "scope", "refresh_token"}
    assert call(mgmt_server, first["access_token"]).status_code == 200
    mgmt_clock.advance(seconds=first["expires_in"] - 60)  # near its end: no churn

    second = token(
        mgmt_server,
        mgmt_oauth_client,
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
    )

    assert second.status_code == 200, second.text
    body = second.json()
    assert body["refresh_token"] != first["refresh_token"]
    assert (body["token_type"], body["scope"]) == ("Bearer", first["scope"])
    assert call(mgmt_server, body["access_token"]).status_code == 200
    reused = token(
        mgmt_server,
        mgmt_oauth_client,
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
    )
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"
    assert "used already" in reused.json()["error_description"]
    third = token(
        mgmt_server,
        mgmt_oauth_client,
        grant_type="refresh_token",
        refresh_token=body["refresh_token"],
    )
    assert third.status_code == 200
    assert mgmt_server.auth_count(version="oauth") == 3
    mgmt_server.expect_refusals()


def test_a_refresh_token_is_bound_to_its_client_and_required(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient
) -> None:
    other = mgmt_server.add_client(scopes=[READ])
    refresh = token(mgmt_server, mgmt_oauth_client).json()["refresh_token"]

    stolen = token(mgmt_server, other, grant_type="refresh_token", refresh_token=refresh)
    missing = token(mgmt_server, other, grant_type="refresh_token")

    assert (stolen.status_code, stolen.json()["error"]) == (400, "invalid_grant")
    assert (missing.status_code, missing.json()["error"]) == (400, "invalid_request")
    timeline = mgmt_server.timeline()
    assert "the refresh token was not issued to this client" in timeline
    mgmt_server.expect_refusals()


@pytest.mark.usefixtures("profiles")
def test_both_tokens_are_masked_in_the_timeline_events_and_request_log(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient
) -> None:
    first = token(mgmt_server, mgmt_oauth_client).json()
    second = token(
        mgmt_server,
        mgmt_oauth_client,
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
    ).json()
    token(
        mgmt_server,
        mgmt_oauth_client,
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
    )
    call(mgmt_server, second["access_token"])

    texts = [mgmt_server.timeline(), repr(mgmt_server.events)]
    texts += [repr(r) + str(r.body) + str(dict(r.headers)) for r in mgmt_server.requests]
    secrets_sent = [first["refresh_token"], second["refresh_token"], first["access_token"]]
    secrets_sent += [second["access_token"], mgmt_oauth_client.client_secret]
    for text in texts:
        for value in secrets_sent:
            assert value not in text
    assert "refresh_token=#" in str(mgmt_server.requests[1].body)
    mgmt_server.expect_refusals()


def test_an_unknown_grant_type_is_told_those_the_endpoint_grants(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient
) -> None:
    answer = token(mgmt_server, mgmt_oauth_client, grant_type="urn:example:device")
    assert answer.status_code == 400
    assert answer.json()["error"] == "unsupported_grant_type"
    assert (
        "this endpoint grants client_credentials, refresh_token"
        in (answer.json()["error_description"])
    )
    mgmt_server.expect_refusals()


def test_registering_a_grant_type_twice_or_removing_an_unknown_one_is_refused() -> None:
    with pytest.raises(ValueError, match="'refresh_token' has a handler already"):
        register_grant("refresh_token", redeem)
    with pytest.raises(ValueError, match="no added grant_type 'client_credentials'"):
        unregister_grant("client_credentials")
    with pytest.raises(TypeError, match="must be callable"):
        register_grant("urn:example:x", "not a function")  # type: ignore[arg-type]
    register_grant("urn:example:x", redeem)
    unregister_grant("urn:example:x")
    with pytest.raises(ValueError, match="no added grant_type 'urn:example:x'"):
        unregister_grant("urn:example:x")


def test_after_the_block_the_grant_type_is_unsupported_again(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient
) -> None:
    with registered_grant("urn:example:once", redeem):
        inside = token(mgmt_server, mgmt_oauth_client, grant_type="urn:example:once")
    after = token(mgmt_server, mgmt_oauth_client, grant_type="urn:example:once")
    assert inside.json()["error"] == "invalid_request"  # redeem's: no refresh_token
    assert after.json()["error"] == "unsupported_grant_type"
    mgmt_server.expect_refusals()
