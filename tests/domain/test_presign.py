"""Tokens signed ahead of their request: the same tokens, only made earlier."""

from __future__ import annotations

import threading
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from pytest_mgmtauth._service import presign as _presign
from pytest_mgmtauth._service.clock import ManualClock
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.presign import MAX_CREDIT, MAX_PENDING, PROBE_EVERY, Presigner
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.threads import hand_over
from pytest_mgmtauth._service.tokens import ISSUER, TokenSigner

T0 = 1_800_000_000


def _blocked(presigner: Presigner[str]) -> threading.Event:
    """Occupy the presigner's thread until the returned event is set."""
    release = threading.Event()
    started = threading.Event()

    def wait() -> str:
        started.set()
        release.wait(10)
        return "blocker"

    presigner.anticipate("blocker", wait)
    assert started.wait(10)
    return release


def test_take_returns_what_was_made_in_the_background() -> None:
    presigner: Presigner[str] = Presigner()
    presigner.anticipate("k", lambda: threading.current_thread().name)
    assert presigner.take("k") == "mgmtauth-presign"
    assert (presigner.hits, presigner.misses) == (1, 0)
    assert presigner.take("k") is None  # each result is handed out once


def test_anticipate_returns_once_an_idle_thread_has_started_the_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The handover: without it the job would wait for the GIL while the caller runs
    # Python, and start only when the caller blocks (see _presign.py).
    monkeypatch.setattr(_presign, "HANDOVER_WAIT", 10.0)
    presigner: Presigner[str] = Presigner()
    release = threading.Event()
    presigner.anticipate("warm-up", lambda: "thread started")
    assert presigner.take("warm-up") == "thread started"
    presigner.anticipate("k", lambda: "made" if release.wait(10) else "timed out")
    future, _ = presigner._pending["k"]  # internal: what the handover guarantees
    assert future.running()
    release.set()
    assert presigner.take("k") == "made"


def test_the_handover_wait_ends_when_the_job_starts_or_at_its_limit() -> None:
    # Timed sleeps, not Event.wait (see _threads.hand_over): the caller still returns as
    # soon as the event is set, and never before its limit otherwise.
    started = threading.Event()
    threading.Timer(0.05, started.set).start()
    begun = time.monotonic()
    hand_over(started, 10.0)
    assert started.is_set()
    assert time.monotonic() - begun < 9.0
    never = threading.Event()
    begun = time.monotonic()
    hand_over(never, 0.05)
    assert time.monotonic() - begun >= 0.05
    assert not never.is_set()


def test_a_key_is_pending_from_its_anticipation_until_it_is_taken() -> None:
    presigner: Presigner[str] = Presigner()
    assert not presigner.is_pending("k")
    presigner.anticipate("k", lambda: "made")
    assert presigner.is_pending("k")
    assert presigner.take("k") == "made"
    assert not presigner.is_pending("k")


def test_take_of_a_key_never_anticipated_is_none() -> None:
    presigner: Presigner[str] = Presigner()
    presigner.anticipate("k", lambda: "made")
    assert presigner.take("other") is None
    assert presigner.take("k") == "made"


def test_a_queued_job_is_cancelled_rather_than_waited_for() -> None:
    presigner: Presigner[str] = Presigner()
    release = _blocked(presigner)
    ran: list[str] = []

    def make() -> str:
        ran.append("k")
        return "made"

    presigner.anticipate("k", make)
    # Not started (the thread is busy): the caller makes it itself, now.
    assert presigner.take("k") is None
    release.set()
    assert presigner.take("blocker") == "blocker"
    assert ran == []
    assert presigner.misses == 1


def test_a_failed_job_leaves_the_work_to_the_caller() -> None:
    presigner: Presigner[str] = Presigner()

    def fail() -> str:
        raise RuntimeError("no key")

    presigner.anticipate("k", fail)
    assert presigner.take("k") is None


def _anticipate(presigner: Presigner[int], key: int) -> threading.Event:
    """Anticipate ``key``; the event is set once its job has run."""
    ran = threading.Event()

    def make() -> int:
        ran.set()
        return key

    presigner.anticipate(key, make)
    return ran


def _take_within(presigner: Presigner[str], key: str, seconds: float) -> list[str | None]:
    """take(key) in a thread, so that a take that would wait forever fails the test."""
    taken: list[str | None] = []
    thread = threading.Thread(target=lambda: taken.append(presigner.take(key)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"take({key!r}) still waits after {seconds} s"
    return taken


def test_no_thread_to_be_had_leaves_the_work_to_the_caller(refused_threads: set[str]) -> None:
    # A process at its thread limit: Thread.start raises. Nothing is anticipated (the
    # caller signs), and a later anticipation, once a thread can start, works.
    refused_threads.add("mgmtauth-presign")
    presigner: Presigner[str] = Presigner()
    presigner.anticipate("k", lambda: "made")
    assert not presigner.is_pending("k")
    assert _take_within(presigner, "k", 5) == [None]
    refused_threads.clear()
    presigner.anticipate("k2", lambda: "made")
    assert _take_within(presigner, "k2", 5) == ["made"]


def test_the_oldest_unused_result_is_dropped_as_a_miss() -> None:
    presigner: Presigner[int] = Presigner()
    for key in range(MAX_PENDING + 1):
        assert _anticipate(presigner, key).wait(10)
    assert (presigner.hits, presigner.misses) == (0, 1)
    assert presigner.take(0) is None  # dropped
    assert presigner.take(MAX_PENDING) == MAX_PENDING
    assert (presigner.hits, presigner.misses) == (1, 1)


def test_misses_spend_credit_and_hits_earn_it_back() -> None:
    presigner: Presigner[int] = Presigner()
    # Beyond MAX_PENDING, each anticipation drops the oldest unused one: a miss each.
    for key in range(MAX_PENDING + MAX_CREDIT):
        assert _anticipate(presigner, key).wait(10)
    assert presigner.misses == MAX_CREDIT
    counters = (presigner.hits, presigner.misses)
    # Out of credit: skipped (nothing pending, so take() neither hits nor cancels)...
    key = 1000
    for key in range(1000, 1000 + PROBE_EVERY - 1):
        _anticipate(presigner, key)
        assert presigner.take(key) is None
    assert (presigner.hits, presigner.misses) == counters
    # ...but for one probe in PROBE_EVERY, whose hit gives credit back.
    assert _anticipate(presigner, key + 1).wait(10)
    assert presigner.take(key + 1) == key + 1
    assert _anticipate(presigner, key + 2).wait(10)
    assert presigner.take(key + 2) == key + 2
    assert presigner.hits == counters[0] + 2


def test_an_anticipated_token_is_the_token_issue_would_sign(
    rsa_key_2048: rsa.RSAPrivateKey,
) -> None:
    signer = TokenSigner(rsa_key_2048)
    signer.anticipate("a@example.com", T0, 1800)
    token, claims = signer.issue("a@example.com", T0, 1800)
    assert signer.presigner.hits == 1
    assert signer.verify(token) == claims
    decoded = jwt.decode(
        token,
        rsa_key_2048.public_key(),
        algorithms=["RS512"],
        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
    )
    assert decoded == {
        "sub": "a@example.com",
        "iss": ISSUER,
        "iat": T0,
        "nbf": T0,
        "exp": T0 + 1800,
        "jti": claims.jti,
    }


@pytest.mark.parametrize(
    ("subject", "issued_at", "ttl", "issuer"),
    [
        ("b@example.com", T0, 1800, None),
        ("a@example.com", T0 + 1, 1800, None),
        ("a@example.com", T0, 600, None),
        ("a@example.com", T0, 1800, "https://elsewhere.example"),
    ],
)
def test_a_token_for_other_claims_is_signed_on_demand(
    rsa_key_2048: rsa.RSAPrivateKey,
    subject: str,
    issued_at: int,
    ttl: int,
    issuer: str | None,
) -> None:
    signer = TokenSigner(rsa_key_2048)
    signer.anticipate("a@example.com", T0, 1800)
    token, claims = signer.issue(subject, issued_at, ttl, issuer=issuer)
    assert signer.presigner.hits == 0
    assert (claims.sub, claims.iat, claims.exp) == (subject, issued_at, issued_at + ttl)
    assert signer.verify(token, issuer=issuer) == claims


def test_an_account_gets_its_first_token_signed_ahead(
    rsa_key_2048: rsa.RSAPrivateKey,
) -> None:
    signer = TokenSigner(rsa_key_2048)
    clock = ManualClock(T0)
    service = AuthService(Options(), signer, clock)
    account = service.add_account()
    token, record = service.flow(V2Flow).grant(account.username, account.api_key)
    assert signer.presigner.hits == 1
    assert record.claims.iat == T0
    # A second token (a renewal, the clock moved) is signed when asked for.
    clock.advance(1800)
    later, renewed = service.flow(V2Flow).grant(account.username, account.api_key)
    assert signer.presigner.hits == 1
    assert renewed.claims.iat == T0 + 1800
    assert later != token
