"""The mgmtauth marker, ini settings and command-line flags, as a user's suite sees them."""

from __future__ import annotations

import pytest

from pytest_mgmtauth._service.options import OPTION_NAMES


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


def test_report_header_shows_the_suite_wide_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(
        [
            "mgmtauth: token_ttl=1800s refresh_margin=300s lockout=5/600s "
            "session_timeout=1800s throttle=5 strict=False https=False*"
        ]
    )


def test_closest_marker_wins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.mgmtauth(token_ttl=100, lockout_threshold=2)

        def show(server):
            o = server.options
            print(f"ttl={o.token_ttl:g} lockout={o.lockout_threshold} throttle={o.throttle}")

        def test_module_level(mgmt_server):
            show(mgmt_server)

        @pytest.mark.mgmtauth(token_ttl=200)
        class TestClass:
            def test_class_level(self, mgmt_server):
                show(mgmt_server)

            @pytest.mark.mgmtauth(token_ttl=300, throttle=None)
            def test_function_level(self, mgmt_server):
                show(mgmt_server)
        """
    )
    result = pytester.runpytest_inprocess("-v", "-s")
    result.stdout.fnmatch_lines(
        [
            "*::test_module_level ttl=100 lockout=2 throttle=5",
            "*::TestClass::test_class_level ttl=200 lockout=2 throttle=5",
            "*::TestClass::test_function_level ttl=300 lockout=2 throttle=None",
        ]
    )
    result.assert_outcomes(passed=3)


def test_marker_option_changes_the_wire(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import requests

        @pytest.mark.mgmtauth(lockout_threshold=1)
        def test_locked_after_one(mgmt_server, mgmt_account):
            url = mgmt_server.url + "/v1/login"
            bad = {"username": mgmt_account.username, "password": "nope"}
            codes = [requests.post(url, data=bad).json()["returnCode"] for _ in range(2)]
            print("codes:", codes[0], codes[1])
        """
    )
    result = pytester.runpytest_inprocess("-s")
    result.stdout.fnmatch_lines(["*codes: 1401 1402"])


def test_ini_settings_set_suite_wide_defaults_and_markers_override(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(
        """
        [pytest]
        mgmtauth_token_ttl = 600
        mgmtauth_throttle = none
        mgmtauth_strict = true
        mgmtauth_lockout_threshold = 7
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_from_ini(mgmt_server):
            o = mgmt_server.options
            print(f"ini: {o.token_ttl:g} {o.throttle} {o.strict} {o.lockout_threshold}")

        @pytest.mark.mgmtauth(token_ttl=60, refresh_margin=10, strict=False)
        def test_marker_wins(mgmt_server):
            o = mgmt_server.options
            print(f"marker: {o.token_ttl:g} {o.throttle} {o.strict} {o.lockout_threshold}")
        """
    )
    result = pytester.runpytest_inprocess("-s")
    result.stdout.fnmatch_lines(
        [
            "mgmtauth: token_ttl=600s *lockout=7/600s *throttle=None strict=True*",
            "*ini: 600 None True 7",
            "*marker: 60 None False 7",
        ]
    )
    result.assert_outcomes(passed=2)


def test_bad_ini_value_is_a_usage_error_naming_the_setting(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmgmtauth_token_ttl = half an hour\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    result.stderr.fnmatch_lines(
        ["ERROR: mgmtauth_token_ttl = 'half an hour': expected a number of seconds"]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_fractional_count_in_the_ini_asks_for_a_whole_number(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmgmtauth_lockout_threshold = 2.5\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    result.stderr.fnmatch_lines(
        ["ERROR: mgmtauth_lockout_threshold = '2.5': expected a whole number"]
    )


def test_invalid_ini_value_is_a_usage_error_with_the_options_message(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmgmtauth_lockout_duration = -5\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    result.stderr.fnmatch_lines(
        [
            "ERROR: mgmtauth_lockout_duration must be > 0 and <= 315360000 seconds "
            "(10 years), got -5*"
        ]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_bad_boolean_ini_value_says_what_is_expected(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmgmtauth_https = maybe\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    result.stderr.fnmatch_lines(["ERROR: mgmtauth_https = 'maybe': expected true or false"])


def test_command_line_flags_override_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmgmtauth_strict = false\n")
    pytester.makepyfile(
        """
        import pytest

        def test_flags(mgmt_server):
            print("flags:", mgmt_server.options.strict, mgmt_server.options.https)
            print("url:", mgmt_server.url.split(":")[0])

        @pytest.mark.mgmtauth(https=False)
        def test_marker_beats_flag(mgmt_server):
            print("marker:", mgmt_server.options.https, mgmt_server.url.split(":")[0])
        """
    )
    result = pytester.runpytest_inprocess("-s", "--mgmtauth-strict", "--mgmtauth-https")
    result.stdout.fnmatch_lines(
        [
            "mgmtauth: *strict=True https=True*",
            "*flags: True True",
            "url: https",
            "*marker: False http",
        ]
    )
    result.assert_outcomes(passed=2)


def test_flags_appear_in_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--help")
    result.stdout.fnmatch_lines(
        [
            "*pytest-mgmtauth*",
            "*--mgmtauth-strict*",
            "*--mgmtauth-https*",
        ]
    )
    result.stdout.fnmatch_lines(["  mgmtauth_token_ttl (string):", "*bearer token validity*"])


def test_every_option_has_a_flag_that_overrides_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmgmtauth_token_ttl = 600\nmgmtauth_throttle = 3\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess(
        "--mgmtauth-token-ttl=120",
        "--mgmtauth-throttle",
        "none",
        "--mgmtauth-require-logout",
        "--mgmtauth-v3-scope=account",
        "--mgmtauth-issuer",
        "https://iss.example",
    )
    result.stdout.fnmatch_lines(
        [
            "mgmtauth: token_ttl=120s refresh_margin=20s *throttle=None *require_logout=True "
            "issuer=https://iss.example v3_scope=account"
        ]
    )
    help_text = pytester.runpytest_inprocess("--help").stdout.str()
    for name in ("token-ttl", "refresh-margin", "lockout-threshold", "lockout-duration"):
        assert f"--mgmtauth-{name}" in help_text
    for name in ("session-timeout", "throttle", "require-logout", "issuer", "v3-scope"):
        assert f"--mgmtauth-{name}" in help_text


def test_an_option_on_by_default_has_a_no_flag_that_switches_it_off(
    pytester: pytest.Pytester,
) -> None:
    # Issue 14: keep_alive is True by default; its generated flag switches it off, over
    # the ini, and a marker still wins.
    pytester.makeini("[pytest]\nmgmtauth_keep_alive = true\n")
    pytester.makepyfile(
        """
        import pytest

        def test_flag(mgmt_server):
            print("flag:", mgmt_server.options.keep_alive)

        @pytest.mark.mgmtauth(keep_alive=True)
        def test_marker_beats_flag(mgmt_server):
            print("marker:", mgmt_server.options.keep_alive)
        """
    )
    result = pytester.runpytest_inprocess("-s", "--mgmtauth-no-keep-alive")
    result.stdout.fnmatch_lines(["mgmtauth: * keep_alive=False", "*flag: False", "*marker: True"])
    result.assert_outcomes(passed=2)
    help_text = pytester.runpytest_inprocess("--help").stdout.str()
    assert "--mgmtauth-no-keep-alive" in help_text
    assert "mgmtauth_keep_alive (string)" in help_text


def test_bad_flag_value_is_a_usage_error_naming_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess("--mgmtauth-throttle=lots")
    result.stderr.fnmatch_lines(
        ["ERROR: --mgmtauth-throttle 'lots': expected a number of premature grants per 60 s, *"]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = pytester.runpytest_inprocess("--mgmtauth-lockout-duration=-5")
    result.stderr.fnmatch_lines(["ERROR: --mgmtauth-lockout-duration must be > 0 and <= *"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_unknown_marker_option_fails_listing_the_known_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mgmtauth(token_tll=60)
        def test_typo(mgmt_server):
            pass

        @pytest.mark.mgmtauth(token_ttl=120)
        def test_fine(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    message = (
        "TypeError: @pytest.mark.mgmtauth: unknown option 'token_tll' "
        f"(did you mean 'token_ttl'?); known options: {', '.join(OPTION_NAMES)}"
    )
    # The message once, right under the header (it was printed twice, chained).
    result.stdout.fnmatch_lines(
        ["*_ ERROR at setup of test_typo _*", message, "*= short test summary info =*"],
        consecutive=True,
    )
    assert "During handling" not in result.stdout.str()
    assert result.stdout.lines.count(message) == 1
    result.assert_outcomes(passed=1, errors=1)


def test_positional_marker_arguments_are_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mgmtauth(60)
        def test_positional(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(
        ["TypeError: @pytest.mark.mgmtauth takes keyword options only, got positional (60,)*"]
    )
    result.assert_outcomes(errors=1)


def test_invalid_marker_value_errors_the_test_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mgmtauth(token_ttl=30, refresh_margin=60)
        def test_margin_too_long(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(
        ["ValueError: mgmtauth option 'refresh_margin' (60 s) must be shorter than*"]
    )
    result.assert_outcomes(errors=1)
    # The message, not a traceback through the plugin's internals.
    assert "dataclasses.py" not in result.stdout.str()
    assert "_options.py" not in result.stdout.str()


def test_marker_is_registered_for_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mgmtauth(token_ttl=60, refresh_margin=5)
        def test_marked():
            pass
        """
    )
    result = pytester.runpytest_inprocess("--strict-markers")
    result.assert_outcomes(passed=1)


def test_token_ttl_alone_composes_with_the_derived_refresh_margin(
    pytester: pytest.Pytester,
) -> None:
    # Issue 9: token_ttl=60 alone used to fail at setup against the default margin (60 s).
    pytester.makeini("[pytest]\nmgmtauth_token_ttl = 600\n")
    pytester.makepyfile(
        """
        import pytest

        def test_from_ini(mgmt_server):
            assert mgmt_server.options.refresh_margin == 100

        @pytest.mark.mgmtauth(token_ttl=60)
        def test_marker_token_ttl_alone(mgmt_server):
            assert mgmt_server.options.refresh_margin == 10

        @pytest.mark.mgmtauth(token_ttl=5)
        def test_tiny_token_ttl(mgmt_server):
            assert mgmt_server.options.refresh_margin == 0
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3)


def test_an_explicit_ini_margin_conflicting_with_a_marker_ttl_names_both(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmgmtauth_refresh_margin = 120\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mgmtauth(token_ttl=60)
        def test_conflict(mgmt_server):
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(
        ["*'refresh_margin' (120 s) must be shorter than 'token_ttl' (60 s); leave*"]
    )
    result.assert_outcomes(errors=1)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("lockout_duration", "nan", "mgmtauth_lockout_duration must be > 0 and <= 315360000"),
        ("session_timeout", "inf", "mgmtauth_session_timeout must be > 0 and <= 315360000"),
        ("token_ttl", "1000000000000", "mgmtauth_token_ttl must be > 0 and <= 315360000"),
        ("refresh_margin", "-0.0", "mgmtauth_refresh_margin must be >= 0 and <= 315360000"),
        ("throttle", "100000000", "mgmtauth_throttle must be an int >= 1 and <= 1000000"),
    ],
)
def test_absurd_ini_numbers_are_usage_errors_naming_setting_value_and_range(
    pytester: pytest.Pytester, setting: str, value: str, message: str
) -> None:
    pytester.makeini(f"[pytest]\nmgmtauth_{setting} = {value}\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    result.stderr.fnmatch_lines([f"ERROR: {message}*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_test_without_a_marker_gets_the_suite_wide_options_unchanged(
    pytester: pytest.Pytester,
) -> None:
    # The suite-wide options are shared (frozen), not rebuilt for every test; a marker's
    # options are a new object with the marker's values.
    pytester.makeini("[pytest]\nmgmtauth_token_ttl = 600\n")
    pytester.makepyfile(
        """
        import pytest

        seen = []

        def test_plain(mgmt_server):
            seen.append(mgmt_server.options)

        def test_plain_again(mgmt_server):
            seen.append(mgmt_server.options)
            assert seen[0] is seen[1]
            assert seen[1].token_ttl == 600

        @pytest.mark.mgmtauth(token_ttl=300)
        def test_marked(mgmt_server):
            assert mgmt_server.options is not seen[0]
            assert mgmt_server.options.token_ttl == 300
            assert seen[0].token_ttl == 600
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=3)
