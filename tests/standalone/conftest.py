"""Fixtures of the standalone-server tests: one signing key file for every server."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def key_file(tmp_path_factory: pytest.TempPathFactory, default_key_pem: bytes) -> Path:
    """The session's 4096-bit key as a ``--key-file``: servers skip the key generation."""
    path = tmp_path_factory.mktemp("standalone") / "signing-key.pem"
    path.write_bytes(default_key_pem)
    return path
