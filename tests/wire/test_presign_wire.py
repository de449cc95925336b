"""A test's first generated account has its first token signed ahead, from the end of
the test before it (issue 14): the token /v2/auth answers is the same, only ready."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from pytest_mgmtauth import MgmtClock, Options
from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionPool
from pytest_mgmtauth._service.clock import ManualClock


@pytest.fixture
def pool(request: pytest.FixtureRequest) -> Iterator[SessionPool]:
    """A pool of its own (the session's key, a fresh presigner and server): the
    session's presigner has the credit earlier tests left it."""
    session_pool: SessionPool = request.getfixturevalue("_mgmtauth_pool")
    pool = SessionPool(signing_key=session_pool.signing_key)
    yield pool
    pool.close()


@pytest.fixture
def frozen() -> Iterator[MgmtClock]:
    # One clock second for the previous test's end and this test's grant.
    clock = MgmtClock().start()
    yield clock
    clock.stop()


@pytest.fixture
def next_fake(pool: SessionPool, frozen: MgmtClock) -> Iterator[MgmtServer]:
    """The second test's fake: the first one's end drew its first account's username
    and had its token signed."""
    MgmtServer(Options(), pool).close()
    fake = MgmtServer(Options(), pool)
    yield fake
    fake.close()


def _auth(fake: MgmtServer, username: str, key: str) -> str:
    answer = requests.post(fake.url + "/v2/auth", data={"username": username, "key": key})
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["token"]
    return token


def test_the_next_tests_first_account_gets_the_token_signed_at_this_tests_end(
    pool: SessionPool, frozen: MgmtClock, next_fake: MgmtServer
) -> None:
    fake = next_fake
    hits = pool.signer.presigner.hits
    account = fake.add_account()
    assert account.username.startswith("user1.")
    token = _auth(fake, account.username, account.api_key)
    assert pool.signer.presigner.hits == hits + 1
    call = requests.get(fake.url + "/nowhere", headers={"Authorization": f"Bearer {token}"})
    assert call.status_code == 404  # the token authenticated; no such route
    [record] = fake._service.token_list()
    assert record.token == token
    assert record.claims.iat == int(frozen.now().timestamp())
    # The drawn username is used once: the next account gets a new one.
    assert fake.add_account().username.startswith("user2.")


def test_an_account_with_its_own_username_leaves_the_drawn_one_unused(
    next_fake: MgmtServer,
) -> None:
    fake = next_fake
    account = fake.add_account("someone@example.com")
    _auth(fake, account.username, account.api_key)
    # The drawn username is only ever the test's first account's: a second account
    # gets a username of its own (numbered by its place), the draw stays unused.
    second = fake.add_account()
    assert second.username.startswith("user2.")
    assert second.username != fake._service.accounts._first_username
    _auth(fake, second.username, second.api_key)


def test_a_fake_on_its_own_clock_draws_nothing_ahead(pool: SessionPool) -> None:
    # The standalone server's clock: the next fake's time is not the process's.
    MgmtServer(Options(), pool, ManualClock()).close()
    assert pool.take_next_username() is None


def test_the_fixture_signs_ahead_as_the_test_function_returns_and_close_only_once(
    pool: SessionPool, frozen: MgmtClock
) -> None:
    # mgmt_server calls sign_ahead_for_next_test before its teardown checks, so that
    # the signature starts ~0.2 ms sooner; close() then draws nothing more.
    fake = MgmtServer(Options(), pool)
    fake.sign_ahead_for_next_test()
    drawn = pool._next_username
    assert drawn is not None
    assert pool.signer.presigner.is_pending(
        (drawn, int(frozen.now().timestamp()), 1800, fake.options.issuer)
    )
    fake.close()
    assert pool.take_next_username() == drawn


def test_the_plugin_signs_ahead_as_the_test_function_returns(
    pytester: pytest.Pytester,
) -> None:
    # Before pytest reports the call and tears down the test's fixtures (the signature
    # then ends sooner before the next test's client asks); a test on mgmt_clock, whose
    # clock is still frozen then, signs ahead in mgmt_server's teardown, before its checks.
    pytester.makeconftest(
        """
        import pytest
        from pytest_mgmtauth._fake import server as _fake, session as _pool

        seen = []

        @pytest.fixture(autouse=True)
        def watch(monkeypatch):
            real_sign = _pool.SessionPool.anticipate_next_account
            real_check = _fake.MgmtServer.check
            def sign(self, *args):
                seen.append("sign ahead")
                real_sign(self, *args)

            monkeypatch.setattr(_pool.SessionPool, "anticipate_next_account", sign)
            monkeypatch.setattr(_fake.MgmtServer, "check",
                                lambda self: (seen.append("check"), real_check(self))[1])
            seen.clear()
            yield seen

        @pytest.fixture
        def later(watch):
            yield
            watch.append("later's teardown")

        @pytest.fixture(autouse=True)
        def show_order(request, watch):  # after mgmt_server's teardown: set up before it
            yield
            print(request.node.name, watch)
        """
    )
    pytester.makepyfile(
        """
        def test_plain(mgmt_server, later, watch):
            watch.append("body")

        def test_on_mgmt_clock(mgmt_server, mgmt_clock, later, watch):
            watch.append("body")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-s")
    result.assert_outcomes(passed=2)
    printed = "\n".join(result.stdout.lines)
    assert "test_plain ['body', 'sign ahead', \"later's teardown\", 'check']" in printed
    assert "test_on_mgmt_clock ['body', \"later's teardown\", 'sign ahead', 'check']" in printed
