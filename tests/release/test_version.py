"""The package's version is the release the CHANGELOG describes at its top."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest_mgmtauth

ROOT = Path(__file__).resolve().parents[2]
#: A release heading of Keep a Changelog: ``## [0.2.0] - 2026-11-30`` (or ``- Unreleased``
#: while it is being written); ``## [Unreleased]`` alone names no version and is skipped.
RELEASE_HEADING = re.compile(r"^## \[(\d+\.\d+\.\d+)\]", re.MULTILINE)


def test_the_version_is_the_changelogs_top_release() -> None:
    match = RELEASE_HEADING.search((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    assert match is not None, "CHANGELOG.md has no release heading '## [X.Y.Z]'"
    assert pytest_mgmtauth.__version__ == match.group(1)


def test_the_installed_metadata_has_the_same_version() -> None:
    # A stale install (an old egg-info, a wheel of an earlier commit) would test old code.
    assert version("pytest-mgmtauth") == pytest_mgmtauth.__version__
