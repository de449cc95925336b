"""v3 auth in the domain: tokens bound to an account and profile, churn and throttling
per profile, profile restrictions, and the public record's identifier shapes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from domain_support import admitted

from pytest_mgmtauth import AuthRejected, Options, Throttled, TokenIssued
from pytest_mgmtauth._service import faults as _faults
from pytest_mgmtauth._service.accounts import (
    generate_session_id,
    generate_utk,
    make_account,
    parse_profiles,
)
from pytest_mgmtauth._service.flows.registry import endpoint_for
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.flows.v3 import V3Flow, named_scopes
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock


def _refusal(call: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as info:
        call()
    return info.value


def _call(service: AuthService, token: str, path: str) -> Any:
    return admitted(service, "v3", token=token, path=path)


def test_a_v3_token_is_bound_to_its_account_and_profile(service: AuthService) -> None:
    alice = service.accounts.add_account()
    token, record = service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    assert (record.version, record.account, record.profile) == ("v3", "acme", "main")
    [issued] = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert (issued.version, issued.account, issued.profile) == ("v3", "acme", "main")
    assert "v3 token T1" in issued.describe()
    assert "acme/main" in issued.describe()
    auth = _call(service, token, "/v3/customers/accounts/acme/profiles/main/visitors")
    assert (auth.version, auth.credential) == ("v3", "T1")


def test_a_call_for_another_profile_or_account_is_refused_naming_both(
    service: AuthService,
) -> None:
    alice = service.accounts.add_account()
    token, _ = service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    other_profile = _refusal(lambda: _call(service, token, "/v3/x/accounts/acme/profiles/dev"))
    assert other_profile.status == 401
    assert other_profile.return_code == 1401
    assert "acme/main" in other_profile.reason
    assert "acme/dev" in other_profile.reason
    assert "v3_scope='account'" in other_profile.reason
    other_account = _refusal(lambda: _call(service, token, "/v3/x/accounts/umbrella/profiles/main"))
    assert "acme/main" in other_account.reason
    assert "'umbrella'" in other_account.reason
    assert "/v3/auth/accounts/umbrella/profiles/main" in other_account.reason


def test_v3_scope_account_accepts_any_profile_of_the_account(
    make_service: Callable[..., AuthService],
) -> None:
    service = make_service(v3_scope="account")
    alice = service.accounts.add_account()
    token, _ = service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    assert _call(service, token, "/v3/x/accounts/acme/profiles/dev").credential == "T1"
    refused = _refusal(lambda: _call(service, token, "/v3/x/accounts/umbrella/profiles/main"))
    assert "umbrella" in refused.reason


def test_v2_token_on_a_v3_route_and_the_reverse_are_refused(service: AuthService) -> None:
    alice = service.accounts.add_account()
    v2, _ = service.flow(V2Flow).grant(alice.username, alice.api_key)
    v3, _ = service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    refused = _refusal(lambda: _call(service, v2, "/v3/x/accounts/acme/profiles/main"))
    assert "T1 is a v2 token" in refused.reason
    assert "/v3/auth/accounts/" in refused.reason
    reverse = _refusal(lambda: admitted(service, "v2", token=v3, path="/api/x"))
    assert "T2 is a v3 token (for acme/main)" in reverse.reason
    assert "/v2/auth" in reverse.reason


def test_churn_is_counted_per_account_and_profile(service: AuthService) -> None:
    alice = service.accounts.add_account()
    for profile in ("main", "dev", "qa"):
        service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", profile)
    # A v2 token alongside is no churn either: another credential kind.
    service.flow(V2Flow).grant(alice.username, alice.api_key)
    issued = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert [e.premature for e in issued] == [False, False, False, False]
    service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "dev")
    last = [e for e in service.timeline.events if isinstance(e, TokenIssued)][-1]
    assert last.while_valid == ("T2",)
    assert service.auth_count(version="v3") == 4
    assert service.auth_count(version="v2") == 1
    assert service.auth_count() == 5


def test_v3_premature_grants_are_throttled_with_retry_after(
    make_service: Callable[..., AuthService],
) -> None:
    service = make_service(throttle=2)
    alice = service.accounts.add_account()
    for _ in range(3):
        service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    refused = _refusal(
        lambda: service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    )
    assert refused.status == 429
    assert refused.retry_after is not None
    [throttled] = [e for e in service.timeline.events if isinstance(e, Throttled)]
    assert throttled.version == "v3"
    assert throttled.describe().startswith("/v3/auth throttled (429")
    # v2 has its own window: not throttled by v3's churn.
    service.flow(V2Flow).grant(alice.username, alice.api_key)


def test_profiles_restrict_which_pairs_an_account_may_get_tokens_for(
    service: AuthService,
) -> None:
    alice = service.accounts.add_account(profiles=["acme/main", ("acme", "dev"), "umbrella/*"])
    service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "dev")
    service.flow(V3Flow).grant(alice.username, alice.api_key, "umbrella", "anything")
    refused = _refusal(
        lambda: service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "qa")
    )
    assert refused.status == 401
    assert refused.return_code == 1401
    assert "acme/qa" in refused.reason
    assert "acme/dev, acme/main, umbrella/*" in refused.reason
    rejected = [e for e in service.timeline.events if isinstance(e, AuthRejected)][-1]
    assert (rejected.version, rejected.account, rejected.profile) == ("v3", "acme", "qa")
    assert rejected.describe().startswith("/v3/auth for acme/qa rejected (1401)")
    assert "profiles=acme/dev, acme/main, umbrella/*" in repr(alice)


def test_wrong_key_and_unknown_user_get_1401_with_a_diagnosis(service: AuthService) -> None:
    alice = service.accounts.add_account()
    wrong = _refusal(lambda: service.flow(V3Flow).grant(alice.username, "nope", "acme", "main"))
    assert wrong.status == 401
    assert "API key" in wrong.reason
    unknown = _refusal(lambda: service.flow(V3Flow).grant("bob@example.com", "k", "acme", "main"))
    assert unknown.status == 401
    assert "no account 'bob@example.com'" in unknown.reason
    # Each refusal's event names the account and profile the grant asked for.
    rejected = [e for e in service.timeline.events if isinstance(e, AuthRejected)]
    assert [(e.username, e.account, e.profile) for e in rejected] == [
        (alice.username, "acme", "main"),
        (None, "acme", "main"),
    ]


@pytest.mark.parametrize(
    ("profiles", "error"),
    [
        ("acme/main", TypeError),
        (("acme", "main"), TypeError),
        (["acme"], ValueError),
        (["acme/main/x"], ValueError),
        ([("acme", "")], ValueError),
        (5, TypeError),
    ],
)
def test_bad_profiles_say_what_to_pass(profiles: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="account/profile"):
        make_account(1, None, None, None, None, profiles)


def test_profiles_parse_strings_and_tuples() -> None:
    assert parse_profiles(["a/b", ("c", "d")]) == frozenset({("a", "b"), ("c", "d")})
    assert parse_profiles(None) is None
    assert parse_profiles([]) == frozenset()


def test_v3_paths_name_their_scope() -> None:
    found = endpoint_for("/v3/auth/accounts/acme/profiles/main")
    assert found is not None
    flow, endpoint, params = found
    assert (flow, endpoint.operation, params) == (
        V3Flow,
        "grant",
        {"account": "acme", "profile": "main"},
    )
    assert endpoint_for("/v3/auth/accounts/acme/profiles/") is None
    assert endpoint_for("/v3/auth/accounts/acme") is None
    assert named_scopes("/v3/customers/accounts/acme/profiles/main/x") == [("acme", "main")]
    assert named_scopes("/v3/customers/accounts/acme") == [("acme", None)]
    assert named_scopes("/v3/status") == []


def test_expiry_message_states_the_real_lifetime_of_a_token_issued_mid_second(
    signer: Any,
) -> None:
    clock = ManualClock(1_800_000_000.75)
    service = AuthService(Options(), signer, clock)
    alice = service.accounts.add_account()
    token, record = service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    assert record.claims.exp - record.claims.iat == 1800
    clock.now = record.claims.exp + 5.0
    refused = _refusal(lambda: _call(service, token, "/v3/x/accounts/acme/profiles/main"))
    assert "expired 5 s ago" in refused.reason
    assert "valid 1799.250 s from issue" in refused.reason
    assert "truncated to the second" in refused.reason


def test_expiry_message_of_a_token_issued_on_a_whole_second_says_token_ttl(
    service: AuthService, clock: ManualClock
) -> None:
    alice = service.accounts.add_account()
    token, record = service.flow(V2Flow).grant(alice.username, alice.api_key)
    clock.now = record.claims.exp + 1
    refused = _refusal(lambda: admitted(service, "v2", token=token, path="/api/x"))
    assert "(valid 1800 s from issue)" in refused.reason


def test_expire_and_revoke_on_cue_apply_to_v3_tokens(service: AuthService) -> None:
    alice = service.accounts.add_account()
    token, _ = service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    assert service.fault_runner.expire("T1") == "T1"
    refused = _refusal(lambda: _call(service, token, "/v3/x/accounts/acme/profiles/main"))
    assert "ended early on cue" in refused.reason
    # Re-authenticating after an expiry on cue is no churn.
    service.flow(V3Flow).grant(alice.username, alice.api_key, "acme", "main")
    assert not [e for e in service.timeline.events if isinstance(e, TokenIssued)][-1].premature
    assert any(e.describe() == "token T1 expired on cue" for e in service.timeline.events)


def test_v1_identifiers_have_the_published_shapes(service: AuthService) -> None:
    alice = service.accounts.add_account()
    session = service.flow(V1Flow).login(alice.username, alice.password)
    assert re.fullmatch(r"-?[0-9]+", session.session_id)
    assert re.fullmatch(r"[A-Z0-9]{21}", session.utk)
    ids = {generate_session_id() for _ in range(200)}
    assert len(ids) == 200  # unguessable: no repeats
    assert any(i.startswith("-") for i in ids)
    assert any(not i.startswith("-") for i in ids)
    utks = {generate_utk() for _ in range(200)}
    assert len(utks) == 200


def test_tokens_carry_the_real_issuer_unless_configured(
    make_service: Callable[..., AuthService],
) -> None:
    import jwt

    default = make_service()
    alice = default.accounts.add_account()
    token, _ = default.flow(V2Flow).grant(alice.username, alice.api_key)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["iss"] == "https://api.tealiumiq.com"
    custom = make_service(issuer="https://issuer.example")
    bob = custom.accounts.add_account()
    token2, _ = custom.flow(V2Flow).grant(bob.username, bob.api_key)
    assert jwt.decode(token2, options={"verify_signature": False})["iss"] == (
        "https://issuer.example"
    )
    # A token of the other issuer is refused, naming both.
    refused = _refusal(lambda: admitted(custom, "v2", token=token, path="/x"))
    assert "https://api.tealiumiq.com" in refused.reason
    assert "https://issuer.example" in refused.reason


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"v3_scope": "tenant"}, "v3_scope' must be 'profile'"),
        ({"issuer": ""}, "issuer' must be a non-empty str"),
    ],
)
def test_bad_v3_options_say_what_to_pass(options: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        Options(**options)


def test_every_kind_of_scripted_fault_can_target_v3_auth(service: AuthService) -> None:
    service.fault_runner.plan.add(_faults.hang(5, clock="simulated", version="v3"))
    service.fault_runner.plan.add(_faults.reset(version="v3"))
    service.fault_runner.plan.add(_faults.malformed(version="v3"))
    assert service.fault_runner.take_fault("v2", "POST", "/v2/auth", None) is None
    assert service.fault_runner.take_fault("v1", "POST", "/v1/login", None) is None
    path = "/v3/auth/accounts/acme/profiles/main"
    kinds = [service.fault_runner.take_fault("v3", "POST", path, None) for _ in range(3)]
    assert [k.fault.kind for k in kinds if k is not None] == ["hang", "reset", "malformed"]
    assert _faults.failure(503, version=None).applies_to("v3")
    assert _faults.failure(503, version="v3").endpoints == (
        "/v3/auth/accounts/{account}/profiles/{profile}"
    )


def test_the_options_line_shows_issuer_and_v3_scope_only_when_changed() -> None:
    assert "issuer" not in Options().describe()
    assert "v3_scope" not in Options().describe()
    line = Options(issuer="https://issuer.example", v3_scope="account").describe()
    assert line.endswith(" issuer=https://issuer.example v3_scope=account")
