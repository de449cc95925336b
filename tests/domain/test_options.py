"""Options: defaults of the contract, validation, and messages that say how to fix."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from pytest_mgmtauth import Options
from pytest_mgmtauth._domain._options import OPTION_NAMES, build_options, check_option_names


def test_defaults_are_the_contracts() -> None:
    options = Options()
    assert options.token_ttl == 1800
    assert options.refresh_margin == 60
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
        Options(1800)  # type: ignore[misc]
    options = Options()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.token_ttl = 5  # type: ignore[misc]


def test_timedelta_is_taken_as_seconds() -> None:
    options = Options(token_ttl=timedelta(minutes=5), lockout_duration=timedelta(seconds=90))
    assert options.token_ttl == 300.0
    assert options.lockout_duration == 90.0


@pytest.mark.parametrize("name", ["token_ttl", "lockout_duration", "session_timeout"])
def test_durations_must_be_positive(name: str) -> None:
    with pytest.raises(ValueError, match=rf"'{name}' must be > 0 seconds, got 0"):
        Options(**{name: 0})
    with pytest.raises(ValueError, match=rf"'{name}' must be > 0 seconds, got -5"):
        Options(**{name: -5})


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
        Options(throttle=False)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["strict", "https"])
def test_flags_must_be_bools(name: str) -> None:
    with pytest.raises(TypeError, match=rf"'{name}' must be True or False, got 'yes'"):
        Options(**{name: "yes"})


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
    text = Options(token_ttl=90, lockout_threshold=3, throttle=None, strict=True).describe()
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
