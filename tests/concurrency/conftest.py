"""Real-time guards for tests that would hang if the fake regressed.

A guard runs the work in a daemon thread and waits for it with ``Thread.join(timeout)``,
which waits in real time even under a frozen clock; a blocked server then fails the
test with a message instead of hanging the suite (no pytest-timeout needed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

#: Real seconds any guarded piece of work may take; generous for a loaded CI machine,
#: tiny next to a hang.
GUARD_SECONDS = 20.0


def run_within(seconds: float, work: Callable[[], T], *, what: str) -> T:
    """``work()``'s result, or an AssertionError when it has not finished in time."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name=f"guarded: {what}")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"{what} did not finish within {seconds:g} s of real time: blocked")
    if "error" in outcome:
        raise outcome["error"]
    result: T = outcome["result"]
    return result


@pytest.fixture
def within() -> Callable[..., Any]:
    """``within(work, what=...)``: run ``work`` under the real-time guard."""

    def run(work: Callable[[], T], *, what: str, seconds: float = GUARD_SECONDS) -> T:
        __tracebackhide__ = True
        return run_within(seconds, work, what=what)

    return run


@pytest.fixture
def in_threads(within: Callable[..., Any]) -> Callable[..., None]:
    """``in_threads(target, items, what=...)``: ``target(index, item)`` in one thread per
    item, all started, then all joined, under the real-time guard."""

    def run(target: Callable[[int, Any], None], items: list[Any], *, what: str) -> None:
        __tracebackhide__ = True

        def start_and_join() -> None:
            threads = [
                threading.Thread(target=target, args=(index, item), daemon=True)
                for index, item in enumerate(items)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        within(start_and_join, what=what)

    return run
