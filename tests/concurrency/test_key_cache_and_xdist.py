"""The signing-key cache and xdist: workers race on one cache entry, each runs its own
server with its own state."""

from __future__ import annotations

import json
import os
import stat
import threading
from typing import TYPE_CHECKING

import pytest

from pytest_mgmtauth._fake import key_cache as _keystore
from pytest_mgmtauth._fake.session import SessionPool
from pytest_mgmtauth._service.tokens import generate_private_key_pem, load_private_key
from pytest_mgmtauth.plugin import (
    _KEY_CACHE_DIR,
    _KEY_CACHE_FILE,
    _OLD_KEY_CACHE_ENTRY,
    _key_cache,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


@pytest.fixture
def small_keys(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Key generation made cheap (2048 bits) and recorded: these tests race writers, the
    key size is beside the point."""
    made: list[bytes] = []
    lock = threading.Lock()

    def generate() -> bytes:
        pem = generate_private_key_pem(2048)
        with lock:
            made.append(pem)
        return pem

    monkeypatch.setattr(_keystore, "generate_private_key_pem", generate)
    return made


def test_racing_pools_on_an_empty_cache_all_get_a_working_key(
    pytester: pytest.Pytester, small_keys: list[bytes], in_threads: Callable[..., None]
) -> None:
    config = pytester.parseconfigure()
    cache = _key_cache(config)
    assert cache is not None
    pools = [SessionPool(cache) for _ in range(6)]
    start = threading.Barrier(len(pools))
    signers = {}

    def sign_with(index: int, pool: SessionPool) -> None:
        start.wait()
        signers[index] = pool.signer

    in_threads(sign_with, pools, what="six pools reading and writing one key cache")

    assert len(signers) == len(pools)
    for signer in signers.values():
        token, claims = signer.issue("someone@example.com", 1_800_000_000, 60)
        assert signer.verify(token) == claims
    stored = cache[0]()
    assert stored in small_keys  # the entry holds one whole key that some pool made
    load_private_key(stored)


def test_readers_never_see_a_torn_key_while_writers_race(
    pytester: pytest.Pytester, within: Callable[..., Any]
) -> None:
    """pytest's cache writes are not atomic; a reader may find nothing, never half a key
    that would be taken for a key (the pool validates what it reads)."""
    config = pytester.parseconfigure()
    cache = _key_cache(config)
    assert cache is not None
    read, write = cache
    keys = [generate_private_key_pem(2048) for _ in range(3)]
    seen: list[bytes | None] = []
    stop = threading.Event()

    def writer(pem: bytes) -> None:
        for _ in range(50):
            write(pem)

    def reader() -> None:
        while not stop.is_set():
            seen.append(read())

    def race() -> None:
        readers = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
        writers = [threading.Thread(target=writer, args=(k,), daemon=True) for k in keys]
        for thread in readers + writers:
            thread.start()
        for thread in writers:
            thread.join()
        stop.set()
        for thread in readers:
            thread.join()

    within(race, what="cache writers and readers")

    assert seen
    assert all(value is None or value in keys for value in seen)
    # What a pool does with whatever it read: a whole key, or a fresh one.
    pool = SessionPool((lambda: b"-----BEGIN PRIVATE KEY-----\nMIIE", write))
    assert pool.signing_key.pem() != b"-----BEGIN PRIVATE KEY-----\nMIIE"


def test_under_xdist_each_worker_has_its_own_server_and_state(
    pytester: pytest.Pytester, seed_key: Callable[[pytest.Pytester], None]
) -> None:
    seed_key(pytester)  # the race on an empty cache is the tests above; this one is fast
    pytester.makepyfile(
        test_workers="""
        import json, os
        import pytest, requests

        @pytest.mark.parametrize("n", range(6))
        def test_one(mgmt_server, mgmt_account, n, worker_id):
            assert mgmt_server.events == []  # fresh state in every test
            reply = requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            )
            assert reply.status_code == 200
            assert mgmt_server.auth_count() == 1
            with open(f"seen-{worker_id}-{n}.json", "w") as f:
                json.dump({"worker": worker_id, "pid": os.getpid(), "url": mgmt_server.url}, f)
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=6)
    seen = [json.loads(p.read_text()) for p in pytester.path.glob("seen-*.json")]
    by_worker: dict[str, set[str]] = {}
    for entry in seen:
        by_worker.setdefault(entry["worker"], set()).add(entry["url"])
    assert set(by_worker) == {"gw0", "gw1"}
    assert all(len(urls) == 1 for urls in by_worker.values())  # one server per worker
    assert by_worker["gw0"] != by_worker["gw1"]  # and not the same one
    entry = pytester.path / ".pytest_cache" / "d" / _KEY_CACHE_DIR / _KEY_CACHE_FILE
    load_private_key(entry.read_bytes())


def test_the_cached_key_is_owner_only_from_its_first_byte(
    pytester: pytest.Pytester, small_keys: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was written by pytest's cache.set: 0644 (with the usual umask), readable by
    # every user of the machine. Now 0600 even under umask 0, with no window at 0644:
    # the file is complete and 0600 before it gets its name.
    config = pytester.parseconfigure()
    config.cache.set(_OLD_KEY_CACHE_ENTRY, generate_private_key_pem(2048).decode())
    cache = _key_cache(config)
    assert cache is not None
    modes_when_renamed = []
    real_replace = os.replace

    def replace(source: str, target: str) -> None:
        modes_when_renamed.append(stat.S_IMODE(os.stat(source).st_mode))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)  # the os that _keystore uses
    old_umask = os.umask(0)
    pool = SessionPool(cache)
    try:
        pool.signer  # noqa: B018
    finally:
        os.umask(old_umask)
    entry = pytester.path / ".pytest_cache" / "d" / _KEY_CACHE_DIR / _KEY_CACHE_FILE
    assert modes_when_renamed == [0o600]
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    # The key the pool signs with (a second generation may have raced the first and
    # still be running: only the first key made is written).
    assert entry.read_bytes() == pool.signing_key.pem()
    assert entry.read_bytes() in small_keys
    assert [p.name for p in entry.parent.iterdir()] == [_KEY_CACHE_FILE]  # no temp file
    # The copy an older version left world-readable is emptied.
    assert config.cache.get(_OLD_KEY_CACHE_ENTRY, "gone") is None


def test_an_ordinary_key_cached_by_an_earlier_version_is_used_as_it_is(
    pytester: pytest.Pytester, small_keys: list[bytes]
) -> None:
    # Versions before the key of two half-size keys cached an ordinary RSA key: it signs
    # as well, so it is kept, not replaced by a new one.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    ordinary = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = ordinary.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    config = pytester.parseconfigure()
    cache = _key_cache(config)
    assert cache is not None
    cache[1](pem)
    signer = SessionPool(cache).signer
    token, claims = signer.issue("someone@example.com", 1_800_000_000, 60)
    assert signer.verify(token) == claims
    assert signer._public_key.public_numbers() == ordinary.public_key().public_numbers()
    assert small_keys == []  # nothing generated
    assert cache[0]() == pem
