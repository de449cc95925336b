"""A real-time guard for event loops under the simulated clock.

``run_async_within`` runs a coroutine on a fresh event loop in a daemon thread and waits
with ``Thread.join(timeout)``, which counts real time even while freezegun has stopped
``time``. When the loop is stuck, the guard cancels the coroutine from outside (the
cancellation wakes the loop's selector), waits for the thread to end, and fails the test
with a message: a frozen event loop is a failure, never a hung suite.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

GUARD_SECONDS = 10.0


class LoopBlocked(AssertionError):
    """The guarded coroutine did not finish in time (real time)."""


def run_async_within(
    seconds: float,
    main: Callable[[], Coroutine[Any, Any, T]],
    *,
    what: str,
    loop: asyncio.AbstractEventLoop | None = None,
) -> T:
    """``main()``'s result, run on ``loop`` (default: a new one) under the guard."""
    loop = loop or asyncio.new_event_loop()
    outcome: dict[str, Any] = {}
    task_ready = threading.Event()
    task_box: list[asyncio.Task[T]] = []

    def target() -> None:
        asyncio.set_event_loop(loop)
        try:
            task = loop.create_task(main())
            task_box.append(task)
            task_ready.set()
            outcome["result"] = loop.run_until_complete(task)
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            task_ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            asyncio.set_event_loop(None)

    thread = threading.Thread(target=target, daemon=True, name=f"guarded loop: {what}")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        task_ready.wait(seconds)
        if task_box:
            loop.call_soon_threadsafe(task_box[0].cancel)
        thread.join(seconds)
        raise LoopBlocked(
            f"{what} did not finish within {seconds:g} s of real time: the event loop is blocked"
            + ("" if not thread.is_alive() else " (and could not be cancelled)")
        )
    if "error" in outcome:
        raise outcome["error"]
    result: T = outcome["result"]
    return result
