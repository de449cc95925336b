"""What a live run reads as a refusal of its credentials in an answer of an
authentication endpoint (then it stops): any 401, and a refusal's code whatever the
answer's content type (no HTTP here)."""

from __future__ import annotations

import pytest

from pytest_mgmtauth._http.forward import refused_credentials

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("status", "body", "found"),
    [
        (401, b'{"returnCode": 1401, "message": "x"}', "1401 (401) at POST /v2/auth"),
        (403, b'{"returnCode": 1402, "message": "x"}', "1402 (403) at POST /v2/auth"),
        (401, b'{"error": "invalid_client"}', "invalid_client (401) at POST /v2/auth"),
        (401, b"<html><h1>401 Authorization Required</h1></html>", "401 at POST /v2/auth"),
        (401, b"\xff\xfe not text", "401 at POST /v2/auth"),
        (401, b"", "401 at POST /v2/auth"),
        (200, b"<p>returnCode: 1402</p>", "1402 (200) at POST /v2/auth"),
        (200, b'{"token": "x", "returnCode": 0}', None),
        (400, b'{"error": "invalid_scope"}', None),
        (429, b"<html>Too Many Requests</html>", None),
        (200, DEEP, None),
    ],
)
def test_a_refusal_in_any_shape(status: int, body: bytes, found: str | None) -> None:
    assert refused_credentials("POST /v2/auth", status, body) == found
