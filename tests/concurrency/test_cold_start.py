"""Issue 14, cold start: the signing key is generated in the background as soon as
collection shows a test that uses the plugin, once for all xdist workers. (When
collection meets a module that names the fixtures: tests/plugin/test_early_key.py.)"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest

from pytest_mgmtauth._fake import key_cache as _keystore
from pytest_mgmtauth._fake.session import SessionPool, file_lock
from pytest_mgmtauth._service.tokens import generate_private_key_pem
from pytest_mgmtauth.plugin import _KEY_CACHE_DIR, _KEY_CACHE_FILE

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pytest_mgmtauth._service.tokens import TokenSigner

#: One small key for all tests here (the size is beside the point).
_PEM = generate_private_key_pem(2048)


@pytest.fixture
def generations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Key generation made cheap and recorded: the names of the threads that generated."""
    made: list[str] = []
    lock = threading.Lock()

    def generate() -> bytes:
        with lock:
            made.append(threading.current_thread().name)
        return _PEM

    monkeypatch.setattr(_keystore, "generate_private_key_pem", generate)
    return made


def _file_cache(path: Path) -> _keystore.KeyCache:
    def read() -> bytes | None:
        try:
            return path.read_bytes()
        except OSError:
            return None

    return read, lambda pem: _keystore.write_private_file(path, pem)


def _locked_pool(directory: Path) -> SessionPool:
    """A pool keeping its key in ``directory``, under the lock file there that xdist
    workers share (flock locks per open file: pools in one process contend as
    processes do)."""
    key, lock = directory / "signing-key.pem", directory / "key.lock"
    return SessionPool(_file_cache(key), key_lock=lambda on_wait: file_lock(lock, on_wait))


def test_prepare_signing_key_generates_in_a_background_thread(generations: list[str]) -> None:
    pool = SessionPool()
    pool.prepare_signing_key()
    pool.prepare_signing_key()  # started once
    assert pool.signing_key.wait(10)  # made before it is asked for: no second generation races it
    signer = pool.signer
    token, claims = signer.issue("someone@example.com", 1_800_000_000, 60)
    assert signer.verify(token) == claims
    assert generations == ["mgmtauth-keygen-first"]


def test_an_error_while_preparing_is_raised_where_the_key_is_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> bytes:
        raise RuntimeError("no entropy today")

    monkeypatch.setattr(_keystore, "generate_private_key_pem", broken)
    pool = SessionPool()
    pool.prepare_signing_key()
    with pytest.raises(RuntimeError, match="no entropy today"):
        pool.signer  # noqa: B018


def test_pools_sharing_a_locked_cache_generate_one_key(
    tmp_path: Path, generations: list[str]
) -> None:
    # As xdist workers on a cold cache: the first generates under the lock, the others
    # wait and read its key.
    key = tmp_path / "signing-key.pem"
    pools = [_locked_pool(tmp_path) for _ in range(4)]
    for pool in pools:
        pool.prepare_signing_key()
    for pool in pools:
        assert pool.signer is not None
    # One pool generated under the lock (its own caller may have raced it: see below).
    assert generations.count("mgmtauth-keygen-first") == 1
    assert key.read_bytes() == _PEM


_OTHER_PEM = generate_private_key_pem(2048)


@pytest.fixture
def first_generation_held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldGeneration]:
    """Key generation made cheap: the first generation (mgmtauth-keygen-first)
    makes _PEM but is held until the test releases it; any other (the race) makes
    _OTHER_PEM at once, or raises if the test says so."""
    held = HeldGeneration()

    def generate() -> bytes:
        name = threading.current_thread().name
        held.generations.append(name)
        if name == "mgmtauth-keygen-first":
            held.entered.set()
            assert held.release.wait(10), "the test never released the first generation"
            return _PEM
        if held.race_error is not None:
            raise held.race_error
        return _OTHER_PEM

    monkeypatch.setattr(_keystore, "generate_private_key_pem", generate)
    yield held
    held.release.set()  # never leave a thread waiting


class HeldGeneration:
    def __init__(self) -> None:
        self.generations: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.race_error: BaseException | None = None


def _ask_for_signer(pool: SessionPool) -> tuple[list[TokenSigner], threading.Thread]:
    """Ask for the pool's signer in a thread of its own, which waits for the key: the
    list gets the signer once the thread has it."""
    signers: list[TokenSigner] = []
    waiter = threading.Thread(target=lambda: signers.append(pool.signer))
    waiter.start()
    return signers, waiter


def _public_n(pem: bytes) -> int:
    from pytest_mgmtauth._service.tokens import load_private_key

    return load_private_key(pem).public_key().public_numbers().n


def test_a_caller_waiting_for_a_key_being_generated_races_a_second_generation(
    tmp_path: Path, first_generation_held: HeldGeneration
) -> None:
    key = tmp_path / "signing-key.pem"
    pool = SessionPool(_file_cache(key))
    pool.prepare_signing_key()
    assert first_generation_held.entered.wait(10)
    # The first generation is still going: the caller starts a second one and takes
    # whichever ends first, here the second. It is the key used and the key cached.
    signer = pool.signer
    assert signer._public_key.public_numbers().n == _public_n(_OTHER_PEM)
    assert key.read_bytes() == _OTHER_PEM
    assert first_generation_held.generations == [
        "mgmtauth-keygen-first",
        "mgmtauth-keygen-race",
    ]
    # The first generation ends later: its key is dropped, the cache keeps the winner.
    first_generation_held.release.set()
    thread = pool.signing_key._first
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive()
    assert key.read_bytes() == _OTHER_PEM
    assert pool.signing_key.pem() == _OTHER_PEM


def test_a_racing_generation_that_fails_leaves_the_first_one_standing(
    tmp_path: Path, first_generation_held: HeldGeneration
) -> None:
    key = tmp_path / "signing-key.pem"
    first_generation_held.race_error = RuntimeError("the race broke")
    pool = SessionPool(_file_cache(key))
    pool.prepare_signing_key()
    assert first_generation_held.entered.wait(10)
    signers, waiter = _ask_for_signer(pool)
    # The race has failed once it is recorded and the waiter still waits.
    deadline = time.monotonic() + 10
    while len(first_generation_held.generations) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    racer = pool.signing_key._racer
    assert racer is not None
    racer.join(10)
    assert not racer.is_alive()
    assert not signers  # still waiting for the first generation
    first_generation_held.release.set()
    waiter.join(10)
    assert len(signers) == 1
    assert signers[0]._public_key.public_numbers().n == _public_n(_PEM)
    assert key.read_bytes() == _PEM


def test_the_lock_is_released_once_a_key_is_cached_not_when_the_first_generation_ends(
    tmp_path: Path, first_generation_held: HeldGeneration
) -> None:
    # As two xdist workers on a cold cache: the one holding the lock races its first
    # generation and wins; the other, waiting for the lock, reads that key at once
    # instead of waiting for the first generation (still running here) to end.
    generating = _locked_pool(tmp_path)
    generating.prepare_signing_key()
    assert first_generation_held.entered.wait(10)
    waiting = _locked_pool(tmp_path)
    waiting.prepare_signing_key()
    assert not waiting.signing_key.wait(0.2)  # no key cached yet: it waits for the lock
    assert generating.signing_key.pem() == _OTHER_PEM  # the race won
    assert waiting.signing_key.wait(5), "the second pool still waits for the lock"
    assert waiting.signing_key.pem() == _OTHER_PEM
    first = generating.signing_key._first
    assert first is not None
    assert first.is_alive()  # the first generation still runs
    assert first_generation_held.generations == ["mgmtauth-keygen-first", "mgmtauth-keygen-race"]


def test_a_caller_waiting_for_another_process_s_key_does_not_race(
    tmp_path: Path, first_generation_held: HeldGeneration
) -> None:
    # Waiting for the lock is not generating: the xdist worker that holds it generates,
    # and the others read its key (racing would make each worker its own).
    key = tmp_path / "signing-key.pem"
    pool = _locked_pool(tmp_path)
    with file_lock(tmp_path / "key.lock"):  # another process generating
        pool.prepare_signing_key()
        signers, waiter = _ask_for_signer(pool)
        waiter.join(0.2)  # waiting
        assert not signers
        _keystore.write_private_file(key, _OTHER_PEM)
    waiter.join(10)
    assert len(signers) == 1
    assert signers[0]._public_key.public_numbers().n == _public_n(_OTHER_PEM)
    assert first_generation_held.generations == []


def test_prepare_returns_once_the_generation_has_begun(
    monkeypatch: pytest.MonkeyPatch, first_generation_held: HeldGeneration
) -> None:
    # The hand-over: left to compete with collection for the GIL, the key's thread
    # began generating ~60 ms after prepare() on a cold run. A slow cache read stands
    # for that here: without the hand-over prepare() returns before the generation.
    monkeypatch.setattr(_keystore, "PREPARE_HANDOVER_WAIT", 10.0)

    def slow_read() -> bytes | None:
        time.sleep(0.05)
        return None

    pool = SessionPool((slow_read, lambda pem: None))
    pool.prepare_signing_key()
    assert first_generation_held.entered.is_set()
    first_generation_held.release.set()
    assert pool.signing_key.wait(10)  # asked for before it was made, a second one would race
    assert pool.signing_key.pem() == _PEM


def test_the_lock_file_tells_only_a_caller_that_must_wait(tmp_path: Path) -> None:
    waits: list[str] = []
    with file_lock(tmp_path / "key.lock", lambda: waits.append("free")):
        pass
    held = threading.Event()
    release = threading.Event()

    def other_process() -> None:  # flock locks per open file: as another process would
        with file_lock(tmp_path / "key.lock"):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=other_process)
    holder.start()
    assert held.wait(10)
    threading.Timer(0.05, release.set).start()
    with file_lock(tmp_path / "key.lock", lambda: waits.append("held")):
        assert release.is_set()
    holder.join(10)
    assert waits == ["held"]


def test_prepare_does_not_wait_for_another_process_s_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_generation_held: HeldGeneration
) -> None:
    # An xdist worker whose lock is held by another one has nothing to hand over: its
    # thread waits for the lock without the GIL, and prepare() returns (were it to wait
    # out PREPARE_HANDOVER_WAIT, the hand-over would not be marked done here).
    monkeypatch.setattr(_keystore, "PREPARE_HANDOVER_WAIT", 10.0)
    pool = _locked_pool(tmp_path)
    with file_lock(tmp_path / "key.lock"):  # another process generating
        pool.prepare_signing_key()
        assert pool.signing_key._underway.is_set()
        assert not pool.signing_key.wait(0)  # still waiting for the other process
        _keystore.write_private_file(tmp_path / "signing-key.pem", _OTHER_PEM)
    assert pool.signing_key.pem() == _OTHER_PEM
    assert first_generation_held.generations == []


@pytest.mark.parametrize(
    ("refused", "generated_in"),
    [
        pytest.param({"mgmtauth-keygen"}, "mgmtauth-keygen-first", id="no-background-thread"),
        pytest.param(
            {"mgmtauth-keygen", "mgmtauth-keygen-first", "mgmtauth-keygen-race"},
            "MainThread",
            id="no-thread-at-all",
        ),
    ],
)
def test_no_thread_to_be_had_makes_the_key_where_it_is_needed(
    tmp_path: Path,
    generations: list[str],
    refused_threads: set[str],
    refused: set[str],
    generated_in: str,
) -> None:
    # At the process's thread limit, starting the key at collection must not fail the
    # run, and the test that needs the key gets it, made in its own thread if need be.
    refused_threads.update(refused)
    pool = _locked_pool(tmp_path)
    pool.prepare_signing_key()
    assert not pool.signing_key.started
    signer = pool.signer
    token, claims = signer.issue("someone@example.com", 1_800_000_000, 60)
    assert signer.verify(token) == claims
    assert generations == [generated_in]
    assert (tmp_path / "signing-key.pem").read_bytes() == _PEM


def test_no_thread_for_the_race_leaves_the_first_generation_to_finish(
    tmp_path: Path, first_generation_held: HeldGeneration, refused_threads: set[str]
) -> None:
    refused_threads.add("mgmtauth-keygen-race")
    key = tmp_path / "signing-key.pem"
    pool = SessionPool(_file_cache(key))
    pool.prepare_signing_key()
    assert first_generation_held.entered.wait(10)
    signers, waiter = _ask_for_signer(pool)
    waiter.join(0.2)
    assert not signers  # waiting for the first generation: no race could start
    first_generation_held.release.set()
    waiter.join(10)
    assert len(signers) == 1
    assert signers[0]._public_key.public_numbers().n == _public_n(_PEM)
    assert first_generation_held.generations == ["mgmtauth-keygen-first"]


_CONFTEST = """
def pytest_collection_finish(session):
    from pytest_mgmtauth.plugin import _KEY
    key = session.config.stash.get(_KEY, None)
    started = key is not None and key.started
    print(f"KEYGEN-STARTED={started}")
"""


def test_collection_starts_the_key_when_a_test_uses_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(
        test_uses="""
        def test_one(mgmt_server):
            assert mgmt_server.add_account().username
        """
    )
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*KEYGEN-STARTED=True*"])


def test_a_run_that_uses_no_plugin_fixture_starts_no_key(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_CONFTEST)
    # The fixture reaches the test through a plugin module that collection never reads,
    # so only the fallback at the end of collection could start the key. (A test module
    # that names mgmt_server starts it as collection meets it, deselected or not: see
    # tests/plugin/test_early_key.py.)
    pytester.makepyfile(
        server_plugin="""
        import pytest

        @pytest.fixture
        def server(mgmt_server):
            return mgmt_server
        """,
        test_plain="""
        def test_one():
            pass

        def test_two(server):
            pass
        """,
    )
    # The test that would need it is deselected: no key, no thread.
    result = pytester.runpytest_subprocess(
        "-s", "-p", "no:randomly", "-p", "server_plugin", "-k", "test_one"
    )
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*KEYGEN-STARTED=False*"])
    assert not (pytester.path / ".pytest_cache" / "d" / _KEY_CACHE_DIR / _KEY_CACHE_FILE).exists()


def test_xdist_workers_on_a_cold_cache_share_one_key(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_workers="""
        import hashlib
        import pytest

        @pytest.mark.parametrize("n", range(4))
        def test_one(_mgmtauth_pool, n, worker_id):
            numbers = _mgmtauth_pool.signer._public_key.public_numbers()
            digest = hashlib.sha256(str(numbers.n).encode()).hexdigest()
            with open(f"key-{worker_id}-{n}.txt", "w") as f:
                f.write(digest)
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    digests = {p.read_text() for p in pytester.path.glob("key-*.txt")}
    workers = {p.name.split("-")[1] for p in pytester.path.glob("key-*.txt")}
    assert workers == {"gw0", "gw1"}
    assert len(digests) == 1  # one key, generated once, read by the other worker
