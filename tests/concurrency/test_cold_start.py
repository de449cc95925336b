"""Issue 14, cold start: the signing key is generated in the background as soon as
collection shows a test that uses the plugin, once for all xdist workers. (When
collection meets a module that names the fixtures: tests/plugin/test_early_key.py.)"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from pytest_mgmtauth import _keystore
from pytest_mgmtauth._domain._tokens import generate_private_key_pem
from pytest_mgmtauth._pool import SessionPool, file_lock
from pytest_mgmtauth.plugin import _KEY_CACHE_DIR, _KEY_CACHE_FILE

if TYPE_CHECKING:
    from pathlib import Path

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


def test_prepare_signing_key_generates_in_a_background_thread(generations: list[str]) -> None:
    pool = SessionPool()
    pool.prepare_signing_key()
    pool.prepare_signing_key()  # started once
    signer = pool.signer
    token, claims = signer.issue("someone@example.com", 1_800_000_000, 60)
    assert signer.verify(token) == claims
    assert generations == ["mgmtauth-keygen"]


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
    # wait and read its key. flock locks per open file, so threads contend as processes.
    key = tmp_path / "signing-key.pem"
    pools = [
        SessionPool(_file_cache(key), key_lock=lambda: file_lock(tmp_path / "key.lock"))
        for _ in range(4)
    ]
    for pool in pools:
        pool.prepare_signing_key()
    for pool in pools:
        assert pool.signer is not None
    assert len(generations) == 1
    assert key.read_bytes() == _PEM


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
