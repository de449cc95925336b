"""The fixtures as a user's suite sees them, run with pytester."""

from __future__ import annotations

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


def test_plugin_is_registered_by_its_entry_point(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--fixtures")
    result.stdout.fnmatch_lines(["*fixtures defined from pytest_mgmtauth.plugin*"])
    result.stdout.fnmatch_lines(["mgmt_server -- *", "    The fake management auth service*"])
    result.stdout.fnmatch_lines(["mgmt_account -- *", "    One account on ``mgmt_server``*"])
    result.stdout.fnmatch_lines(["mgmt_clock -- *", "    Frozen simulated time*"])
    markers = pytester.runpytest_inprocess("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.mgmtauth(**options): *token_ttl*"])


def test_each_test_gets_fresh_state(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import requests

        carried = {}

        def test_first(mgmt_server):
            account = mgmt_server.add_account("first@example.com")
            answer = requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": account.username, "key": account.api_key},
            )
            assert answer.status_code == 200
            mgmt_server.route("GET", "/api/x").respond_with_json({"x": 1})
            carried.update(token=answer.json()["token"], key=account.api_key)
            carried["url"] = mgmt_server.url
            assert mgmt_server.auth_count() == 1

        def test_second(mgmt_server):
            assert mgmt_server.url == carried["url"]  # one server per session
            assert mgmt_server.accounts == []
            assert mgmt_server.events == []
            assert mgmt_server.auth_count() == 0
            again = requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": "first@example.com", "key": carried["key"]},
            )
            assert again.status_code == 401
            assert "no account 'first@example.com' exists" in again.json()["message"]
            mgmt_server.route("GET", "/api/x").respond_with_json({"x": 2})
            old = requests.get(
                mgmt_server.url + "/api/x",
                headers={"Authorization": "Bearer " + carried["token"]},
            )
            assert old.status_code == 401
            assert "not issued in this test" in old.json()["message"]
            print("second saw:", ", ".join(type(e).__name__ for e in mgmt_server.events))
        """
    )
    result = pytester.runpytest_inprocess("-v", "-s")
    result.stdout.fnmatch_lines(
        [
            "*::test_first PASSED*",
            "*::test_second second saw: AuthRejected, ApiCall",
            "PASSED*",
        ]
    )
    result.assert_outcomes(passed=2)


def test_mgmt_server_belongs_to_the_test_that_asks_for_it_even_after_a_nested_run(
    pytester: pytest.Pytester,
) -> None:
    # A pytester run inside a test runs tests of its own: the outer test's fixtures
    # must still belong to the outer test.
    pytester.makeconftest('pytest_plugins = ["pytester"]')
    pytester.makepyfile(
        test_outer="""
        from pytest_mgmtauth.plugin import _FAKE

        def test_outer(pytester, request):
            pytester.makepyfile(test_inner="def test_inner():\\n    pass\\n")
            # The exit code, not the summary line: a user's plugin (pytest-pretty) may
            # rewrite that line in this innermost run, which nothing here configures.
            assert pytester.runpytest_inprocess("-p", "no:randomly").ret == 0
            fake = request.getfixturevalue("mgmt_server")
            assert request.node.stash[_FAKE] is fake
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--junitxml=out.xml")
    result.assert_outcomes(passed=1)
    # The fake's figures went with the outer test's report.
    assert 'name="mgmtauth' in (pytester.path / "out.xml").read_text()


def test_mgmt_account_is_a_ready_account_with_every_permission(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        from pytest_mgmtauth import Account

        def test_account(mgmt_server, mgmt_account):
            assert isinstance(mgmt_account, Account)
            assert mgmt_server.accounts == [mgmt_account]
            assert mgmt_account.permissions is None
            assert "@" in mgmt_account.username
            print("repr:", repr(mgmt_account))
            print("key in repr:", mgmt_account.api_key in repr(mgmt_account))
        """
    )
    result = pytester.runpytest_inprocess("-s")
    result.stdout.fnmatch_lines(
        [
            "* repr: Account(username='user1.*@example.com', api_key=#*, password=#*, "
            "permissions=all)",
            "key in repr: False",
        ]
    )
    result.assert_outcomes(passed=1)


def test_mgmt_clock_freezes_time_only_for_tests_that_ask(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import time

        def test_frozen(mgmt_clock):
            before = time.time()
            time.sleep(0.01)
            assert time.time() == before
            mgmt_clock.advance(minutes=5)
            assert time.time() == before + 300
            print("frozen:", getattr(time.time, "__module__", None))

        def test_not_frozen():
            print("free:", getattr(time.time, "__module__", None))
            start = time.time()
            time.sleep(0.01)
            assert time.time() > start
        """
    )
    result = pytester.runpytest_inprocess("-s")
    result.stdout.fnmatch_lines(["*frozen: freezegun.api*", "*free: time*"])
    result.assert_outcomes(passed=2)


def test_clock_and_fake_agree_on_expiry(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import requests

        def test_expiry(mgmt_server, mgmt_account, mgmt_clock):
            mgmt_server.route("GET", "/api/x").respond_with_json({})
            token = requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            ).json()["token"]
            bearer = {"Authorization": "Bearer " + token}
            mgmt_clock.advance(minutes=31)
            answer = requests.get(mgmt_server.url + "/api/x", headers=bearer)
            assert answer.status_code == 200, answer.json()["message"]
        """
    )
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: Authentication failed: token T1 expired 60 s ago*",
            "*1 failed*",
        ]
    )


def test_the_pool_fixture_is_internal_and_its_old_name_still_works_with_a_warning(
    pytester: pytest.Pytester,
) -> None:
    listed = pytester.runpytest_inprocess("--fixtures")
    assert "_mgmtauth_pool" not in listed.stdout.str()
    listed.stdout.fnmatch_lines(["mgmt_server_pool [[]session scope[]] -- *", "    Deprecated*"])
    pytester.makepyfile(
        """
        def test_old_name(mgmt_server_pool, mgmt_server):
            assert mgmt_server.url.startswith("http://127.0.0.1:")
        """
    )
    result = pytester.runpytest_inprocess("-W", "default::DeprecationWarning")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["*DeprecationWarning: the mgmt_server_pool fixture is internal and will be removed*"]
    )


def test_route_handler_that_raises_errors_the_test_at_teardown(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import requests

        def test_handler_bug(mgmt_server, mgmt_account):
            def broken(request):
                raise ZeroDivisionError("handler divided by zero")

            mgmt_server.route("GET", "/api/x").respond_with_handler(broken)
            token = requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            ).json()["token"]
            answer = requests.get(
                mgmt_server.url + "/api/x", headers={"Authorization": "Bearer " + token}
            )
            # The client saw a 500; the test body itself passes...
            assert answer.status_code == 500
            assert "re-raised in the test" in answer.json()["message"]

        def test_next_one_is_clean(mgmt_server):
            assert mgmt_server.events == []
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    # ...but the error is not lost: it fails the test at teardown.
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_handler_bug*",
            "*ZeroDivisionError: handler divided by zero",
            "*2 passed, 1 error*",
        ]
    )
    result.assert_outcomes(passed=2, errors=1)


def test_requests_outside_a_test_get_503(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import requests

        seen = {}

        def test_remember(mgmt_server):
            seen["url"] = mgmt_server.url

        def test_after():
            answer = requests.post(seen["url"] + "/v2/auth", data={"username": "a", "key": "k"})
            print("status:", answer.status_code, answer.json()["returnCode"])
        """
    )
    result = pytester.runpytest_inprocess("-s")
    result.stdout.fnmatch_lines(["*status: 503 503*"])
    result.assert_outcomes(passed=2)


def test_each_test_sees_its_own_requests(pytester: pytest.Pytester) -> None:
    # Issue 29, item 14: mgmt_server.requests, as pytest-httpserver's log and respx's
    # calls; the node id of the test, and a fresh log per test.
    pytester.makepyfile(
        """
        import requests
        from pytest_mgmtauth import RecordedRequest

        def test_first(mgmt_server, mgmt_account):
            requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            )
            requests.get(mgmt_server.url + "/api/missing")
            logged = mgmt_server.requests
            assert all(isinstance(r, RecordedRequest) for r in logged)
            assert [(r.method, r.path, r.status) for r in logged] == [
                ("POST", "/v2/auth", 200),
                ("GET", "/api/missing", 404),
            ]
            node = "test_each_test_sees_its_own_requests.py::test_first"
            assert {r.test for r in logged} == {node}
            assert mgmt_account.api_key not in repr(logged)

        def test_second(mgmt_server):
            assert mgmt_server.requests == []
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=2)
