"""The normalised record of an exchange and the snapshot file: what a test's exchanges
with the service become before they are kept or compared (no HTTP here)."""

from __future__ import annotations

import base64
import json

import pytest

from pytest_mgmtauth._service.exchange_shape import (
    MAX_DEPTH,
    Exchange,
    Snapshot,
    TestRecord,
    alphabet,
    normalise,
    normalised_path,
)
from pytest_mgmtauth.flows import BearerFlow, registered

SECRET_TOKEN_SIGNATURE = "c2lnbmF0dXJlLXRoYXQtbXVzdC1uZXZlci1iZS1yZWNvcmRlZA"


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _jwt(*, alg: str = "RS512", iat: int = 1_700_000_000, ttl: int = 1800) -> str:
    header = _b64({"alg": alg, "typ": "JWT", "kid": "key-1"})
    claims = _b64({"sub": "user@example.com", "iat": iat, "exp": iat + ttl, "acct": "acme"})
    return f"{header}.{claims}.{SECRET_TOKEN_SIGNATURE}"


def _v2(token: str) -> Exchange:
    return Exchange(
        "POST",
        "/v2/auth",
        200,
        (("Content-Type", "application/json; charset=UTF-8"), ("Pragma", "no-cache")),
        json.dumps({"token": token}).encode(),
    )


def test_a_jwt_answer_keeps_its_format_and_lifetime_never_its_values() -> None:
    record = normalise(_v2(_jwt()))
    assert record == {
        "method": "POST",
        "path": "/v2/auth",
        "status": 200,
        "content_type": "application/json;charset=utf-8",
        "body": {
            "token": {
                "jwt": {
                    "header": {"alg": "RS512", "typ": "JWT", "kid": "string"},
                    "claims": {
                        "sub": "string",
                        "iat": "integer",
                        "exp": "integer",
                        "acct": "string",
                    },
                    "lifetime": 1800,
                }
            }
        },
    }
    text = json.dumps(record)
    assert SECRET_TOKEN_SIGNATURE not in text
    assert "user@example.com" not in text
    assert "acme" not in text


def test_two_answers_that_differ_only_in_dynamic_values_normalise_alike() -> None:
    assert normalise(_v2(_jwt(iat=1))) == normalise(_v2(_jwt(iat=2_000_000_000)))
    assert normalise(_v2(_jwt(ttl=3600))) != normalise(_v2(_jwt()))


def test_an_opaque_token_is_its_length_and_alphabet() -> None:
    record = normalise(_v2("0f3a9c77e1b24d55"))
    assert record["body"] == {"token": {"opaque": {"length": 16, "alphabet": "a-f0-9"}}}
    assert alphabet("Ab-9_") == "A-Za-z0-9-_"


def test_codes_are_kept_and_other_values_become_types() -> None:
    body = {"returnCode": 1401, "message": "Invalid credentials", "error": "x", "n": 1.5}
    record = normalise(
        Exchange(
            "POST",
            "/v2/auth",
            401,
            (("Content-Type", "application/json"),),
            json.dumps(body).encode(),
        )
    )
    assert record["body"] == {"returnCode": 1401, "message": "string", "error": "x", "n": "number"}


def test_placeholders_for_account_profile_and_version() -> None:
    assert (
        normalised_path("/v3/auth/accounts/acme/profiles/main")
        == "/v3/auth/accounts/{account}/profiles/{profile}"
    )
    assert normalised_path("/v2024-06/things/1?x=2") == "/{version}/things/1"


def test_meaningful_headers_in_their_stable_parts() -> None:
    headers = (
        ("WWW-Authenticate", 'Bearer realm="api", error="invalid_token", error_description="x"'),
        ("Retry-After", "30"),
        ("Set-Cookie", "JSESSIONID=SECRETSESSION; Path=/; Secure; HttpOnly"),
        ("Sunset", "Wed, 01 Oct 2025 00:00:00 GMT"),
        ("Deprecation", "@1700000000"),
        ("Link", '</v2025-10/>; rel="successor-version", </docs>; rel="deprecation"'),
        ("Date", "Sat, 28 Nov 2026 06:00:00 GMT"),
    )
    record = normalise(Exchange("GET", "/v1/login", 429, headers, b""))
    assert record["headers"] == {
        "www-authenticate": {"scheme": "Bearer", "error": "invalid_token"},
        "retry-after": "seconds",
        "set-cookie": {"JSESSIONID": ["httponly", "path=/", "secure"]},
        "sunset": "http-date",
        "deprecation": "@epoch",
        "link": ["deprecation", "successor-version"],
    }
    assert "SECRETSESSION" not in json.dumps(record)


def test_a_protected_call_is_its_auth_outcome_never_its_data() -> None:
    data = json.dumps({"customer": "secret data"}).encode()
    ok = Exchange("GET", "/v2024-06/accounts/acme/things", 200, (), data, protected=True)
    assert normalise(ok) == {
        "method": "GET",
        "path": "/{version}/accounts/{account}/things",
        "auth": "accepted",
    }
    refused = Exchange(
        "GET",
        "/things",
        401,
        (("Content-Type", "application/json"),),
        json.dumps({"returnCode": 1401, "message": "no"}).encode(),
        protected=True,
    )
    assert normalise(refused)["auth"] == "refused"
    assert normalise(refused)["body"] == {"returnCode": 1401, "message": "string"}


def test_the_snapshot_file_is_stable_sorted_json_and_reads_back() -> None:
    snapshot = Snapshot(
        {
            "test_b": TestRecord("2026-11-28", "0.2.0", (normalise(_v2(_jwt())),)),
            "test_a": TestRecord("2026-11-27", "0.2.0", ()),
        }
    )
    text = snapshot.dumps()
    assert text.endswith("\n")
    assert text.index('"test_a"') < text.index('"test_b"')
    assert Snapshot.loads(text) == snapshot
    assert Snapshot.loads(text).dumps() == text


@pytest.mark.parametrize("text", ["{", '{"format": 99}', '{"format": 1, "tests": {"t": {}}}'])
def test_a_broken_snapshot_says_so_and_how_to_fix_it(text: str) -> None:
    with pytest.raises(ValueError, match="fix it or remove it"):
        Snapshot.loads(text, where="mgmtauth_snapshots/test_x.json")


class _BadgeFlow(BearerFlow):
    """A flow of this test: its answers carry credentials, a code and a host under keys
    of its own, and its paths name a tenant."""

    name = "badge"
    title = "/v8/badge"
    path_title = "/v8/badge"
    secret = "API key"
    credential = "token"
    answer_field = "badge"
    auth_hosts = ("api.tealiumiq.com",)
    secret_keys = ("renewal",)
    code_keys = ("grade",)
    host_keys = ("gateway",)
    path_names = ("/tenants/(?P<tenant>[^/]+)",)


def test_a_flow_defined_here_declares_its_keys_and_names_and_the_shape_follows() -> None:
    badge, renewal = "bdg_" + "Q7" * 20, "rnw_" + "z9" * 20
    body = {
        "badge": badge,
        "renewal": renewal,
        "grade": "gold",
        "gateway": "eu.gateway.example.com",
        "note": "hello",
    }
    exchange = Exchange("POST", "/v8/tenants/t-42/badge", 200, (), json.dumps(body).encode())
    before = normalise(exchange)
    with registered(_BadgeFlow):
        record = normalise(exchange)
    assert record["path"] == "/v8/tenants/{tenant}/badge"
    assert record["body"] == {
        "badge": {"opaque": {"length": 44, "alphabet": "A-Za-z0-9_"}},
        "renewal": {"opaque": {"length": 44, "alphabet": "a-z0-9_"}},
        "grade": "gold",
        "gateway": "eu.gateway.example.com",
        "note": "string",
    }
    assert badge not in json.dumps(record)
    assert renewal not in json.dumps(record)
    # Unregistered, nothing of it is known: its keys are values of a type again.
    assert before["path"] == "/v8/tenants/t-42/badge"
    assert before["body"]["badge"] == before["body"]["grade"] == "string"


def _v3(host: str) -> Exchange:
    body = json.dumps({"token": _jwt(), "host": host}).encode()
    return Exchange("POST", "/v3/auth/accounts/acme/profiles/main", 200, (), body)


@pytest.mark.parametrize("own", ["127.0.0.1:53011", "[::1]:53011", "localhost:53011"])
def test_a_host_of_the_service_is_kept_and_the_fakes_address_is_its_region_host(
    own: str,
) -> None:
    service = normalise(_v3("eu-central-1-platform.tealiumapis.com"))
    assert service["body"]["host"] == "eu-central-1-platform.tealiumapis.com"
    fake = normalise(_v3(own), region_host="us-west-2-platform.tealiumapis.com")
    assert fake["body"]["host"] == "us-west-2-platform.tealiumapis.com"
    assert normalise(_v3("https://x.example.com/"))["body"]["host"] == "string"


_ENTRY = '{"recorded": "2026-01-01", "plugin_version": "0.1.0", "exchanges": %s}'


@pytest.mark.parametrize(
    "content",
    [
        b'{"format": 1, "tests": ["t"]}',
        b'{"format": 1, "tests": 5}',
        b'{"format": 1, "tests": "t"}',
        ('{"format": 1, "tests": {"t": %s}}' % (_ENTRY % '"abc"')).encode(),
        ('{"format": 1, "tests": {"t": %s}}' % (_ENTRY % "[1, 2]")).encode(),
        ('{"format": 1, "tests": {"t": %s}}' % (_ENTRY % '{"a": 1}')).encode(),
        b'{"format": 1, "tests": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"format": 1, "tests": {}, "x": "\xff"}',
    ],
    ids=[
        "tests-list",
        "tests-number",
        "tests-string",
        "exchanges-string",
        "exchanges-numbers",
        "exchanges-object",
        "deep",
        "not-utf8",
    ],
)
def test_a_snapshot_of_the_wrong_shape_is_a_value_error_naming_the_file(content: bytes) -> None:
    with pytest.raises(ValueError, match=r"^mgmtauth_snapshots/test_x\.json.*fix it or remove"):
        Snapshot.loads(content, where="mgmtauth_snapshots/test_x.json")


def _answer(body: bytes) -> Exchange:
    return Exchange("POST", "/v2/auth", 200, (("Content-Type", "application/json"),), body)


def test_a_body_nested_deeper_than_the_limit_is_recorded_as_not_json() -> None:
    for depth in (MAX_DEPTH + 1, 100_000):
        assert normalise(_answer(b"[" * depth + b"]" * depth))["body"] == "non-json"
    within = normalise(_answer(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH))
    assert within["body"] != "non-json"
    assert Snapshot.loads(Snapshot({"t": TestRecord("d", "v", (within,))}).dumps())
