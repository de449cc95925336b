"""The token signer: a new account's first token is signed ahead (``prefetch``), and the
service signs outside its lock, so that one grant's signature holds up no other request.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from domain_support import admitted

from pytest_mgmtauth import TokenIssued
from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionResources
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock
from pytest_mgmtauth._service.token_format import ISSUER, Claims
from pytest_mgmtauth._service.tokens import (
    MAX_AHEAD,
    MAX_CREDIT,
    PROBE_EVERY,
    TokenSigner,
)

T0 = 1_800_000_000
T = TypeVar("T")


def test_issue_returns_the_token_signed_ahead_for_the_same_arguments(
    rsa_key_2048: rsa.RSAPrivateKey,
) -> None:
    signer = TokenSigner(rsa_key_2048)
    ahead = signer.prefetch("a@example.com", T0, 1800)
    assert ahead is not None
    signed = ahead.result(timeout=10)
    assert signer.issue("a@example.com", T0, 1800) == signed
    assert signer.hits == 1
    token, claims = signed
    assert signer.verify(token) == claims
    assert jwt.decode(
        token,
        rsa_key_2048.public_key(),
        algorithms=["RS512"],
        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
    ) == {
        "sub": "a@example.com",
        "iss": ISSUER,
        "iat": T0,
        "nbf": T0,
        "exp": T0 + 1800,
        "jti": claims.jti,
    }
    # Taken once: the next issue() signs a token of its own.
    again, renewed = signer.issue("a@example.com", T0, 1800)
    assert again != token
    assert renewed.jti != claims.jti


@pytest.mark.parametrize(
    ("subject", "issued_at", "ttl", "issuer"),
    [
        ("b@example.com", T0, 1800, None),
        ("a@example.com", T0 + 1, 1800, None),
        ("a@example.com", T0, 600, None),
        ("a@example.com", T0, 1800, "https://elsewhere.example"),
    ],
)
def test_a_token_for_other_arguments_is_signed_when_asked(
    rsa_key_2048: rsa.RSAPrivateKey, subject: str, issued_at: int, ttl: int, issuer: str | None
) -> None:
    signer = TokenSigner(rsa_key_2048)
    ahead = signer.prefetch("a@example.com", T0, 1800)
    assert ahead is not None
    ahead.result(timeout=10)
    token, claims = signer.issue(subject, issued_at, ttl, issuer=issuer)
    assert signer.hits == 0
    assert (claims.sub, claims.iat, claims.exp) == (subject, issued_at, issued_at + ttl)
    assert signer.verify(token, issuer=issuer) == claims


def test_tokens_signed_ahead_and_never_taken_spend_credit_until_only_probes_run(
    rsa_key_2048: rsa.RSAPrivateKey,
) -> None:
    signer = TokenSigner(rsa_key_2048)
    subjects = iter(f"user{n}@example.com" for n in range(1000))
    # Each prefetch beyond MAX_AHEAD drops the oldest token, signed for nothing.
    while signer.misses < MAX_CREDIT:
        ahead = signer.prefetch(next(subjects), T0, 1800)
        assert ahead is not None
        ahead.result(timeout=10)
    assert signer.prefetch(next(subjects), T0, 1800) is None  # no credit left
    skipped = [signer.prefetch(next(subjects), T0, 1800) for _ in range(PROBE_EVERY - 2)]
    assert skipped == [None] * (PROBE_EVERY - 2)
    probe = signer.prefetch("probe@example.com", T0, 1800)  # one in PROBE_EVERY
    assert probe is not None
    probe.result(timeout=10)
    assert signer.issue("probe@example.com", T0, 1800) == probe.result()
    assert signer.hits == 1  # earns credit back: the next prefetch signs ahead again
    assert signer.prefetch(next(subjects), T0, 1800) is not None
    assert MAX_AHEAD < MAX_CREDIT


class PausedSigner(TokenSigner):
    """A signer whose signatures wait for ``release``: what the worker is doing can be
    seen while it does it."""

    def __init__(self, key: rsa.RSAPrivateKey) -> None:
        super().__init__(key)
        self.release = threading.Event()
        #: Set once a signature has started (and waits for ``release``).
        self.signing = threading.Event()

    def _signed(self, unsigned: bytes, algorithm: str = "RS512") -> str:
        self.signing.set()
        assert self.release.wait(10)
        return super()._signed(unsigned, algorithm)


def test_prefetch_never_waits_for_a_busy_worker(rsa_key_2048: rsa.RSAPrivateKey) -> None:
    # An idle worker is given the GIL once (prefetch sleeps 0), not waited for: the
    # caller goes on while the worker takes the job and signs.
    signer = PausedSigner(rsa_key_2048)
    first = signer.prefetch("a@example.com", T0, 1800)
    assert first is not None
    assert signer.signing.wait(10)  # taken, being signed
    assert first.running()
    # A busy worker is not waited for: this returns while the first is still held.
    second = signer.prefetch("b@example.com", T0, 1800)
    assert second is not None
    assert first.running()
    assert not second.running()
    assert not second.done()
    signer.release.set()
    assert signer.issue("a@example.com", T0, 1800) == first.result(timeout=10)
    assert signer.issue("b@example.com", T0, 1800) == second.result(timeout=10)
    assert signer.hits == 2


def test_no_thread_to_be_had_leaves_the_signing_to_issue(
    rsa_key_2048: rsa.RSAPrivateKey, refused_threads: set[str]
) -> None:
    signer = TokenSigner(rsa_key_2048)
    refused_threads.add("mgmtauth-presign")
    assert signer.prefetch("a@example.com", T0, 1800) is None
    token, claims = signer.issue("a@example.com", T0, 1800)
    assert signer.verify(token) == claims
    refused_threads.clear()
    assert signer.prefetch("b@example.com", T0, 1800) is not None  # tried again


def test_a_new_accounts_first_token_is_signed_ahead(rsa_key_2048: rsa.RSAPrivateKey) -> None:
    signer = TokenSigner(rsa_key_2048)
    clock = ManualClock(T0)
    service = AuthService(Options(), signer, clock)
    account = service.accounts.add_account()
    # The same arguments signed ahead again: the future of the token add_account asked for.
    assert signer.prefetch(account.username, T0, 1800) is None
    token, record = service.flow(V2Flow).grant(account.username, account.api_key)
    assert record.claims.iat == T0
    assert signer.verify(token) == record.claims
    clock.advance(1800)  # a renewal, at another second: signed when asked for
    later, renewed = service.flow(V2Flow).grant(account.username, account.api_key)
    assert renewed.claims.iat == T0 + 1800
    assert later != token


def test_the_first_generated_account_takes_the_username_reserved_for_it(
    signer: TokenSigner,
) -> None:
    reserved = "user1.0a0b0c@example.com"
    service = AuthService(Options(), signer, ManualClock(T0), first_username=reserved)
    first, second = service.accounts.add_account(), service.accounts.add_account()
    assert first.username == reserved
    assert second.username.startswith("user2.")
    assert service.accounts.first_generated
    # A first account named by the test leaves the reserved username unused.
    named = AuthService(Options(), signer, ManualClock(T0), first_username=reserved)
    named.accounts.add_account("someone@example.com")
    assert named.accounts.add_account().username.startswith("user2.")
    assert not named.accounts.first_generated


@pytest.fixture
def pool(request: pytest.FixtureRequest) -> Iterator[SessionResources]:
    """Session resources of their own (a signer whose hits count this test's only), with
    the session's signing key."""
    session_pool: SessionResources = request.getfixturevalue("_mgmtauth_pool")
    pool = SessionResources(signing_key=session_pool.signing_key)
    yield pool
    pool.close()


def test_the_next_tests_first_token_is_signed_ahead_as_this_test_ends(
    pool: SessionResources,
) -> None:
    signer = pool.signer
    options = Options()
    ahead = pool.sign_ahead_for_next_test(options, T0 + 0.75)
    assert ahead is not None
    ahead.result(timeout=10)  # signed (else issue() signs it again: it is as quick)
    reserved = pool.take_first_username()
    assert reserved is not None
    assert re.fullmatch(r"user1\.[0-9a-f]{6}@example\.com", reserved)
    assert pool.take_first_username() is None  # each reserved username goes to one test
    clock = ManualClock(T0)
    service = AuthService(options, signer, clock, first_username=reserved)
    account = service.accounts.add_account()
    assert account.username == reserved
    # Signed ahead already: adding the account started nothing more.
    assert signer.prefetch(reserved, T0, 1800) is None
    token, record = service.flow(V2Flow).grant(account.username, account.api_key)
    assert signer.hits == 1
    assert (record.claims.sub, record.claims.iat) == (reserved, T0)
    assert signer.verify(token) == record.claims


def test_a_test_reserves_the_next_ones_username_if_it_generated_its_first_on_process_time(
    pool: SessionResources,
) -> None:
    named = MgmtServer(Options(), pool)
    named.add_account("someone@example.com")
    named.close()
    assert pool.take_first_username() is None
    # On a clock of its own (mgmtauth-server's), the next state's time is not foreseen.
    on_its_clock = MgmtServer(Options(), pool, ManualClock(T0))
    on_its_clock.add_account()
    on_its_clock.close()
    assert pool.take_first_username() is None
    generated = MgmtServer(Options(), pool)
    generated.add_account()
    generated.close()
    reserved = pool._first_username
    assert reserved is not None
    after = MgmtServer(Options(), pool)  # takes the username reserved for it
    assert pool._first_username is None
    assert after.add_account().username == reserved
    after.close()


class HeldSigner(TokenSigner):
    """Holds the signing of one subject's tokens until released."""

    def __init__(self, key: rsa.RSAPrivateKey, held: str) -> None:
        super().__init__(key)
        self.held = held
        self.signing = threading.Event()
        self.release = threading.Event()

    def issue(
        self, subject: str, issued_at: int, ttl: int, *, issuer: str | None = None
    ) -> tuple[str, Claims]:
        if subject == self.held:
            self.signing.set()
            assert self.release.wait(10), "never released"
        return super().issue(subject, issued_at, ttl, issuer=issuer)


def _in_thread(work: Callable[[], T]) -> tuple[threading.Thread, list[T]]:
    """``work()`` in a thread of its own, and the list its result goes into."""
    done: list[T] = []

    def run() -> None:
        done.append(work())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_a_grant_being_signed_holds_up_no_other_request(
    rsa_key_2048: rsa.RSAPrivateKey,
) -> None:
    signer = HeldSigner(rsa_key_2048, "slow@example.com")
    service = AuthService(Options(), signer, ManualClock(T0))
    slow = service.accounts.add_account("slow@example.com")
    quick = service.accounts.add_account("quick@example.com")
    first, granted = _in_thread(lambda: service.flow(V2Flow).grant(slow.username, slow.api_key))
    assert signer.signing.wait(10)
    # While slow's token is being signed, another account is granted a token and uses it.
    second, quick_grant = _in_thread(
        lambda: service.flow(V2Flow).grant(quick.username, quick.api_key)
    )
    second.join(10)
    assert quick_grant, "the second grant waited for the first one's signature"
    token, _ = quick_grant[0]
    admitted(service, "v2", token=token, path="/x")
    signer.release.set()
    first.join(10)
    assert granted
    # The timeline is in the order the grants took effect.
    issued = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert [(e.username, e.token) for e in issued] == [
        ("quick@example.com", "T1"),
        ("slow@example.com", "T2"),
    ]


def test_a_grant_is_judged_when_it_takes_effect_after_its_signature(
    rsa_key_2048: rsa.RSAPrivateKey,
) -> None:
    # Two requests of one account overlap (a thundering herd): the one whose signature
    # ends last is a grant while the other's token was valid, and concurrent with it.
    signer = HeldSigner(rsa_key_2048, "herd@example.com")
    service = AuthService(Options(), signer, ManualClock(T0))
    account = service.accounts.add_account("herd@example.com")
    arrived = service.credentials.request_arrived()
    first, granted = _in_thread(
        lambda: service.flow(V2Flow).grant(account.username, account.api_key, arrived=arrived)
    )
    assert signer.signing.wait(10)
    signer.held = ""  # the second request's signature is not held
    service.flow(V2Flow).grant(
        account.username, account.api_key, arrived=service.credentials.request_arrived()
    )
    signer.release.set()
    first.join(10)
    assert granted
    issued = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert [(e.token, e.while_valid, e.concurrent_with) for e in issued] == [
        ("T1", (), ()),
        ("T2", ("T1",), ("T1",)),
    ]
