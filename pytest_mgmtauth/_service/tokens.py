"""Signing this fake's bearer tokens: RS512 JWTs (v2, v3; the developer portal's access
tokens RS256) signed with one RSA key per test session, a new account's first one signed
ahead. Their format and the checks of a presented one are ``token_format.py``.

Key objects are loaded once and reused: handing PyJWT a PEM re-validates the RSA key on
every call (tens of milliseconds), a key object does not.

PyJWT and cryptography are imported on first use, not with the plugin: a suite that
installs the plugin but never uses it should not pay for them.
"""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .accounts import random_hex
from .token_format import ALGORITHM, DEFAULT_SOURCE, HEADERS, ISSUER, Claims, verify_token

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cryptography.hazmat.primitives.asymmetric import rsa

#: 4096-bit keys make tokens about as long as the real service's (over 800 characters);
#: some old clients refuse shorter ones.
KEY_BITS = 4096
#: Tokens signed ahead and not taken yet, at most; the oldest beyond it is dropped.
MAX_AHEAD = 4
#: The credit a new signer starts with, and its ceiling: a token signed ahead and never
#: taken spends one, one taken earns one back.
MAX_CREDIT = 8
#: Without credit, one prefetch in this many still signs ahead, to notice a suite that
#: started taking what is signed ahead.
PROBE_EVERY = 32


def _segment(value: dict[str, Any]) -> bytes:
    """A JSON object as a JWS segment: compact JSON, base64url without padding."""
    raw = json.dumps(value, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=")


#: The header of the tokens of each algorithm, in the order of the published tokens
#: (``token_format.HEADERS``; PyJWT would sort the keys).
_HEADER_SEGMENTS = {alg: _segment(header) for alg, header in HEADERS.items()}


@dataclass(frozen=True)
class _Job:
    """A token to sign ahead: its future, its signing input and claims."""

    future: Future[tuple[str, Claims]]
    unsigned: bytes
    claims: Claims


class TokenSigner:
    """Issues and verifies this fake's tokens. Thread-safe.

    :meth:`prefetch` signs a token in a background thread before :meth:`issue` is asked
    for it (a new account's first token; the next test's first one, as a test ends):
    the signature is most of the cost of ``/v2/auth``, and ``cryptography`` releases the
    GIL while it signs. :meth:`issue` returns the token signed ahead when its arguments
    are exactly the prefetched ones, else signs one; either way the client gets the same
    kind of token. Tokens signed ahead and never taken cost CPU on another core, which a
    parallel run (xdist) needs: each one dropped unused spends credit, each one taken
    earns it back, and without credit only one prefetch in :data:`PROBE_EVERY` signs.
    """

    def __init__(
        self,
        private_key: rsa.RSAPrivateKey,
        issuer: str = ISSUER,
    ) -> None:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        self._private_key = private_key
        self._public_key = private_key.public_key()
        self._padding = padding.PKCS1v15()
        self._hashes = {"RS512": hashes.SHA512(), "RS256": hashes.SHA256()}
        self.issuer = issuer
        #: Guards the fields below.
        self._ahead_lock = threading.Lock()
        #: Tokens signed (or being signed) ahead, oldest first, by
        #: (subject, issued_at, ttl, issuer).
        self._ahead: dict[tuple[str, int, int, str], Future[tuple[str, Claims]]] = {}
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        #: Jobs put and not finished.
        self._pending = 0
        self._worker: threading.Thread | None = None
        self._credit = MAX_CREDIT
        self._skipped = 0
        #: Tokens signed ahead that :meth:`issue` returned, and that were dropped unused.
        self.hits = 0
        self.misses = 0

    def issue(
        self, subject: str, issued_at: int, ttl: int, *, issuer: str | None = None
    ) -> tuple[str, Claims]:
        """A new token for ``subject``: the one :meth:`prefetch` signed for exactly these
        arguments if there is one, else one signed now, in the caller."""
        iss = self.issuer if issuer is None else issuer
        ahead = self._take((subject, issued_at, ttl, iss))
        if ahead is not None:
            return ahead
        unsigned, claims = self._unsigned(subject, issued_at, ttl, iss)
        return self._signed(unsigned), claims

    def issue_with(
        self,
        subject: str,
        issued_at: int,
        ttl: int,
        extra: Mapping[str, object],
        *,
        issuer: str | None = None,
        algorithm: str = ALGORITHM,
    ) -> tuple[str, Claims]:
        """A new token for ``subject`` with ``extra`` claims after the standard ones
        (OAuth's ``scope`` and ``client_id``), signed now with ``algorithm``."""
        iss = self.issuer if issuer is None else issuer
        unsigned, claims = self._unsigned(subject, issued_at, ttl, iss, extra, algorithm)
        return self._signed(unsigned, algorithm), claims

    def prefetch(
        self, subject: str, issued_at: int, ttl: int, *, issuer: str | None = None
    ) -> Future[tuple[str, Claims]] | None:
        """Start signing, in the background, the token a later :meth:`issue` with the
        same arguments returns: the future of that token, or None when nothing is
        signed ahead (it is already, there is no credit but for a probe, or no thread
        can be had: the process is at its thread limit)."""
        iss = self.issuer if issuer is None else issuer
        key = (subject, issued_at, ttl, iss)
        with self._ahead_lock:
            if key in self._ahead:
                return None
            if self._credit <= 0:
                self._skipped += 1
                if self._skipped % PROBE_EVERY:
                    return None
            if not self._worker_running():
                return None
            while len(self._ahead) >= MAX_AHEAD:
                dropped = self._ahead.pop(next(iter(self._ahead)))
                if not dropped.cancel():  # signed, or being signed: spent for nothing
                    self._missed()
            unsigned, claims = self._unsigned(subject, issued_at, ttl, iss)
            future: Future[tuple[str, Claims]] = Future()
            self._ahead[key] = future
            idle = self._pending == 0
            self._pending += 1
            self._jobs.put(_Job(future, unsigned, claims))
        if idle:
            # Let go of the GIL once, so that the idle worker takes the job now rather
            # than when this thread next blocks. Not by waiting for an event the worker
            # sets: the kernel often runs a waiter woken so on the worker's CPU, behind
            # the signature the worker has just started.
            time.sleep(0)
        return future

    def _take(self, key: tuple[str, int, int, str]) -> tuple[str, Claims] | None:
        """The token signed ahead for ``key``, waiting for it if it is being signed; None
        if there is none, or its signing has not started (signing here is as quick as
        waiting for it), or it failed (the caller signs again and sees the error)."""
        with self._ahead_lock:
            future = self._ahead.pop(key, None)
            if future is None or future.cancel():
                return None
            self.hits += 1
            self._credit = min(MAX_CREDIT, self._credit + 1)
        try:
            return future.result()
        except Exception:
            return None

    def _missed(self) -> None:
        self.misses += 1
        self._credit = max(0, self._credit - 1)

    def _worker_running(self) -> bool:
        """Start the thread that signs ahead if it is not running; whether it is. Called
        with ``_ahead_lock`` held."""
        if self._worker is None:
            worker = threading.Thread(target=self._work, name="mgmtauth-presign", daemon=True)
            try:
                worker.start()
            except RuntimeError:  # no thread to be had: a later prefetch tries again
                return False
            self._worker = worker
        return True

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result((self._signed(job.unsigned), job.claims))
                    except BaseException as exc:  # handed to _take(), whose caller signs again
                        job.future.set_exception(exc)
            finally:
                with self._ahead_lock:
                    self._pending -= 1

    @staticmethod
    def _unsigned(
        subject: str,
        issued_at: int,
        ttl: int,
        issuer: str,
        extra: Mapping[str, object] | None = None,
        algorithm: str = ALGORITHM,
    ) -> tuple[bytes, Claims]:
        """The JWS signing input (``header.payload``, base64url) and the claims."""
        claims = Claims(
            sub=subject,
            iat=issued_at,
            nbf=issued_at,
            exp=issued_at + ttl,
            jti=random_hex(8),
        )
        # The published order: sub, iss, then the claims' own (iat, nbf, exp, jti).
        payload: dict[str, object] = {"sub": subject, "iss": issuer, **vars(claims)}
        if extra:
            payload.update({k: v for k, v in extra.items() if k not in payload})
        return _HEADER_SEGMENTS[algorithm] + b"." + _segment(payload), claims

    def _signed(self, unsigned: bytes, algorithm: str = ALGORITHM) -> str:
        """The compact JWS: ``unsigned`` and its ``algorithm`` signature. Written here
        rather than by ``jwt.encode`` (the same bytes but for the order of the header's
        keys, which PyJWT sorts; tests/tokens/test_tokens.py compares) so that the
        signing input can be made before the signature, in another thread."""
        signature = self._private_key.sign(unsigned, self._padding, self._hashes[algorithm])
        return (unsigned + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()

    def verify(
        self,
        token: str,
        *,
        issuer: str | None = None,
        algorithm: str = ALGORITHM,
        source: str = DEFAULT_SOURCE,
    ) -> Claims:
        """The claims of a token this fake signed with ``algorithm`` (``issuer``: the one
        it must name, by default this signer's); raises
        :class:`~.token_format.TokenProblem` saying why it is not one, and that the
        client should send ``source`` (where the flow's tokens come from)."""
        iss = self.issuer if issuer is None else issuer
        return verify_token(token, self._public_key, iss, algorithm, source=source)
