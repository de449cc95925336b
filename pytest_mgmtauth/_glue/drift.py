"""The drift check of an ordinary run: a test whose module has a snapshot
(``mgmtauth_snapshots/<module>.json``) that holds its id
has its exchanges with the fake kept, and compared with the service's at teardown. A
difference is a ``DriftWarning``, or with ``strict`` a failure.

A test whose module has no snapshot file costs one ``stat`` per module (cached); the
file is read once per module."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from .._fake.server import MgmtServer
    from .._service.exchange_shape import Exchange, Snapshot, TestRecord


#: The folder, next to a test module, that holds its snapshot file.
SNAPSHOT_DIR = "mgmtauth_snapshots"

_SNAPSHOTS = pytest.StashKey["dict[Path, Snapshot | None]"]()


@functools.lru_cache(maxsize=1024)  # once per module, not twice per test
def snapshot_path(module: Path) -> Path:
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


def _read(path: Path, where: str) -> Snapshot | None:
    """The snapshot file at ``path``, None when there is none; ValueError naming ``where``
    when it is not one."""
    from .._service.exchange_shape import Snapshot

    return Snapshot.loads(path.read_bytes(), where=where) if path.is_file() else None


def _snapshot(item: pytest.Item) -> Snapshot | None:
    cache = item.config.stash.setdefault(_SNAPSHOTS, {})
    path = snapshot_path(item.path)
    if path not in cache:
        try:
            cache[path] = _read(path, shown(item.config, path))
        except ValueError as exc:  # the user's file: the message says how to fix it
            raise pytest.fail.Exception(f"pytest-mgmtauth: {exc}", pytrace=False) from None
    return cache[path]


@dataclasses.dataclass
class Watch:
    """One test's recording and the fake's exchanges kept to compare with it."""

    record: TestRecord
    kept: list[Exchange]
    #: The snapshot's path, as messages show it.
    where: str
    #: The host the fake's own address stands for in a host field (its v3_host).
    region_host: str

    def message(self) -> str:
        """The differences between the fake's exchanges so far and the recording
        (``findings``); empty for none."""
        from .._service.exchange_shape import normalise
        from .._verdicts.drift import compare, drift_message

        # The fake's own address in a host field stands for its region host: no drift.
        made = [normalise(e, region_host=self.region_host) for e in self.kept]
        if made == list(self.record.exchanges):
            return ""  # the same records: nothing to pair field by field
        found = compare(self.record.exchanges, made)
        return (
            drift_message(found, recorded=self.record.recorded, where=self.where) if found else ""
        )

    def check(self, item: pytest.Item, fake: MgmtServer) -> None:
        """Warn of (or, strict, fail on) every difference from the recording."""
        __tracebackhide__ = True
        from .._verdicts.findings import DriftWarning
        from .report import warn_at

        message = self.message()
        if not message:
            return
        message = "pytest-mgmtauth: " + message
        if fake.options.strict:
            pytest.fail(message, pytrace=False)
        warn_at(item, DriftWarning(message))


def watch(item: pytest.Item, fake: MgmtServer) -> Watch | None:
    """Start keeping the test's exchanges if its module's snapshot records it, and give
    the fake's report section the drift verdict: none, or the differences."""
    snapshot = _snapshot(item)
    if snapshot is None:
        return None
    record = snapshot.tests.get(snapshot_key(item))
    if record is None:
        return None
    where = shown(item.config, snapshot_path(item.path))
    watching = Watch(record, fake.record_exchanges(), where, fake.options.v3_host)
    fake.drift_verdict = lambda: watching.message().splitlines()
    return watching


def _on_disk(item: pytest.Item) -> Snapshot:
    """The module's snapshot as the file holds it now (a live run); empty when there is
    none or it is not readable (this run records the module anew, test by test)."""
    from .._service.exchange_shape import Snapshot

    path = snapshot_path(item.path)
    with contextlib.suppress(ValueError):  # not UTF-8 either
        return _read(path, str(path)) or Snapshot()
    return Snapshot()


def moved(item: pytest.Item, made: Sequence[dict[str, Any]], *, whole: bool) -> str | None:
    """What changed in the service since the earlier recording of the test, from its
    normalised exchanges in this live run (passed or not: ``whole`` says whether the test
    ran to its end); None: no earlier recording, or nothing changed."""
    from .._verdicts.drift import ABSENT, compare, moved_message

    earlier = _on_disk(item).tests.get(snapshot_key(item))
    if earlier is None:
        return None
    # The earlier recording is the service's before; this one the service's now.
    found = compare(earlier.exchanges, made)
    if not found:
        return None
    if all(d.field == "exchange" and d.fake == ABSENT for d in found) and not whole:
        return None  # only the exchanges after the test stopped: nothing to say
    where = shown(item.config, snapshot_path(item.path))
    return moved_message(found, recorded=earlier.recorded, where=where, whole=whole)


def write_record(
    item: pytest.Item,
    kept: Sequence[Exchange],
    *,
    today: str,
    region_host: str | None = None,
) -> bool:
    """Write the test's exchanges (normalised) into its module's snapshot (a live run). An
    entry whose exchanges are the same is left as it is, its date with it, and a file
    whose text would not change is not written: an unchanged service changes no file.
    Whether the file was written. ``region_host``: what the fake's own address stands
    for, in exchanges with a fake."""
    from importlib.metadata import version

    from .._service.exchange_shape import TestRecord, normalise
    from .._verdicts.drift import compare

    made = [normalise(e, region_host=region_host) for e in kept]
    path = snapshot_path(item.path)
    snapshot = _on_disk(item)
    key = snapshot_key(item)
    earlier = snapshot.tests.get(key)
    # Unchanged as the drift check reads it: a random token that happened to leave out a
    # character class (a utk without a digit) does not move the entry either.
    if earlier is None or (list(earlier.exchanges) != made and compare(earlier.exchanges, made)):
        snapshot.tests[key] = TestRecord(today, version("pytest-mgmtauth"), tuple(made))
    data = snapshot.dumps().encode("utf-8")
    item.config.stash.setdefault(_SNAPSHOTS, {})[path] = snapshot
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return True
