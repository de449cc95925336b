"""The session's RS512 signing key: an ordinary RSA-4096 key, kept across runs.

:class:`SigningKey` makes it once, in one background thread: :func:`cached_key` reads it
from a file (pytest's cache) and checks it, or generates a new one and writes it there.
Under xdist each worker does this itself: on a cold cache each may generate a key, and
the last one written stays (the write replaces the file whole).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
import warnings
from typing import TYPE_CHECKING

from .._service.tokens import KEY_BITS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cryptography.hazmat.primitives.asymmetric import rsa

#: The name of the key's file in its directory. Versions before 0.2 kept a key made
#: differently under another name, which is never read.
KEY_FILE = "rsa4096.pem"
#: A key and what went wrong on the way to it (each a sentence for a warning).
KeyOutcome = tuple["rsa.RSAPrivateKey", list[str]]
#: The most a key file may hold: a PEM of a 16384-bit RSA key is about 13 KB.
MAX_KEY_FILE = 64 * 1024
_PUBLIC_EXPONENT = 65537
_CHECKED_MESSAGE = b"pytest-mgmtauth signing key check"


class KeyProblem(ValueError):
    """The bytes are not a signing key this fake can use; ``str()`` says why."""


def import_cryptography() -> None:
    """Import what making, checking and using the key needs, in the caller's thread.

    Not in the thread that makes the key: a test using ``pytester`` restores
    ``sys.modules`` after it, dropping every module first imported while it ran, in any
    thread. Imported again later, ``hashes`` has new classes, which the key's backend
    (bound to the first ones) refuses: every later grant of the run was a 500
    (``TypeError: Expected instance of hashes.HashAlgorithm``). The caller is the plugin
    at the end of collection, before any test runs."""
    import cryptography.exceptions
    import cryptography.hazmat.primitives.asymmetric.padding
    import cryptography.hazmat.primitives.asymmetric.rsa
    import cryptography.hazmat.primitives.hashes
    import cryptography.hazmat.primitives.serialization  # noqa: F401

    _sign_one_certificate()


def _sign_one_certificate() -> None:
    """Sign a throwaway certificate now, with the clock not frozen.

    cryptography learns which class a certificate's datetimes must be (``datetime.
    datetime`` as the module says) the first time it signs one, and keeps it for the
    process. Were that first certificate the test CA made during a test on
    ``mgmt_clock`` (freezegun's ``FakeDatetime`` then), every certificate made later
    with the clock running would fail ("'datetime' object is not an instance of
    'FakeDatetime'"). Learned now, it is the real class, of which FakeDatetime is a
    subclass: both pass."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pytest-mgmtauth")])
    (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(datetime.datetime(2000, 1, 1))
        .not_valid_after(datetime.datetime(2001, 1, 1))
        .sign(key, hashes.SHA256())
    )


def new_key() -> rsa.RSAPrivateKey:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=_PUBLIC_EXPONENT, key_size=KEY_BITS)


def key_pem(key: rsa.RSAPrivateKey) -> bytes:
    """The key as unencrypted PKCS#8 PEM."""
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_key(pem: bytes, bits: int | None = KEY_BITS) -> rsa.RSAPrivateKey:
    """The RSA key of ``pem`` if it is ``bits`` bits (None: any size) and its signature
    verifies with its public key; :class:`KeyProblem` otherwise.

    The check is what signing tokens needs: the size, and one signature made and
    verified. cryptography's own check of the key's numbers is skipped: for 4096 bits it
    costs as much as generating a key, at every run.
    """
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    try:
        key = serialization.load_pem_private_key(
            pem, password=None, unsafe_skip_rsa_key_validation=True
        )
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise KeyProblem("is not an unencrypted PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise KeyProblem("is not an RSA key")
    if bits is not None and key.key_size != bits:
        raise KeyProblem(f"is a {key.key_size}-bit RSA key, not {bits} bits")
    try:
        signature = key.sign(_CHECKED_MESSAGE, padding.PKCS1v15(), hashes.SHA512())
        key.public_key().verify(signature, _CHECKED_MESSAGE, padding.PKCS1v15(), hashes.SHA512())
    except (ValueError, InvalidSignature):
        raise KeyProblem(
            "does not sign: its signature does not verify with its public key"
        ) from None
    return key


_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_key_file(path: Path) -> bytes:
    """The bytes of the key file ``path``, read without blocking and within
    :data:`MAX_KEY_FILE`: :class:`KeyProblem` for anything but a regular file of that
    size (a FIFO, which would block the run for ever until something writes to it, a
    device); ``IsADirectoryError`` for a directory, other ``OSError`` as raised."""
    # O_NONBLOCK: opening a FIFO waits for a writer without it.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise KeyProblem(f"is {kind}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_KEY_FILE and (chunk := os.read(fd, MAX_KEY_FILE + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_KEY_FILE:
            raise KeyProblem(f"is larger than {MAX_KEY_FILE // 1024} KiB: no PEM key is")
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and readable by its owner only (0600) from
    the first byte: a temporary file in the same directory, made 0600 by mkstemp, then
    renamed over ``path``. A reader (another xdist worker) sees the old file or the
    whole new one, never half of it, and nobody else ever sees the key."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o600)  # mkstemp's mode already; said for the reader
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def cached_key(mkdir: Callable[[str], Path], name: str) -> Callable[[], KeyOutcome]:
    """How to get the key kept in the file :data:`KEY_FILE` of the directory
    ``mkdir(name)`` (pytest's ``cache.mkdir``, which gives each plugin a directory of its
    own): the file's key if it passes :func:`load_key`, else a new key, written there.

    What stands in the way is replaced, and said: a file that is no usable key, an
    empty directory where the file should be, a file where the directory should be.
    When nothing can be written there, the new key is used all the same (and said)."""

    def outcome() -> KeyOutcome:
        problems: list[str] = []
        try:
            path = _own_directory(mkdir, name, problems) / KEY_FILE
        except OSError as exc:
            problems.append(
                f"pytest-mgmtauth cannot keep its signing key in pytest's cache ({exc}); "
                "each run makes a new key until that is fixed"
            )
            return new_key(), problems
        try:
            return load_key(read_key_file(path)), problems
        except FileNotFoundError:
            found = ""
        except KeyProblem as problem:
            found = f"the signing key cached in {path} {problem}"
        except IsADirectoryError:
            found = f"the signing key cached in {path} is a directory, not a file"
        except OSError as exc:
            found = f"the signing key cached in {path} cannot be read ({exc})"
        key = new_key()
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()  # only if empty; else OSError
            write_private_file(path, key_pem(key))
        except OSError as exc:
            if found:
                problems.append(found)
            problems.append(
                f"pytest-mgmtauth cannot write its new signing key to {path} ({exc}); "
                "each run makes a new key until that is fixed"
            )
        else:
            if found:
                problems.append(f"{found}: pytest-mgmtauth replaced it with a new key")
        return key, problems

    return outcome


def _own_directory(mkdir: Callable[[str], Path], name: str, problems: list[str]) -> Path:
    """``mkdir(name)``; a file standing where that directory should be (it can only be
    ours, left by a crash or an edit) is removed first, and said."""
    try:
        return mkdir(name)
    except FileExistsError as exc:
        stands = exc.filename
        if not stands or os.path.basename(stands) != name or os.path.isdir(stands):
            raise
        os.unlink(stands)
        problems.append(
            f"{stands} was a file, not pytest-mgmtauth's directory in pytest's cache: "
            "pytest-mgmtauth replaced it with the directory and a new signing key"
        )
    return mkdir(name)


def fresh_key() -> KeyOutcome:
    """A new key, kept nowhere (no cache)."""
    return new_key(), []


class SigningKey:
    """The session's signing key, made once by ``make`` (:func:`cached_key`,
    :func:`fresh_key`) in one background thread that :meth:`start` starts, or in the
    caller of :meth:`key` if nothing started it or no thread could be had.

    :meth:`key` waits for it, then says what went wrong on the way (a cached key that
    was replaced, a cache that cannot be written) as warnings of ``warning``, once, in
    its caller's thread: a warning filter of the caller's (pytest's, around a test)
    sees them. An error of ``make`` is raised by every :meth:`key`. Thread-safe.

    The thread is not a daemon: a run that ends while it generates waits for it, so that
    the key is cached for the next run.
    """

    def __init__(
        self, make: Callable[[], KeyOutcome] = fresh_key, *, warning: type[Warning] = UserWarning
    ) -> None:
        self._make = make
        self._warning = warning
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._outcome: rsa.RSAPrivateKey | BaseException | None = None
        self._problems: list[str] = []

    @property
    def started(self) -> bool:
        """Whether the key is being made, or was."""
        return self._thread is not None or self._done.is_set()

    def start(self) -> None:
        """Start making the key in a background thread; nothing once started."""
        import_cryptography()
        with self._lock:
            if self.started:
                return
            thread = threading.Thread(target=self._run, name="mgmtauth-signing-key")
            try:
                thread.start()
            except RuntimeError:  # at the thread limit: key() makes it
                return
            self._thread = thread

    def key(self) -> rsa.RSAPrivateKey:
        self.start()
        with self._lock:
            if not self.started:
                self._run()
        self._done.wait()
        outcome = self._outcome
        with self._lock:
            problems, self._problems = self._problems, []
        for problem in problems:
            warnings.warn(problem, self._warning, stacklevel=2)
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None
        return outcome

    def _run(self) -> None:
        # Written before _done is set, read after it: no lock needed.
        try:
            self._outcome, self._problems = self._make()
        except BaseException as exc:  # raised where the key is needed
            self._outcome = exc
        finally:
            self._done.set()
