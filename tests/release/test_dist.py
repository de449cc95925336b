"""The built distributions: what the sdist holds, and the wheel at work outside the checkout.

They need the sdist and the wheel of this commit in the folder named by
MGMTAUTH_DIST_DIR: ``nox -s release`` builds them there and runs these tests (CI does).
Without it they skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import pytest_mgmtauth

ROOT = Path(__file__).resolve().parents[2]
#: What the sdist must hold: everything tracked under these paths, so that the tests
#: and the examples run from it (distributions rebuild from the sdist and test it).
SDIST_HOLDS = (
    "pytest_mgmtauth",
    "tests",
    "docs",
    "benchmarks",
    "constraints",
    "CHANGELOG.md",
    "LICENSE",
    "README.md",
    "mkdocs.yml",
    "noxfile.py",
    "pyproject.toml",
)

#: A user's first test, with nothing but the plugin and the standard library.
FIRST_TEST = """
import json
import urllib.parse
import urllib.request


def test_my_client_authenticates_once(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([{"id": 7}])
    urls = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the fake is local
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}
    with urls.open(f"{mgmt_server.url}/v2/auth", urllib.parse.urlencode(form).encode()) as r:
        token = json.load(r)["token"]
    request = urllib.request.Request(
        f"{mgmt_server.url}/v2/devices", headers={"Authorization": f"Bearer {token}"}
    )
    with urls.open(request) as r:
        assert json.load(r) == [{"id": 7}]
    assert mgmt_server.auth_count(version="v2") == 1
"""


@pytest.fixture(scope="module")
def dist_dir() -> Path:
    where = os.environ.get("MGMTAUTH_DIST_DIR")
    if not where:
        pytest.skip("no built distributions: `nox -s release` builds them and runs this")
    return Path(where)


def _one(dist_dir: Path, pattern: str) -> Path:
    found = sorted(dist_dir.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {dist_dir}, found {found}"
    return found[0]


def test_the_sdist_holds_the_tests_the_docs_and_their_examples(dist_dir: Path) -> None:
    sdist = _one(dist_dir, f"pytest_mgmtauth-{pytest_mgmtauth.__version__}.tar.gz")
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        held = {name.removeprefix(f"{top}/") for name in archive.getnames() if name.startswith(top)}
    tracked = subprocess.run(
        ["git", "ls-files", "--", *SDIST_HOLDS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "docs/examples/test_quickstart.py" in tracked  # the list is the checkout's
    assert sorted(set(tracked) - held) == []


def test_the_wheel_installs_in_a_new_virtualenv_and_runs_a_users_first_test(
    dist_dir: Path, tmp_path: Path
) -> None:
    wheel = _one(dist_dir, f"pytest_mgmtauth-{pytest_mgmtauth.__version__}-py3-none-any.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # Only the wheel: its dependencies come from the index, as for a user.
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True)
    project = tmp_path / "project"
    assert not project.is_relative_to(ROOT), "the user's project must be outside the checkout"
    project.mkdir()
    project.joinpath("pytest.ini").write_text("[pytest]\n")  # its own rootdir and settings
    project.joinpath("test_first.py").write_text(FIRST_TEST)
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "VIRTUAL_ENV"}
    }

    def run(*args: str) -> str:
        done = subprocess.run(
            [str(python), *args], cwd=project, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    where = run("-c", "import pytest_mgmtauth; print(pytest_mgmtauth.__file__)")
    assert Path(where.strip()).is_relative_to(venv)
    assert run("-m", "pytest_mgmtauth", "--version").split() == [
        "mgmtauth-server",
        pytest_mgmtauth.__version__,
    ]
    out = run("-m", "pytest", "-p", "no:cacheprovider", "-W", "error", "-rA")
    assert "1 passed" in out
    assert f"mgmtauth-{pytest_mgmtauth.__version__}" in out  # pytest lists the plugin
