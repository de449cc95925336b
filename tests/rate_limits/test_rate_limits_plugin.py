"""Rate limits of API calls as a user's suite sees them (pytester): the option from the
marker, the ini and the flag, the report header, a failing test's timeline, and a bad
setting's usage error."""

from __future__ import annotations

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


#: A user's Visitor Profile client that sends 60 lookups in the same second.
SUITE = """
import pytest
import requests

PATH = "/v3/customer/visitor/accounts/acme/profiles/main"


def lookups(mgmt_server, account, n):
    auth = requests.post(
        mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
        data={"username": account.username, "key": account.api_key},
    ).json()
    mgmt_server.route("GET", PATH).respond_with_json({"visitor": {}})
    bearer = {"Authorization": "Bearer " + auth["token"]}
    return [
        requests.get("http://" + auth["host"] + PATH, headers=bearer).status_code
        for _ in range(n)
    ]


def test_sixty_lookups_in_one_second(mgmt_server, mgmt_account, mgmt_clock):
    statuses = lookups(mgmt_server, mgmt_account, 60)
    assert statuses == [200] * 60
"""

#: The same test with the option on its marker.
MARKED = SUITE.replace("def test_sixty", "@pytest.mark.mgmtauth(rate_limits=True)\ndef test_sixty")


def test_the_marker_applies_the_published_figures_and_the_report_shows_the_429(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(MARKED)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*mgmtauth timeline*",
            "*GET /v3/customer/visitor/accounts/acme/profiles/main with T1 rate-limited (429, "
            "Retry-After 1s, Visitor Profile API (v3), 50/s): 50 requests to the Visitor "
            "Profile API (v3) for account 'acme' within the last 1 s, the limit is 50/s*",
            # The lookups after the first 429 did not wait its Retry-After: told so.
            "*rate-limited (429, Retry-After 1s, Visitor Profile API (v3), 50/s): retried 0 s "
            "after a 429 with Retry-After 1s; honour Retry-After*",
        ]
    )


def test_without_the_option_the_same_suite_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("ini", "args"),
    [("[pytest]\nmgmtauth_rate_limits = true\n", ()), ("", ("--mgmtauth-rate-limits",))],
)
def test_the_ini_setting_and_the_flag_switch_it_on_and_the_header_says_so(
    pytester: pytest.Pytester, ini: str, args: tuple[str, ...]
) -> None:
    if ini:
        pytester.makeini(ini)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["mgmtauth: *rate_limits=True*"])


def test_a_bad_ini_value_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmgmtauth_rate_limits = sometimes\n")
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*mgmtauth_rate_limits*'sometimes'*expected true or false*"])


def test_a_malformed_rate_limit_fails_the_test_with_the_accepted_form(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_declares(mgmt_server):
            mgmt_server.route("GET", "/v2/things", rate_limit="50 per second")
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ValueError: route(): rate_limit must be a rate '<N>/s' or '<N>/min' (like "
            "'50/s'), N a whole number from 1 to 1000000, got '50 per second'"
        ]
    )
