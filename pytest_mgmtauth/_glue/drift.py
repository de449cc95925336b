"""The drift check of an ordinary run: a test whose module has a snapshot
(``mgmtauth_snapshots/<module>.json``) that holds its id
has its exchanges with the fake kept, and compared with the service's at teardown. A
difference is a ``DriftWarning``, or with ``strict`` a failure.

A test whose module has no snapshot file costs one ``stat`` per module (cached); the
file is read once per module."""

from __future__ import annotations

import contextlib
import functools
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .._fake.server import MgmtServer
    from .._service.exchange_shape import Exchange, Snapshot, TestRecord

__all__ = ["SNAPSHOT_DIR", "Watch", "shown", "snapshot_key", "snapshot_path", "watch"]

#: The folder, next to a test module, that holds its snapshot file.
SNAPSHOT_DIR = "mgmtauth_snapshots"

_SNAPSHOTS = pytest.StashKey["dict[Path, Snapshot | None]"]()


@functools.lru_cache(maxsize=1024)  # once per module, not twice per test
def snapshot_path(module: Path) -> Path:
    """Where the snapshot of the test module at ``module`` is."""
    return module.parent / SNAPSHOT_DIR / f"{module.stem}.json"


def shown(config: pytest.Config, path: Path) -> str:
    """``path`` as messages show it: relative to the rootdir, where it is under it."""
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


def snapshot_key(item: pytest.Item) -> str:
    """A test's key in its module's snapshot: its node id within the module."""
    return item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.name


def _snapshot(item: pytest.Item) -> Snapshot | None:
    cache = item.config.stash.setdefault(_SNAPSHOTS, {})
    path = snapshot_path(item.path)
    if path not in cache:
        if not path.is_file():
            cache[path] = None
        else:
            from .._service.exchange_shape import Snapshot

            try:
                cache[path] = Snapshot.loads(path.read_bytes(), where=shown(item.config, path))
            except ValueError as exc:
                problem = str(exc)  # the user's file: the message says how to fix it
            else:
                return cache[path]
            pytest.fail(f"pytest-mgmtauth: {problem}", pytrace=False)
    return cache[path]


class Watch:
    """One test's recording and the fake's exchanges kept to compare with it."""

    def __init__(self, record: TestRecord, kept: list[Exchange], where: Path) -> None:
        self.record = record
        self.kept = kept
        self.where = where

    def check(self, item: pytest.Item, fake: MgmtServer) -> None:
        """Warn of (or, strict, fail on) every difference from the recording."""
        __tracebackhide__ = True
        from .._service.exchange_shape import normalise
        from .._verdicts.drift import compare, drift_message
        from .._verdicts.findings import DriftWarning

        # The fake's own address in a host field stands for its region host: no drift.
        made = [normalise(e, region_host=fake.options.v3_host) for e in self.kept]
        if made == list(self.record.exchanges):
            return  # the same records: nothing to pair field by field
        found = compare(self.record.exchanges, made)
        if not found:
            return
        message = "pytest-mgmtauth: " + drift_message(
            found, recorded=self.record.recorded, where=str(self.where)
        )
        if fake.options.strict:
            pytest.fail(message, pytrace=False)
        path, lineno, _ = item.reportinfo()
        warnings.warn_explicit(
            DriftWarning(message), DriftWarning, filename=str(path), lineno=(lineno or 0) + 1
        )


def watch(item: pytest.Item, fake: MgmtServer) -> Watch | None:
    """Start keeping the test's exchanges if its module's snapshot records it."""
    snapshot = _snapshot(item)
    if snapshot is None:
        return None
    record = snapshot.tests.get(snapshot_key(item))
    if record is None:
        return None
    return Watch(record, fake.record_exchanges(), snapshot_path(item.path))


def write_record(
    item: pytest.Item, kept: list[Exchange], *, today: str, region_host: str | None = None
) -> str | None:
    """Write the test's exchanges into its module's snapshot (a live run); what changed
    since an earlier recording of it, or None (the first, or nothing changed).
    ``region_host``: what the fake's own address stands for, in exchanges with a fake."""
    from importlib.metadata import version

    from .._service.exchange_shape import Snapshot, TestRecord, normalise
    from .._verdicts.drift import compare, moved_message

    path = snapshot_path(Path(item.path))
    snapshot = Snapshot()
    if path.is_file():
        # Not readable: this run records the module anew, test by test.
        with contextlib.suppress(ValueError):
            snapshot = Snapshot.loads(path.read_bytes(), where=str(path))
    key = snapshot_key(item)
    record = TestRecord(
        today,
        version("pytest-mgmtauth"),
        tuple(normalise(e, region_host=region_host) for e in kept),
    )
    earlier = snapshot.tests.get(key)
    snapshot.tests[key] = record
    path.parent.mkdir(exist_ok=True)
    path.write_text(snapshot.dumps(), "utf-8")
    item.config.stash.setdefault(_SNAPSHOTS, {})[path] = snapshot
    if earlier is None:
        return None
    # The earlier recording is the service's before; this one the service's now.
    moved = compare(earlier.exchanges, record.exchanges)
    if not moved:
        return None
    return moved_message(moved, recorded=earlier.recorded, where=str(path))
