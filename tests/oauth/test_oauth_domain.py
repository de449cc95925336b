"""The OAuth flow in the domain: clients, the token endpoint's grant and every RFC 6749
error, scopes on API calls (RFC 6750), churn, expiry and throttling per scope set."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus, urlencode

import jwt
import pytest
from domain_support import admitted
from hypothesis import HealthCheck, given, settings, strategies as st

from pytest_mgmtauth import AuthRejected, TokenIssued
from pytest_mgmtauth._service.events import ApiCall, ClientRevoked, SecretRotated
from pytest_mgmtauth._service.flows.base import Answer, Incoming
from pytest_mgmtauth._service.flows.oauth import OAuthClient, OAuthFlow
from pytest_mgmtauth._service.flows.oauth_scopes import DEFAULT_SCOPE, covers, parse_scope
from pytest_mgmtauth._service.flows.registry import FLOWS, endpoint_for
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.secret_text import ClientKind
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock

FORM = "application/x-www-form-urlencoded"
READ = "acme:main:tiq:2026-07:profiles:read"
WRITE = "acme:main:tiq:2026-07:profiles:write"
#: A secret a test chooses with the characters RFC 6749 2.3.1 form-encodes (generated
#: secrets are letters and digits, as the portal's).
RESERVED = "s3cr+t&k3y=%41/x"


def basic(client_id: str, secret: str, *, encode: bool = True) -> str:
    if encode:
        client_id, secret = quote_plus(client_id), quote_plus(secret)
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def request(
    service: AuthService,
    client: OAuthClient | None = None,
    *,
    fields: dict[str, str] | None = None,
    body: bytes | None = None,
    content_type: str | None = FORM,
    authorization: tuple[str, ...] | None = None,
    query: tuple[tuple[str, str], ...] = (),
    scope: str | None = None,
    kind: ClientKind = ClientKind.OTHER,
) -> Answer:
    if fields is None:
        fields = {"grant_type": "client_credentials"}
        if scope is not None:
            fields["scope"] = scope
    if authorization is None:
        authorization = (basic(client.client_id, client.client_secret),) if client else ()
    incoming = Incoming(
        path="/oauth/token",
        form={},
        params={},
        cookies={},
        arrived=service.credentials.request_arrived(),
        body=urlencode(fields).encode() if body is None else body,
        content_type=content_type,
        authorization=authorization,
        query=query,
        client=kind,
    )
    return service.flow(OAuthFlow).answer("token", incoming)


def refused(call: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as info:
        call()
    return info.value


def error_of(refusal: Refusal) -> tuple[int, str]:
    assert refusal.body is not None
    assert refusal.body["error_description"]
    return refusal.status, str(refusal.body["error"])


def call_error_of(refusal: Refusal) -> tuple[int, str]:
    """An API call's refusal: the gateway's envelope ``{"error", "message"}``."""
    assert refusal.body is not None
    assert refusal.body.keys() == {"error", "message"}
    assert refusal.body["message"]
    return refusal.status, str(refusal.body["error"])


def call(
    service: AuthService, token: str | None, *, scope: str | None = READ, missing: bool = False
) -> Any:
    return admitted(service, "oauth", token=token, path="/api/profiles", scope=scope)


@pytest.fixture
def oauth(service: AuthService) -> OAuthFlow:
    return service.flow(OAuthFlow)


# -- the flow's declaration --------------------------------------------------------


def test_the_flow_is_registered_with_its_endpoint_from_the_option() -> None:
    assert FLOWS["oauth"] is OAuthFlow
    found = endpoint_for("/oauth/token", Options())
    assert found is not None
    assert found[0] is OAuthFlow
    moved = Options(oauth_token_path="/portal/token")
    assert endpoint_for("/portal/token", moved) is not None
    assert endpoint_for("/oauth/token", moved) is None
    assert OAuthFlow.auth_hosts == OAuthFlow.api_hosts == ("api.tealiumapis.com",)


def test_the_earlier_endpoint_and_lifetime_stay_reachable_through_the_options(
    make_service: Callable[..., AuthService],
) -> None:
    assert endpoint_for("/oauth/token", Options()) is not None  # the portal's pages
    earlier = Options(oauth_token_path="/oauth2/token", oauth_token_ttl=1800)
    assert endpoint_for("/oauth2/token", earlier) is not None
    service = make_service(oauth_token_path="/oauth2/token", oauth_token_ttl=1800)
    client = service.flow(OAuthFlow).add_client()
    assert request(service, client).body["expires_in"] == 1800


def test_an_option_path_on_another_flows_endpoint_is_refused(
    make_service: Callable[..., AuthService],
) -> None:
    with pytest.raises(ValueError, match="both a oauth and a v2 endpoint"):
        make_service(oauth_token_path="/v2/auth")


# -- scopes ------------------------------------------------------------------------


ENGINE = "e01ce645-3964-4343-9a0c-7d165e653b35"


def test_scopes_have_the_forms_of_the_scopes_page() -> None:
    assert parse_scope(DEFAULT_SCOPE)[5] == "manage"
    # dev-portal-scopes: the actions read, write, delete and manage; '*' anywhere.
    assert parse_scope("acme:main:tiq:2026-07:profiles:delete")[5] == "delete"
    assert parse_scope("my-account:main:cdp-api:2026-07:*:*")[4:] == ("*", "*")
    assert parse_scope("my-account:main:cdp-api:*:labels:read")[3] == "*"
    # Engine scopes: five parts, seven combined; the profile wildcard of three.
    assert parse_scope(f"my-account:main:context-api:2026-06:{ENGINE}")[4] == ENGINE
    assert parse_scope("my-account:main:context-api:2026-06:*")[4] == "*"
    assert len(parse_scope(f"my-account:main:context-api:2026-06:{ENGINE}:actions:read")) == 7
    assert parse_scope("acme:*:*") == ("acme", "*", "*")
    with pytest.raises(ValueError, match="only scope of 3 parts is"):
        parse_scope("acme:main:tiq")
    with pytest.raises(ValueError, match="oauth_profile_wildcard=False"):
        parse_scope("acme:*:*", profile_wildcard=False)
    with pytest.raises(ValueError, match="has 4 part"):
        parse_scope("acme:main:tiq:2026-07")
    with pytest.raises(ValueError, match="is not read, write, delete or manage"):
        parse_scope("acme:main:tiq:2026-07:profiles:own")
    with pytest.raises(ValueError, match="like '2026-07'"):
        parse_scope("acme:main:tiq:v2026-07:profiles:read")
    with pytest.raises(ValueError, match="profile"):
        parse_scope("acme::tiq:2026-07:profiles:read")


def test_what_a_scope_covers() -> None:
    assert covers(DEFAULT_SCOPE, READ)
    assert covers(DEFAULT_SCOPE, WRITE)
    assert covers(DEFAULT_SCOPE, "acme:main:tiq:2026-07:profiles:delete")
    assert not covers(DEFAULT_SCOPE, READ, manage_covers=False)
    assert not covers(WRITE, READ)
    assert not covers(READ, WRITE)
    assert covers("acme:*:tiq:2026-07:profiles:read", READ)
    assert not covers(READ, "acme:*:tiq:2026-07:profiles:read")
    assert not covers(READ, "acme:dev:tiq:2026-07:profiles:read")
    assert not covers(READ, "other:main:tiq:2026-07:profiles:read")
    # '*' in any position: every version, every scope of an API.
    assert covers("acme:main:tiq:*:profiles:read", READ)
    assert covers("acme:main:tiq:2026-07:*:*", WRITE)
    assert not covers("acme:main:tiq:2026-07:*:*", "acme:main:cdp:2026-07:labels:read")
    # An engine scope covers its engine's resources; a resource scope no engine.
    engine = f"acme:main:context-api:2026-06:{ENGINE}"
    assert covers(engine, f"{engine}:actions:read")
    assert covers("acme:main:context-api:2026-06:*", engine)
    assert covers("acme:*:*", engine)
    assert not covers("acme:*:*", "acme:main:context-api:2026-06:actions:read")
    assert not covers("acme:main:context-api:2026-06:actions:read", f"{engine}:actions:read")
    assert covers(f"{engine}:actions:*", f"{engine}:actions:write")
    assert not covers(f"{engine}:actions:read", engine)


# -- clients -----------------------------------------------------------------------


def test_a_client_gets_a_secret_of_letters_and_digits_and_never_shows_it(
    oauth: OAuthFlow,
) -> None:
    client = oauth.add_client()
    assert client.scopes == (DEFAULT_SCOPE,)
    # The portal's alphabet: curl -u and RFC 6749 2.3.1's form-encoding send the same.
    assert client.client_secret.isascii()
    assert client.client_secret.isalnum()
    assert len(client.client_secret) == 48
    assert quote_plus(client.client_secret) == client.client_secret
    assert oauth.rotate_client_secret(client.client_id).client_secret.isalnum()
    assert client.client_secret not in repr(client)
    assert client.client_id in repr(client)
    assert client.client_secret not in oauth.service.timeline.redact(f"x {client.client_secret} y")


def test_add_client_refuses_bad_scopes_and_duplicates(oauth: OAuthFlow) -> None:
    with pytest.raises(TypeError, match="did you mean"):
        oauth.add_client(READ)
    with pytest.raises(ValueError, match="has 1 part"):
        oauth.add_client(["read"])
    oauth.add_client([READ], client_id="app")
    with pytest.raises(ValueError, match="exists already"):
        oauth.add_client([READ], client_id="app")


# -- the grant ---------------------------------------------------------------------


def test_a_client_gets_a_jwt_with_its_scopes_by_basic_auth(
    service: AuthService, oauth: OAuthFlow, clock: ManualClock
) -> None:
    client = oauth.add_client()
    answer = request(service, client)
    assert answer.headers == (("Cache-Control", "no-store"), ("Pragma", "no-cache"))
    body = answer.body
    assert (body["token_type"], body["expires_in"], body["scope"]) == (
        "Bearer",
        7200,
        DEFAULT_SCOPE,
    )
    token = str(body["access_token"])
    claims = jwt.decode(token, options={"verify_signature": False})
    # "JWT signed with RS256", its header in the order of the pages' example token.
    assert token.startswith("eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.")
    public_key = service.signer._public_key
    verified = jwt.decode(
        token,
        public_key,
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
    )
    assert verified == claims
    assert claims["sub"] == claims["client_id"] == client.client_id
    assert claims["scope"] == DEFAULT_SCOPE
    assert claims["exp"] == int(clock()) + 7200
    [issued] = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert (issued.version, issued.scopes, issued.username) == (
        "oauth",
        (DEFAULT_SCOPE,),
        client.client_id,
    )
    assert service.auth_count(version="oauth") == 1


def test_the_credentials_may_come_in_the_form(service: AuthService, oauth: OAuthFlow) -> None:
    client = oauth.add_client()
    fields = {
        "grant_type": "client_credentials",
        "client_id": client.client_id,
        "client_secret": client.client_secret,
    }
    assert request(service, fields=fields, authorization=()).body["scope"] == DEFAULT_SCOPE


def test_the_token_lifetime_is_an_option(make_service: Callable[..., AuthService]) -> None:
    service = make_service(oauth_token_ttl=300)
    client = service.flow(OAuthFlow).add_client()
    assert request(service, client).body["expires_in"] == 300


def test_a_subset_of_the_granted_scopes_may_be_asked_for_each_as_granted(
    service: AuthService, oauth: OAuthFlow
) -> None:
    client = oauth.add_client([READ, WRITE, "acme:*:tiq:2026-07:profiles:manage"])
    assert request(service, client, scope=WRITE).body["scope"] == WRITE
    wildcard = "acme:*:tiq:2026-07:profiles:manage"
    assert request(service, client, scope=wildcard).body["scope"] == wildcard
    # A scope a wildcard covers is named in the wildcard's form (the authentication
    # page: "Request the scope exactly as it was granted").
    narrower = "acme:dev:tiq:2026-07:profiles:manage"
    refusal = refused(lambda: request(service, client, scope=narrower))
    assert error_of(refusal) == (400, "invalid_scope")
    assert f"was granted {wildcard!r}" in refusal.reason
    assert "oauth_scope_request='covered'" in refusal.reason


def test_with_covered_requests_a_narrower_scope_may_be_asked_for(
    make_service: Callable[..., AuthService],
) -> None:
    service = make_service(oauth_scope_request="covered")
    client = service.flow(OAuthFlow).add_client(["acme:*:tiq:2026-07:profiles:manage"])
    answer = request(service, client, scope=f"{READ} {WRITE}")
    assert answer.body["scope"] == f"{READ} {WRITE}"


def test_engine_scopes_are_added_to_tokens_unless_they_must_be_requested(
    make_service: Callable[..., AuthService],
) -> None:
    engine = f"acme:main:context-api:2026-06:{ENGINE}"
    for reading, expected in (("automatic", f"{READ} {engine}"), ("requested", READ)):
        service = make_service(oauth_engine_scopes=reading)
        client = service.flow(OAuthFlow).add_client([READ, engine])
        assert request(service, client, scope=READ).body["scope"] == expected
        assert request(service, client, scope=engine).body["scope"] == engine


def test_the_profile_wildcard_is_refused_when_the_option_says_so(
    make_service: Callable[..., AuthService],
) -> None:
    service = make_service(oauth_profile_wildcard=False)
    with pytest.raises(ValueError, match="oauth_profile_wildcard=False"):
        service.flow(OAuthFlow).add_client(["acme:*:*"])
    assert make_service().flow(OAuthFlow).add_client(["acme:*:*"]).scopes == ("acme:*:*",)


@pytest.mark.parametrize(
    ("scope", "words"),
    [
        ("acme:main:tiq:2026-07:profiles:read", "may not get the scope"),
        ("acme:main:tiq", "has 3 part"),
        ("acme:main:tiq:2026-07:profiles:own", "not read, write, delete or manage"),
        ("", "scope is empty"),
        (f"{WRITE}  {WRITE}", "extra space"),
    ],
)
def test_a_scope_beyond_the_clients_or_malformed_is_invalid_scope(
    service: AuthService, oauth: OAuthFlow, scope: str, words: str
) -> None:
    client = oauth.add_client([WRITE])
    refusal = refused(lambda: request(service, client, scope=scope))
    assert error_of(refusal) == (400, "invalid_scope")
    assert words in refusal.reason


# -- every error of RFC 6749 5.2 ----------------------------------------------------


def test_a_wrong_or_unknown_client_is_invalid_client_401_with_a_challenge(
    service: AuthService, oauth: OAuthFlow
) -> None:
    client = oauth.add_client()
    wrong = OAuthClient(client.client_id, "not-the-secret-at-all", client.scopes)
    refusal = refused(lambda: request(service, wrong))
    assert error_of(refusal) == (401, "invalid_client")
    assert ("WWW-Authenticate", 'Basic realm="api.tealiumapis.com", charset="UTF-8"') in (
        refusal.headers
    )
    assert ("Cache-Control", "no-store") in refusal.headers
    unknown = OAuthClient(client.client_id + "x", client.client_secret, client.scopes)
    refusal = refused(lambda: request(service, unknown))
    assert "did you mean" in refusal.reason
    assert client.client_secret not in str(refusal.body)
    rejected = [e for e in service.timeline.events if isinstance(e, AuthRejected)]
    assert [e.error for e in rejected] == ["invalid_client", "invalid_client"]
    assert "OAuth token endpoint rejected (invalid_client)" in rejected[0].describe()


def test_a_secret_not_form_encoded_before_base64_is_diagnosed(
    service: AuthService, oauth: OAuthFlow
) -> None:
    client = oauth.add_client(client_secret=RESERVED)
    header = basic(client.client_id, client.client_secret, encode=False)
    refusal = refused(lambda: request(service, authorization=(header,)))
    assert error_of(refusal) == (401, "invalid_client")
    assert "without form-encoding" in refusal.reason
    assert "quote_plus" in refusal.reason
    by_curl = refused(lambda: request(service, authorization=(header,), kind=ClientKind.CURL))
    assert "--data-urlencode client_secret=" in by_curl.reason


def test_a_secret_not_encoded_in_the_form_is_diagnosed(
    service: AuthService, oauth: OAuthFlow
) -> None:
    client = oauth.add_client(client_secret=RESERVED)
    body = (
        f"grant_type=client_credentials&client_id={client.client_id}"
        f"&client_secret={client.client_secret}"
    ).encode()
    refusal = refused(lambda: request(service, body=body, authorization=()))
    assert error_of(refusal) == (401, "invalid_client")
    assert "un-encoded" in refusal.reason


def test_a_rotated_secret_is_named_and_a_revoked_client_is_invalid_grant(
    service: AuthService, oauth: OAuthFlow
) -> None:
    old = oauth.add_client()
    new = oauth.rotate_client_secret(old.client_id)
    assert new.client_secret != old.client_secret
    assert "old secret" in refused(lambda: request(service, old)).reason
    request(service, new)
    oauth.revoke_client(new.client_id)
    assert error_of(refused(lambda: request(service, new))) == (400, "invalid_grant")
    assert any(isinstance(e, SecretRotated) and e.refused_with for e in service.timeline.events)
    assert any(isinstance(e, ClientRevoked) for e in service.timeline.events)


def test_a_client_without_scopes_is_unauthorized_client(
    service: AuthService, oauth: OAuthFlow
) -> None:
    client = oauth.add_client([])
    assert error_of(refused(lambda: request(service, client))) == (400, "unauthorized_client")


@pytest.mark.parametrize(
    ("grant", "error"),
    [
        ({"grant_type": "password"}, "unsupported_grant_type"),
        ({"grant_type": "refresh_token"}, "unsupported_grant_type"),
        ({}, "invalid_request"),
        ({"grant_type": ""}, "invalid_request"),
    ],
)
def test_grant_types(
    service: AuthService, oauth: OAuthFlow, grant: dict[str, str], error: str
) -> None:
    client = oauth.add_client()
    fields = {"x": "1", **grant}
    assert error_of(refused(lambda: request(service, client, fields=fields)))[1] == error


def test_bad_requests_are_invalid_request_and_never_echo_the_secret(
    service: AuthService, oauth: OAuthFlow
) -> None:
    client = oauth.add_client()
    secret = client.client_secret
    form = {
        "grant_type": "client_credentials",
        "client_id": client.client_id,
        "client_secret": secret,
    }
    cases: list[dict[str, Any]] = [
        {"body": b"grant_type=client_credentials&grant_type=client_credentials"},
        {"fields": form},  # Basic and the form's secret at once
        {"body": b'{"grant_type": "client_credentials"}', "content_type": "application/json"},
        {"content_type": "text/plain"},
        {"body": b""},
        {"body": b"grant_type=client_credentials&scope=%ff"},
        {"query": (("client_secret", secret),)},
        {"authorization": ("Basic abc", "Basic def")},
    ]
    for case in cases:

        def send(case: dict[str, Any] = case) -> Answer:
            return request(service, client, **case)

        refusal = refused(send)
        assert error_of(refusal) == (400, "invalid_request"), case
        assert secret not in str(refusal.body)
        assert secret not in refusal.reason


@pytest.mark.parametrize(
    "header", ["Basic !!!notbase64", "Basic " + base64.b64encode(b"nocolon").decode(), "Bearer x"]
)
def test_a_malformed_basic_header_is_invalid_client(
    service: AuthService, oauth: OAuthFlow, header: str
) -> None:
    oauth.add_client()
    assert error_of(refused(lambda: request(service, authorization=(header,)))) == (
        401,
        "invalid_client",
    )


def test_no_client_authentication_is_invalid_client(service: AuthService) -> None:
    service.flow(OAuthFlow).add_client()
    assert error_of(refused(lambda: request(service))) == (401, "invalid_client")


# -- churn, expiry, throttling -------------------------------------------------------


def test_a_new_token_for_the_same_scopes_while_one_is_valid_is_churn(
    service: AuthService, oauth: OAuthFlow, clock: ManualClock
) -> None:
    client = oauth.add_client([READ, WRITE])
    request(service, client, scope=READ)
    request(service, client, scope=WRITE)  # another scope set: no churn
    request(service, client, scope=READ)  # the same set again: churn
    issued = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert [e.while_valid for e in issued] == [(), (), ("T1",)]
    clock.advance(7200 - 30)  # within the refresh margin: renewal, not churn
    request(service, client, scope=WRITE)
    assert [e for e in service.timeline.events if isinstance(e, TokenIssued)][-1].while_valid == ()


def test_throttling_answers_429_in_the_rfc_shape(
    make_service: Callable[..., AuthService],
) -> None:
    service = make_service(throttle=2)
    client = service.flow(OAuthFlow).add_client()
    for _ in range(3):
        request(service, client)
    refusal = refused(lambda: request(service, client))
    styled = OAuthFlow.style(refusal)
    assert styled.status == 429
    assert styled.retry_after
    assert error_of(styled) == (429, "temporarily_unavailable")


# -- API calls: RFC 6750 -------------------------------------------------------------


def token_of(service: AuthService, client: OAuthClient, scope: str | None = None) -> str:
    return str(request(service, client, scope=scope).body["access_token"])


def test_a_token_with_a_covering_scope_passes(service: AuthService, oauth: OAuthFlow) -> None:
    token = token_of(service, oauth.add_client())
    auth = call(service, token, scope=READ)
    assert (auth.version, auth.credential) == ("oauth", "T1")
    assert call(service, token, scope=None).credential == "T1"


def test_no_token_is_401_with_a_bare_bearer_challenge(service: AuthService) -> None:
    refusal = refused(lambda: call(service, None))
    assert refusal.status == 401
    assert refusal.headers == (("WWW-Authenticate", "Bearer"),)
    assert refusal.body is not None
    assert "error" not in refusal.body


def test_an_expired_or_unknown_token_is_invalid_token(
    service: AuthService, oauth: OAuthFlow, clock: ManualClock
) -> None:
    token = token_of(service, oauth.add_client())
    clock.advance(7201)
    refusal = refused(lambda: call(service, token))
    assert call_error_of(refusal) == (401, "invalid_token")
    assert refusal.headers == (("WWW-Authenticate", 'Bearer error="invalid_token"'),)
    [used] = [e for e in service.timeline.events if isinstance(e, ApiCall)]
    assert used.credential_expired
    assert used.error == "invalid_token"
    assert call_error_of(refused(lambda: call(service, "a.b.c"))) == (401, "invalid_token")


def test_a_token_without_the_scope_is_403_insufficient_scope_naming_both(
    service: AuthService, oauth: OAuthFlow
) -> None:
    client = oauth.add_client([READ, WRITE])
    token = token_of(service, client, scope=READ)
    refusal = refused(lambda: call(service, token, scope=WRITE))
    assert call_error_of(refusal) == (403, "insufficient_scope")
    assert refusal.headers == (
        ("WWW-Authenticate", f'Bearer error="insufficient_scope", scope="{WRITE}"'),
    )
    [refused_call] = [e for e in service.timeline.events if isinstance(e, ApiCall)]
    assert refused_call.status == 403
    assert WRITE in refused_call.describe()
    assert f"it has {READ}" in refused_call.describe()
    assert "the client may get it" in refusal.reason
    # The body the authentication page publishes, word for word.
    assert refusal.body == {
        "error": "insufficient_scope",
        "message": f"Token does not contain required scope: {WRITE}",
    }


def test_a_missing_scope_is_a_wrong_credential_only_when_the_client_may_get_it(
    service: AuthService, oauth: OAuthFlow
) -> None:
    """As v2's 1469 (a good credential, a right the account lacks) is no refused-call
    finding, a scope the client may not get is none either; a token asked without a
    scope the client could have had is a wrong credential."""
    could = token_of(service, oauth.add_client([READ, WRITE]), scope=READ)
    refused(lambda: call(service, could, scope=WRITE))
    cannot = token_of(service, oauth.add_client([READ]))
    refused(lambda: call(service, cannot, scope=WRITE))
    calls = [e for e in service.timeline.events if isinstance(e, ApiCall)]
    assert [(c.status, c.error, c.wrong_credential) for c in calls] == [
        (403, "insufficient_scope", True),
        (403, "insufficient_scope", False),
    ]


# -- the scope a call needs, from its path and method (no scope= on the route) -------

LABELS = "/v2026-07/cdp-api/accounts/tealium-corp/profiles/main/labels"
CONTEXT = f"/v2026-06/context-api/accounts/acme/profiles/main/engines/{ENGINE}/actions"


def path_call(service: AuthService, token: str, method: str, path: str) -> Any:
    return admitted(service, "oauth", token=token, method=method, path=path)


def test_a_calls_scope_comes_from_its_path_and_method(
    service: AuthService, oauth: OAuthFlow
) -> None:
    # The authentication page's example: a tealium-corp:*:... token reads any profile.
    client = oauth.add_client(["tealium-corp:*:cdp-api:2026-07:labels:read"])
    token = token_of(service, client)
    assert path_call(service, token, "GET", LABELS).credential == "T1"
    assert path_call(service, token, "GET", LABELS.replace("main", "staging") + "/7")
    refusal = refused(lambda: path_call(service, token, "POST", LABELS))
    assert call_error_of(refusal) == (403, "insufficient_scope")
    needed = "tealium-corp:main:cdp-api:2026-07:labels:write"
    assert refusal.body == {
        "error": "insufficient_scope",
        "message": f"Token does not contain required scope: {needed}",
    }
    assert f'scope="{needed}"' in dict(refusal.headers)["WWW-Authenticate"]
    assert "version 2026-07, API 'cdp-api', action write" in refusal.reason
    # Another version of the API is another scope.
    other_version = LABELS.replace("2026-07", "2026-10")
    assert refused(lambda: path_call(service, token, "GET", other_version)).status == 403
    # A path that is not a calendar-versioned API call needs no scope: any live token.
    assert path_call(service, token, "GET", "/api/x").credential == "T1"


@pytest.mark.parametrize(("reading", "needed"), [("write", "write"), ("delete", "delete")])
def test_delete_needs_write_or_delete_as_the_option_says(
    make_service: Callable[..., AuthService], reading: str, needed: str
) -> None:
    service = make_service(oauth_delete_action=reading)
    scope = f"tealium-corp:main:cdp-api:2026-07:labels:{needed}"
    token = token_of(service, service.flow(OAuthFlow).add_client([scope]))
    assert path_call(service, token, "DELETE", LABELS + "/3").credential == "T1"
    other = "delete" if needed == "write" else "write"
    token = token_of(service, service.flow(OAuthFlow).add_client([scope.replace(needed, other)]))
    refusal = refused(lambda: path_call(service, token, "DELETE", LABELS + "/3"))
    assert f"required scope: {scope}" in str(refusal.body)
    # Issue 43, 2: the reason names both pages' readings, the client's scope the other
    # one accepts, and the option.
    assert (
        f"the pages disagree on DELETE: {READINGS[reading]}, which this fake follows "
        f"(oauth_delete_action={reading!r}), while {READINGS[other]}, which the client was "
        f"granted ({scope.replace(needed, other)!r}): the option "
        f"oauth_delete_action={other!r} requires {other} instead"
    ) in refusal.reason


READINGS = {
    "write": 'dev-portal-authentication says "write for POST, PUT, and DELETE requests"',
    "delete": "dev-portal-scopes lists delete as an action of its own",
}


def test_a_delete_refused_without_the_other_reading_still_names_the_option(
    service: AuthService, oauth: OAuthFlow
) -> None:
    token = token_of(service, oauth.add_client(["tealium-corp:main:cdp-api:2026-07:labels:read"]))
    refusal = refused(lambda: path_call(service, token, "DELETE", LABELS + "/3"))
    assert refusal.reason.endswith(
        f"while {READINGS['delete']}: the option oauth_delete_action='delete' requires delete "
        "instead"
    )
    # Other methods are no matter of the two readings.
    assert "disagree" not in refused(lambda: path_call(service, token, "POST", LABELS)).reason


def test_engine_enforced_calls_need_an_engine_scope(service: AuthService, oauth: OAuthFlow) -> None:
    engine = f"acme:main:context-api:2026-06:{ENGINE}"
    for granted in (
        engine,
        "acme:main:context-api:2026-06:*",
        "acme:*:*",
        f"{engine}:actions:read",
    ):
        token = token_of(service, oauth.add_client([granted]))
        assert path_call(service, token, "GET", CONTEXT).version == "oauth", granted
    # Account and profile access alone is not sufficient.
    token = token_of(service, oauth.add_client(["acme:main:context-api:2026-06:actions:read"]))
    refusal = refused(lambda: path_call(service, token, "GET", CONTEXT))
    assert refusal.body == {
        "error": "insufficient_scope",
        "message": f"Token does not contain required scope: {engine}",
    }
    assert "engine must be granted" in refusal.reason


def test_a_path_without_account_and_profile_needs_a_scope_of_its_api_in_any_account(
    make_service: Callable[..., AuthService],
) -> None:
    # The versioning page's shape: /v2026-06/cdp/audiences.
    service = make_service()
    token = token_of(service, service.flow(OAuthFlow).add_client(["acme:*:cdp:*:audiences:read"]))
    assert path_call(service, token, "GET", "/v2026-06/cdp/audiences").credential == "T1"
    refusal = refused(lambda: path_call(service, token, "GET", "/v2026-06/cdp/labels"))
    assert "required scope: {account}:{profile}:cdp:2026-06:labels:read" in str(refusal.body)
    unchecked = make_service(oauth_short_paths=False)
    token = token_of(
        unchecked, unchecked.flow(OAuthFlow).add_client(["acme:main:x:2026-01:y:read"])
    )
    assert path_call(unchecked, token, "GET", "/v2026-06/cdp/labels").credential == "T1"


def test_manage_covers_the_other_actions_unless_the_option_says_not(
    make_service: Callable[..., AuthService],
) -> None:
    manage = "tealium-corp:main:cdp-api:2026-07:labels:manage"
    service = make_service()
    token = token_of(service, service.flow(OAuthFlow).add_client([manage]))
    assert path_call(service, token, "GET", LABELS).credential == "T1"
    strict = make_service(oauth_manage_covers=False)
    token = token_of(strict, strict.flow(OAuthFlow).add_client([manage]))
    assert refused(lambda: path_call(strict, token, "GET", LABELS)).status == 403


def test_a_v2_token_on_an_oauth_route_is_invalid_token(service: AuthService) -> None:
    from pytest_mgmtauth._service.flows.v2 import V2Flow

    account = service.accounts.add_account()
    token, _ = service.flow(V2Flow).grant(account.username, account.api_key)
    refusal = refused(lambda: call(service, token))
    assert call_error_of(refusal) == (401, "invalid_token")
    assert "OAuth access token" in refusal.reason


def test_an_access_token_of_another_test_verifies_as_rs256_and_is_refused_as_such(
    make_service: Callable[..., AuthService],
) -> None:
    # Signed by this fake's key with RS256: known as the fake's own, not this test's.
    earlier = make_service()
    token = token_of(earlier, earlier.flow(OAuthFlow).add_client())
    service = make_service()
    refusal = refused(lambda: call(service, token))
    assert call_error_of(refusal) == (401, "invalid_token")
    assert "not issued in this test" in refusal.reason
    # The same claims signed RS512 with the same key were never an access token.
    claims = jwt.decode(token, options={"verify_signature": False})
    resigned = jwt.encode(claims, service.signer._private_key, algorithm="RS512")
    assert "not 'RS256'" in refused(lambda: call(service, resigned)).reason


def test_a_route_scope_is_checked_when_the_route_is_declared() -> None:
    OAuthFlow.check_route(None, READ)
    OAuthFlow.check_route(None, "{account}:main:tiq:2026-07:profiles:read")
    with pytest.raises(ValueError, match="has 2 part"):
        OAuthFlow.check_route(None, "a:b")
    with pytest.raises(ValueError, match=r"scope=\.\.\."):
        OAuthFlow.check_route("read", None)
    with pytest.raises(ValueError, match="carry no scopes"):
        FLOWS["v2"].check_route(None, READ)


# -- hostile input: an RFC error or a token, never anything else ----------------------

_PARAM = st.sampled_from(
    ["grant_type", "client_id", "client_secret", "scope", "x", "grant_type%00", ""]
)
_VALUE = st.one_of(
    st.sampled_from(["client_credentials", "password", "", "%ff", "%", "a:b:c:2026-07:d:read"]),
    st.text(max_size=30),
)


# make_service is a factory: each example builds its own service.
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    pairs=st.lists(st.tuples(_PARAM, _VALUE), max_size=6),
    raw=st.one_of(st.none(), st.binary(max_size=60)),
    content_type=st.sampled_from([FORM, None, "application/json", f"{FORM}; charset=utf-8"]),
    authorization=st.lists(
        st.one_of(
            st.sampled_from(["Basic", "Basic ", "Bearer x", "Basic Og==", "Basic YTpi"]),
            st.text(max_size=20).map(lambda t: "Basic " + t),
        ),
        max_size=2,
    ),
    with_secret=st.booleans(),
)
def test_any_token_request_gets_an_rfc_error_or_a_token_never_the_secret(
    make_service: Callable[..., AuthService],
    pairs: list[tuple[str, str]],
    raw: bytes | None,
    content_type: str | None,
    authorization: list[str],
    with_secret: bool,
) -> None:
    service = make_service()
    client = service.flow(OAuthFlow).add_client()
    if with_secret:
        pairs = [*pairs, ("client_id", client.client_id), ("client_secret", client.client_secret)]
    body = urlencode(pairs).encode() if raw is None else raw
    outcome: Answer | Refusal
    try:
        outcome = request(
            service, body=body, content_type=content_type, authorization=tuple(authorization)
        )
    except Refusal as refusal:
        outcome = refusal
    if isinstance(outcome, Answer):
        assert outcome.body["token_type"] == "Bearer"
        return
    assert outcome.body is not None
    assert outcome.status in (400, 401, 429)
    assert outcome.body["error"] in {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "invalid_scope",
        "unauthorized_client",
        "unsupported_grant_type",
        "temporarily_unavailable",
    }
    # What the transport sends: the body with every known secret masked.
    assert client.client_secret not in service.timeline.redact(str(outcome.body))


@pytest.mark.parametrize(
    "path", ["token", "/", "/a?b", "/a#b", "/a%2Fb", "//host/token", "/a b", "/_mgmtauth/t"]
)
def test_a_token_path_no_request_can_reach_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="oauth_token_path"):
        Options(oauth_token_path=path)
