"""Comparing the fake's records of a test with the service's: in order per method and
path, field by field, each difference named with its option where one exists."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mgmtauth._verdicts.drift import ABSENT, compare, drift_message, moved_message


def _token(lifetime: int = 1800, alg: str = "RS512") -> dict[str, Any]:
    return {
        "method": "POST",
        "path": "/v2/auth",
        "status": 200,
        "content_type": "application/json",
        "body": {"token": {"jwt": {"header": {"alg": alg}, "lifetime": lifetime}}},
    }


def test_equal_records_are_no_drift() -> None:
    assert compare([_token(), _token()], [_token(), _token()]) == []


def test_a_lifetime_difference_names_token_ttl() -> None:
    (drift,) = compare([_token(3600)], [_token()])
    assert (drift.exchange, drift.field) == ("POST /v2/auth #1", "body.token.jwt.lifetime")
    assert (drift.service, drift.fake, drift.option) == (3600, 1800, "token_ttl")
    assert "the service answered 3600, the fake 1800" in drift.line()
    assert "token_ttl" in drift.line()


def test_exchanges_pair_in_order_per_method_and_path() -> None:
    refused = {"method": "GET", "path": "/things", "auth": "refused", "status": 401}
    # Other exchanges between them do not shift the pairing of /v2/auth.
    found = compare([_token(), refused, _token(3600)], [_token(), _token(3600), refused])
    assert found == []
    (late,) = compare([_token(), _token(3600)], [_token(), _token()])
    assert late.exchange == "POST /v2/auth #2"


def test_an_algorithm_difference_has_no_option() -> None:
    (drift,) = compare([_token(alg="RS256")], [_token()])
    assert drift.field == "body.token.jwt.header.alg"
    assert drift.option is None


def test_a_missing_or_extra_key_reads_as_absent() -> None:
    service = {**_token(), "body": {"token": "string", "region": "string"}}
    fake = {**_token(), "body": {"token": "string"}}
    (missing,) = compare([service], [fake])
    assert (missing.field, missing.service, missing.fake) == ("body.region", "string", ABSENT)
    assert missing.option is None
    assert missing.line().endswith("(no option makes the fake answer so)")
    (extra,) = compare([fake], [service])
    assert (extra.service, extra.fake) == (ABSENT, "string")


V3_AUTH = "/v3/auth/accounts/{account}/profiles/{profile}"


def _v3(host: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"token": {"jwt": {"lifetime": 1800}}}
    if host is not None:
        body["host"] = host
    return {"method": "POST", "path": V3_AUTH, "status": 200, "body": body}


def test_another_region_host_names_v3_host() -> None:
    (drift,) = compare(
        [_v3("eu-central-1-platform.tealiumapis.com")], [_v3("us-west-2-platform.tealiumapis.com")]
    )
    assert (drift.field, drift.option) == ("body.host", "v3_host")


@pytest.mark.parametrize("service", [None, "string", "https://eu.example.com/"])
def test_a_host_no_value_of_v3_host_makes_names_no_option(service: str | None) -> None:
    (drift,) = compare([_v3(service)], [_v3("us-west-2-platform.tealiumapis.com")])
    assert (drift.field, drift.option) == ("body.host", None)
    assert "no option makes the fake answer so" in drift.line()


def _oauth(**body: Any) -> dict[str, Any]:
    token = {"access_token": {"jwt": {"lifetime": 7200}}, "token_type": "Bearer"}
    return {"method": "POST", "path": "/oauth/token", "status": 200, "body": {**token, **body}}


def test_an_oauth_answer_without_scope_names_no_option() -> None:
    # Neither value of oauth_scope_request makes the fake answer without a scope.
    (drift,) = compare([_oauth()], [_oauth(scope="string")])
    assert (drift.field, drift.service, drift.fake) == ("body.scope", ABSENT, "string")
    assert drift.option is None
    assert "oauth_scope_request" not in drift.line()


def test_expires_in_names_the_option_of_the_flow_whose_answer_it_is() -> None:
    (oauth,) = compare([_oauth(expires_in=3600)], [_oauth(expires_in=7200)])
    assert (oauth.field, oauth.option) == ("body.expires_in", "oauth_token_ttl")
    (lifetime,) = compare([_oauth(access_token={"jwt": {"lifetime": 3600}})], [_oauth()])
    assert lifetime.option == "oauth_token_ttl"
    # A v2 answer with an expires_in of its own: no option gives the fake's one.
    v2_answer = _token()
    (v2,) = compare([{**v2_answer, "body": {**v2_answer["body"], "expires_in": 1800}}], [v2_answer])
    assert (v2.field, v2.option) == ("body.expires_in", None)


def test_a_value_no_option_takes_names_none() -> None:
    (drift,) = compare([_token(lifetime=0)], [_token()])
    assert drift.option is None


def _call(**headers: Any) -> dict[str, Any]:
    path = "/{version}/tiq/accounts/{account}/profiles/{profile}/profiles"
    record = {"method": "GET", "path": path, "auth": "accepted"}
    return {**record, "headers": headers} if headers else record


def test_lifecycle_headers_name_api_lifecycle_only_where_it_makes_them() -> None:
    ended = {"sunset": "http-date", "deprecation": "true", "link": ["successor-version"]}
    found = compare([_call()], [_call(**ended)])
    assert {(d.field, d.option) for d in found} == {
        ("headers.sunset", "api_lifecycle"),
        ("headers.deprecation", "api_lifecycle"),
        ("headers.link", "api_lifecycle"),
    }
    # Another rel, or a Deprecation date: no value of an option makes it.
    other = compare(
        [_call(**{**ended, "link": ["next"], "deprecation": "@epoch"})], [_call(**ended)]
    )
    assert {(d.field, d.option) for d in other} == {
        ("headers.link", None),
        ("headers.deprecation", None),
    }


def test_a_status_difference_comes_first() -> None:
    service = {**_token(), "status": 403, "body": {"returnCode": 403}}
    fake = {**_token(), "status": 401, "body": {"returnCode": 1401}}
    found = compare([service], [fake])
    assert [d.field for d in found] == ["status", "body.returnCode"]


def test_an_exchange_only_one_side_made_names_the_token_path() -> None:
    service = {**_oauth(), "path": "/oauth2/token"}
    found = compare([service], [_oauth()])
    assert {(d.exchange, d.service, d.fake) for d in found} == {
        ("POST /oauth2/token #1", "answered", ABSENT),
        ("POST /oauth/token #1", ABSENT, "answered"),
    }
    assert {d.option for d in found} == {"oauth_token_path"}
    # Another flow's grant at another path: the OAuth token path would not make it.
    (v2,) = compare([{**_token(), "path": "/v2/login"}], [])
    assert v2.option is None


def test_a_renamed_cookie_is_found() -> None:
    service = {**_token(), "headers": {"set-cookie": {"JSESSIONID": ["secure"]}}}
    fake = {**_token(), "headers": {"set-cookie": {"SESSION": ["secure"]}}}
    fields = {d.field for d in compare([service], [fake])}
    assert fields == {"headers.set-cookie.JSESSIONID", "headers.set-cookie.SESSION"}


def test_the_message_names_the_recording_date() -> None:
    text = drift_message(compare([_token(3600)], [_token()]), recorded="2026-11-28", where="x.json")
    assert "2026-11-28" in text
    assert "x.json" in text
    assert "token_ttl" in text


def test_a_field_not_shown_matches_whatever_the_fake_answers() -> None:
    shown = {**_token(), "body": {"token": "(not shown)", "host": "string"}}
    assert compare([shown], [{**_token(), "body": {"token": {"jwt": {}}, "host": "string"}}]) == []
    (missing,) = compare([shown], [{**_token(), "body": {"token": "x"}}])
    assert missing.field == "body.host"


def _login(alphabet: str, length: int = 21) -> dict[str, Any]:
    return {
        "method": "POST",
        "path": "/v1/login",
        "status": 200,
        "body": {"utk": {"opaque": {"length": length, "alphabet": alphabet}}},
    }


@pytest.mark.parametrize(
    ("service", "fake"),
    [
        ("A-Z", "A-Z0-9"),  # a utk that happened to hold no digit (about 1 in 1000)
        ("A-Z0-9", "A-Z"),
    ],
)
def test_an_alphabet_within_the_other_is_one_format_seen_twice(service: str, fake: str) -> None:
    assert compare([_login(service)], [_login(fake)]) == []


@pytest.mark.parametrize(
    ("service", "fake"),
    [
        ("a-f0-9", "A-Z0-9"),
        ("A-Za-z0-9-_", "A-Z0-9"),  # 28 more characters: 21 draws would show one
        ("A-Z0-9", "a-z0-9"),
        ("a-f0-9", "a-z0-9"),  # hex against lower-case letters and digits
        ("0-9", "A-Z0-9"),
    ],
)
def test_an_alphabet_with_a_class_the_other_lacks_is_drift(service: str, fake: str) -> None:
    (drift,) = compare([_login(service)], [_login(fake)])
    assert drift.field == "body.utk.opaque.alphabet"
    assert (drift.service, drift.fake) == (service, fake)


def test_a_token_length_difference_is_drift_whatever_the_alphabets() -> None:
    (drift,) = compare([_login("A-Z", 20)], [_login("A-Z0-9")])
    assert (drift.field, drift.service, drift.fake) == ("body.utk.opaque.length", 20, 21)


def test_a_type_reads_as_a_type_and_a_code_as_a_value() -> None:
    service = {**_token(), "body": {"region": "string", "error": "string", "ids": ["integer"]}}
    fake = {**_token(), "body": {"error": "invalid_client", "ids": []}}
    lines = [d.line() for d in compare([service], [fake])]
    assert (
        "POST /v2/auth #1: body.region: the service answered <string>, the fake (absent)"
        " (no option makes the fake answer so)" in lines
    )
    # error is a code: its value is the service's word, quoted.
    assert 'POST /v2/auth #1: body.error: the service answered "string", the fake ' in lines[0]
    assert "body.ids: the service answered [<integer>], the fake []" in " ".join(lines)


def test_an_exchange_only_one_side_made_says_which() -> None:
    found = compare([_token(), _token()], [_token()])
    assert [d.line() for d in found] == [
        "POST /v2/auth #2: made with the service, not with the fake"
        " (no option makes the fake answer so)"
    ]
    (moved,) = compare([_token()], [_token(), _token()])
    assert moved.line(then="it answered", now="now") == (
        "POST /v2/auth #2: made now, not in the earlier recording"
        " (no option makes the fake answer so)"
    )


def test_what_moved_reads_as_then_and_now() -> None:
    before = {**_token(), "status": 401, "headers": {"set-cookie": {"JSESSIONID": ["path=/"]}}}
    after = {**_token(), "status": 403, "headers": {"set-cookie": {"SESSIONID": ["path=/"]}}}
    text = moved_message(compare([before], [after]), recorded="2026-11-28", where="s.json")
    assert text.splitlines() == [
        "the service answers unlike its recording of 2026-11-28 (s.json):",
        "  POST /v2/auth #1: status: it answered 401, now 403 (no option makes the fake answer so)",
        "  POST /v2/auth #1: headers.set-cookie: JSESSIONID gone, SESSIONID new"
        " (no option makes the fake answer so)",
    ]


def test_a_test_that_stopped_early_counts_the_exchanges_it_did_not_make() -> None:
    found = compare([_token(), _token(), _token()], [_token(3600)])
    text = moved_message(found, recorded="2026-11-28", where="s.json", whole=False)
    assert text.splitlines()[1:] == [
        "  POST /v2/auth #1: body.token.jwt.lifetime: it answered 1800, now 3600 (the option "
        "that makes the fake answer so: token_ttl)",
        "  2 recorded exchange(s) not made now: the test stopped before them",
    ]


def test_the_drift_message_says_drift_and_what_to_do() -> None:
    text = drift_message(
        compare([_token(3600, alg="RS256")], [_token()]), recorded="2026-11-28", where="s.json"
    )
    lines = text.splitlines()
    assert (
        lines[0]
        == "drift: the fake answered unlike the service's recording of 2026-11-28 (s.json):"
    )
    assert lines[-1] == (
        "Fix: set the option named (token_ttl: a marker, an ini setting or a flag, see the "
        "Reference) and the fake answers like the service; or report a difference no option "
        "makes: the fake cannot be told to make it (pytest-mgmtauth's issue tracker); or if "
        "the service moved since the recording, record the test anew with pytest "
        "--mgmtauth-live."
    )
