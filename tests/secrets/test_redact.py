"""No secret echoed: the masker, and the service applying it to every text that quotes a
client (issue 9). The service is driven directly; tests/hostile drives it over HTTP."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_mgmtauth._service.accounts import fingerprint, generate_api_key, generate_password
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.secret_text import MIN_MASKED_LENGTH, SecretMasker
from pytest_mgmtauth._service.service import (
    DIAGNOSIS_BUDGET,
    DIAGNOSIS_WINDOW,
    AuthService,
    Refusal,
)
from pytest_mgmtauth._service.timeline import ManualClock

MakeService = Callable[..., AuthService]


def _masker(*secrets: str) -> SecretMasker:
    masker = SecretMasker()
    for secret in secrets:
        masker.add(secret)
    return masker


# -- the masker ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        lambda s: s,
        lambda s: quote(s, safe=""),
        lambda s: quote(s),
        lambda s: quote_plus(s),
        lambda s: s.replace("+", " "),
        lambda s: repr(s)[1:-1],
    ],
    ids=["as is", "quoted", "quoted keeping /", "quote_plus", "+ as space", "repr-escaped"],
)
def test_a_secret_is_masked_in_every_spelling_it_travels_in(
    spelling: Callable[[str], str],
) -> None:
    key = generate_api_key()
    text = f"no account '{spelling(key)}' exists"
    masked = _masker(key).mask(text)
    assert masked == f"no account '{fingerprint(key)}' exists"


def test_a_quote_in_a_user_chosen_secret_is_masked_inside_a_repr() -> None:
    secret = "it's a \\ secret"
    masked = _masker(secret).mask(f"no account {secret!r} exists")
    assert "secret" not in masked.replace(" exists", "")
    assert fingerprint(secret) in masked


def test_any_jwt_is_masked_without_being_registered() -> None:
    jwt = "eyJhbGciOiJSUzUxMiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl-_x"
    assert SecretMasker().mask(f"GET /api/{jwt}/x") == f"GET /api/{fingerprint(jwt)}/x"


def test_the_longest_spelling_wins_where_two_start_at_the_same_place() -> None:
    short, long = "abcdefgh", "abcdefgh-and-more"
    masked = _masker(short, long).mask(f"[{long}] [{short}]")
    assert masked == f"[{fingerprint(long)}] [{fingerprint(short)}]"


def test_secrets_too_short_to_mask_are_left_alone() -> None:
    short = "x" * (MIN_MASKED_LENGTH - 1)
    masker = _masker(short)
    assert masker.mask(f"a {short} b") == f"a {short} b"
    assert short not in masker


def test_text_without_secrets_is_returned_as_it_is() -> None:
    masker = _masker(generate_password())
    text = "the form field 'key' is empty"
    assert masker.mask(text) is text


@given(
    before=st.text(max_size=30),
    after=st.text(max_size=30),
    secret=st.text(min_size=MIN_MASKED_LENGTH, max_size=80),
)
def test_no_whole_secret_survives_masking_whatever_surrounds_it(
    before: str, after: str, secret: str
) -> None:
    masked = _masker(secret).mask(before + secret + after)
    assert secret not in masked


# -- the service -------------------------------------------------------------------------


def _refusal_of(call: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


def _all_text(service: AuthService) -> str:
    parts = []
    for event in service.timeline.events:
        parts.append(event.describe())
        parts.extend(str(getattr(event, f.name)) for f in dataclasses.fields(event))
    return "\n".join(parts)


def test_swapped_v2_fields_echo_no_key(service: AuthService) -> None:
    account = service.accounts.add_account()
    refusal = _refusal_of(lambda: service.flow(V2Flow).grant(account.api_key, account.username))
    assert account.api_key not in refusal.message
    assert fingerprint(account.api_key) in refusal.message
    assert account.api_key not in _all_text(service)


def test_password_sent_as_username_is_not_echoed(service: AuthService) -> None:
    account = service.accounts.add_account()
    refusal = _refusal_of(lambda: service.flow(V1Flow).login(account.password, account.password))
    assert account.password not in refusal.message
    assert account.password not in _all_text(service)


def test_secrets_of_sessions_and_rotated_keys_are_masked_in_events(
    service: AuthService, signer: object
) -> None:
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    old_key = account.api_key
    service.accounts.rotate_secret(account.username, "API key")
    for secret in (session.session_id, session.utk, old_key):
        service.timeline.record_unknown_route("GET", f"/v1/x;jsessionid={secret}", 404)
        service.timeline.record_bad_request("POST", "/v2/auth", 400, f"field {secret!r} is odd")
    text = _all_text(service)
    for secret in (session.session_id, session.utk, old_key):
        assert secret not in text
        assert fingerprint(secret) in text


def test_a_python_api_call_naming_a_key_as_the_account_does_not_echo_it(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    with pytest.raises(ValueError, match="no account") as caught:
        service.lockout.lock(account.api_key)
    assert account.api_key not in str(caught.value)


# -- diagnoses are no oracle ------------------------------------------------------------


def test_a_short_prefix_of_the_key_is_not_diagnosed_as_truncated(service: AuthService) -> None:
    account = service.accounts.add_account()
    for length in (1, 10, len(account.api_key) // 2 - 1):
        with pytest.raises(Refusal) as caught:
            service.flow(V2Flow).grant(account.username, account.api_key[:length])
        assert "truncated" not in caught.value.reason
    half = len(account.api_key) // 2
    refusal = _refusal_of(
        lambda: service.flow(V2Flow).grant(account.username, account.api_key[:half])
    )
    assert f"truncated ({half} of {len(account.api_key)} characters)" in refusal.reason


@pytest.mark.parametrize("secret", ["API key", "password"])
def test_diagnoses_pause_after_the_budget_and_resume_a_window_later(
    make_service: MakeService, clock: ManualClock, secret: str
) -> None:
    service = make_service(lockout_threshold=1000)
    account = service.accounts.add_account()
    real = account.api_key if secret == "API key" else account.password

    def attempt(value: str) -> str:
        if secret == "API key":
            return _refusal_of(lambda: service.flow(V2Flow).grant(account.username, value)).reason
        return _refusal_of(lambda: service.flow(V1Flow).login(account.username, value)).reason

    cut = real[: len(real) - 1]
    for _ in range(DIAGNOSIS_BUDGET):
        assert "truncated" in attempt(cut)
    paused = attempt(cut)
    assert "truncated" not in paused
    assert f"diagnoses of this account's {secret} are paused" in paused
    assert f"of {len(real)} characters" not in paused  # not even the length
    clock.advance(DIAGNOSIS_WINDOW)
    assert "truncated" in attempt(cut)


def test_the_diagnosis_budget_is_per_account(service: AuthService) -> None:
    first, second = service.accounts.add_account(), service.accounts.add_account()
    for _ in range(DIAGNOSIS_BUDGET + 1):
        _refusal_of(lambda: service.flow(V2Flow).grant(first.username, "wrong-key-123"))
    refusal = _refusal_of(lambda: service.flow(V2Flow).grant(second.username, second.api_key[:-1]))
    assert "truncated" in refusal.reason


def test_hypothesis_reports_of_credential_records_show_no_secret(service: AuthService) -> None:
    # Hypothesis (and IPython) print dataclasses field by field, repr=False fields too.
    from hypothesis.vendor.pretty import pretty

    account = service.accounts.add_account()
    token, token_record = service.flow(V2Flow).grant(account.username, account.api_key)
    session = service.flow(V1Flow).login(account.username, account.password)
    shown = pretty(token_record) + pretty(session)
    for secret in (token, session.session_id, session.utk):
        assert secret not in shown
    assert "T1" in shown
    assert "S1" in shown
