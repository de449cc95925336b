"""Options: defaults of the contract, validation, and messages that say how to fix."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from pytest_mgmtauth import Options
from pytest_mgmtauth._service.options import (
    OPTION_NAMES,
    OPTION_SPECS,
    build_options,
    check_option_names,
)


def options_with(name: str, value: object) -> Options:
    """Options with one field given by a parametrized name: any value, checked at run
    time (the hostile and the wrong-typed ones on purpose)."""
    fields: dict[str, Any] = {name: value}
    return Options(**fields)


def test_defaults_are_the_contracts() -> None:
    options = Options()
    assert options.token_ttl == 1800
    assert options.refresh_margin == 300
    assert options.lockout_duration == 600
    assert 1 <= options.lockout_threshold <= 10
    assert options.session_timeout > 0
    assert options.throttle == 5
    assert options.strict is False
    assert options.https is False


def test_option_names_are_the_contracts_at_least() -> None:
    contract = {
        "token_ttl",
        "refresh_margin",
        "lockout_threshold",
        "lockout_duration",
        "session_timeout",
        "throttle",
        "strict",
        "https",
    }
    assert contract <= set(OPTION_NAMES)


def test_options_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        Options(1800)  # type: ignore[call-arg]
    options = Options()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.token_ttl = 5  # type: ignore[misc]


def test_timedelta_is_taken_as_seconds() -> None:
    # The reference documents timedelta durations, and type checkers accept them (the
    # duration fields are descriptors: set as float | timedelta, read back as float).
    options = Options(
        token_ttl=timedelta(minutes=5),
        lockout_duration=timedelta(seconds=90),
    )
    assert options.token_ttl == 300.0
    assert options.lockout_duration == 90.0
    # Read back, they are seconds to a type checker too (mypy runs on this file in CI).
    seconds: float = options.token_ttl + options.lockout_duration + options.session_timeout
    assert seconds == 300 + 90 + 1800
    assert vars(options)["token_ttl"] == 300.0  # kept under the field's own name


def test_a_duration_not_set_yet_reads_as_a_missing_attribute() -> None:
    # As a plain field: hasattr() is False and getattr's default is used (copy and pickle
    # make the object before they restore its fields).
    unset = object.__new__(Options)
    assert not hasattr(unset, "token_ttl")
    assert getattr(unset, "refresh_margin", "none yet") == "none yet"


@pytest.mark.parametrize("name", ["token_ttl", "lockout_duration", "session_timeout"])
def test_durations_must_be_positive(name: str) -> None:
    with pytest.raises(ValueError, match=rf"'{name}' must be > 0 and <= 315360000 .*, got 0"):
        options_with(name, 0)
    with pytest.raises(ValueError, match=rf"'{name}' must be > 0 and <= 315360000 .*, got -5"):
        options_with(name, -5)


@pytest.mark.parametrize("value", ["1800", None, True])
def test_durations_refuse_non_numbers_naming_the_type(value: object) -> None:
    with pytest.raises(TypeError, match=r"'token_ttl' takes seconds \(int, float or timedelta\)"):
        Options(token_ttl=value)  # type: ignore[arg-type]


def test_token_ttl_must_be_whole_seconds_like_the_exp_claim() -> None:
    assert Options(token_ttl=90.0).token_ttl == 90
    assert Options(token_ttl=timedelta(minutes=2)).token_ttl == 120
    with pytest.raises(ValueError, match=r"'token_ttl' must be whole seconds .* got 1.5"):
        Options(token_ttl=1.5)


def test_refresh_margin_may_be_zero_but_must_be_shorter_than_the_ttl() -> None:
    assert Options(refresh_margin=0).refresh_margin == 0
    with pytest.raises(ValueError, match=r"'refresh_margin' \(100 s\) must be shorter than"):
        Options(token_ttl=100, refresh_margin=100)


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "5"])
def test_lockout_threshold_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(ValueError, match="'lockout_threshold' must be an int >= 1"):
        Options(lockout_threshold=value)  # type: ignore[arg-type]


def test_throttle_none_switches_it_off_and_bad_values_say_so() -> None:
    assert Options(throttle=None).throttle is None
    with pytest.raises(ValueError, match="or None to switch throttling off, got 0"):
        Options(throttle=0)
    with pytest.raises(ValueError, match="got False"):
        Options(throttle=False)


@pytest.mark.parametrize("name", ["strict", "https"])
def test_flags_must_be_bools(name: str) -> None:
    with pytest.raises(TypeError, match=rf"'{name}' must be True or False, got 'yes'"):
        options_with(name, "yes")


def test_unknown_option_names_the_known_ones_and_the_closest() -> None:
    with pytest.raises(TypeError) as excinfo:
        check_option_names({"token_tll": 5}, where="@pytest.mark.mgmtauth")
    message = str(excinfo.value)
    assert message.startswith("@pytest.mark.mgmtauth: unknown option 'token_tll'")
    assert "(did you mean 'token_ttl'?)" in message
    assert message.endswith("known options: " + ", ".join(OPTION_NAMES))


def test_unknown_option_without_a_close_match_still_lists_the_known_ones() -> None:
    with pytest.raises(TypeError) as excinfo:
        check_option_names({"colour": "red"}, where="here")
    message = str(excinfo.value)
    assert "unknown option 'colour'" in message
    assert "did you mean" not in message
    assert "known options: token_ttl, refresh_margin" in message


def test_build_options_applies_overrides_on_the_base() -> None:
    base = Options(token_ttl=300)
    built = build_options(base, {"throttle": None}, where="x")
    assert built.token_ttl == 300
    assert built.throttle is None
    assert base.throttle == 5  # the base is untouched


def test_build_options_validates_the_result() -> None:
    with pytest.raises(ValueError, match="'token_ttl' must be > 0"):
        build_options(Options(), {"token_ttl": -1}, where="x")
    with pytest.raises(TypeError, match="unknown option 'ttl'"):
        build_options(Options(), {"ttl": 1}, where="x")


def test_describe_reproduces_the_options_in_one_line() -> None:
    text = Options(
        token_ttl=90, refresh_margin=60, lockout_threshold=3, throttle=None, strict=True
    ).describe()
    assert "\n" not in text
    assert set(text.split()) >= {
        "token_ttl=90s",
        "refresh_margin=60s",
        "lockout=3/600s",
        "session_timeout=1800s",
        "throttle=None",
        "strict=True",
        "https=False",
    }


# -- issue 9: absurd numbers are refused up front, naming option, value and range --------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("lockout_duration", float("nan")),
        ("lockout_duration", float("inf")),
        ("session_timeout", float("nan")),
        ("refresh_margin", float("nan")),
        ("token_ttl", 10**12),
        pytest.param("token_ttl", 10**400, id="token_ttl-10**400"),
        ("session_timeout", -0.0),
        ("refresh_margin", -0.0),
        ("lockout_duration", 315_360_001),
        ("refresh_margin", float("-inf")),
    ],
)
def test_absurd_durations_are_refused_naming_option_value_and_range(
    name: str, value: float
) -> None:
    with pytest.raises(
        ValueError, match=rf"'{name}' must be >?=? 0 and <= 315360000 seconds \(10 years\), got "
    ):
        options_with(name, value)


def test_a_huge_int_is_refused_without_printing_all_its_digits() -> None:
    with pytest.raises(ValueError, match="got a huge int") as info:
        Options(token_ttl=10**400)
    assert "0000000000000000000000" not in str(info.value)


@pytest.mark.parametrize("value", [True, "60", b"60", [60], None, 1j])
def test_durations_refuse_bools_strings_and_other_types(value: object) -> None:
    with pytest.raises(TypeError, match=r"'lockout_duration' takes seconds .* <= 315360000"):
        Options(lockout_duration=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["lockout_threshold", "throttle"])
@pytest.mark.parametrize("value", [0, -1, 10**12, True, 2.0, "5", float("nan")])
def test_counts_must_be_ints_in_range(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"'{name}' must be an int >= 1 and <= 1000000"):
        options_with(name, value)


def test_largest_values_are_accepted() -> None:
    options = Options(
        token_ttl=315_360_000,
        lockout_duration=315_360_000,
        session_timeout=timedelta(days=3650),  # documented
        lockout_threshold=1_000_000,
        throttle=1_000_000,
    )
    assert options.token_ttl == 315_360_000
    assert options.refresh_margin == 300


# -- issue 9: refresh_margin is derived from token_ttl unless set --------------------------


@pytest.mark.parametrize(
    ("token_ttl", "margin"),
    [(3600, 300), (1800, 300), (600, 100), (300, 50), (60, 10), (9, 1), (5, 0), (1, 0)],
)
def test_refresh_margin_not_set_is_a_sixth_of_token_ttl_at_most_300(
    token_ttl: int, margin: float
) -> None:
    options = Options(token_ttl=token_ttl)
    assert options.refresh_margin == margin
    assert options.refresh_margin_derived


def test_token_ttl_alone_composes_through_every_level() -> None:
    ini = build_options(Options(), {"token_ttl": 600}, where="ini")
    assert ini.refresh_margin == 100
    marker = build_options(ini, {"token_ttl": 60}, where="marker")
    assert (marker.token_ttl, marker.refresh_margin) == (60, 10)


def test_an_explicit_refresh_margin_is_kept_and_only_an_explicit_conflict_fails() -> None:
    explicit = build_options(Options(), {"refresh_margin": 30}, where="ini")
    assert not explicit.refresh_margin_derived
    assert build_options(explicit, {"token_ttl": 120}, where="marker").refresh_margin == 30
    with pytest.raises(ValueError, match=r"'refresh_margin' \(30 s\) must be shorter than"):
        build_options(explicit, {"token_ttl": 30}, where="marker")
    # None asks for the derived margin again.
    assert build_options(explicit, {"refresh_margin": None, "token_ttl": 30}, where="m").margin == 5


def test_every_option_is_declared_once_with_a_parser() -> None:
    from pytest_mgmtauth._service.options import OPTION_NAMES, OPTION_SPEC

    assert tuple(OPTION_SPEC) == OPTION_NAMES
    assert OPTION_SPEC["token_ttl"].parse(" 90 ") == 90
    assert OPTION_SPEC["refresh_margin"].parse("2.5") == 2.5
    assert OPTION_SPEC["throttle"].parse("off") is None
    assert OPTION_SPEC["strict"].parse("Yes") is True
    assert OPTION_SPEC["v3_scope"].parse("account") == "account"
    assert OPTION_SPEC["token_ttl"].default == 1800.0
    with pytest.raises(ValueError, match="expected a whole number"):
        OPTION_SPEC["lockout_threshold"].parse("2.5")
    with pytest.raises(ValueError, match="far too large"):
        OPTION_SPEC["token_ttl"].parse("9" * 5000)
    with pytest.raises(ValueError, match="expected 'profile' or 'account'"):
        OPTION_SPEC["v3_scope"].parse("team")


@pytest.mark.parametrize("text", ["--0", "+-5", "-+1", "++60", "1-", "- 5"])
def test_a_number_with_more_than_one_sign_is_a_parse_error_of_the_option(text: str) -> None:
    # The hostile suite found "--0" in an ini setting escaping as int()'s own ValueError
    # ("invalid literal for int()"), which named neither the setting nor what it takes.
    for spec in OPTION_SPECS:
        if spec.kind not in ("seconds", "count"):
            continue
        with pytest.raises(ValueError, match=r"^expected ") as raised:
            spec.parse(text)
        assert "invalid literal" not in str(raised.value)


def test_the_portal_options_are_checked_and_shown_when_changed() -> None:
    # Each disagreement between the developer portal's pages is an option (docs/oauth.md).
    assert "oauth_" not in Options().describe()
    changed = Options(oauth_delete_action="delete", oauth_manage_covers=False)
    assert "oauth_delete_action=delete oauth_manage_covers=False" in changed.describe()
    with pytest.raises(ValueError, match="'oauth_scope_request' must be 'exact' or 'covered'"):
        Options(oauth_scope_request="subset")
    with pytest.raises(TypeError, match="'oauth_profile_wildcard' must be True or False"):
        Options(oauth_profile_wildcard="yes")  # type: ignore[arg-type]
    from pytest_mgmtauth._service.options import OPTION_SPEC

    assert OPTION_SPEC["oauth_engine_scopes"].parse(" Requested ") == "requested"
    assert OPTION_SPEC["oauth_manage_covers"].flag == "--no-oauth-manage-covers"
