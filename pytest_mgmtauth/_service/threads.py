"""Starting the plugin's background threads, and handing them the GIL to begin."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import threading

#: The sleep between two looks at whether a thread has begun (the kernel adds its
#: timer slack, 50 us by default).
_HAND_OVER_POLL = 0.00005


def start(thread: threading.Thread) -> bool:
    """Start ``thread``; False when no thread can be had (the process is at its thread
    limit, and ``Thread.start`` raises ``RuntimeError``). Every background thread of the
    plugin does work ahead that its caller can do itself: a caller told False does it."""
    try:
        thread.start()
    except RuntimeError:
        return False
    return True


def hand_over(begun: threading.Event, timeout: float) -> None:
    """Let a background thread have the GIL until it sets ``begun`` (it has reached
    work that releases the GIL: a signature, a key generation), at most ``timeout`` s.

    Without this the thread waits for the GIL while the caller runs Python (up to the
    5 ms switch interval at each step), and its work starts only when the caller
    blocks. The caller waits in short timed sleeps rather than ``begun.wait()``:
    ``wait()`` has the thread that sets the event wake the caller, and Linux then tends
    to queue the caller on that thread's core, behind the work just started (a signing
    hand-over waited out the whole 1.8 ms signature in about one in four: teardown's
    mean 1.0 ms against its median 0.5 ms). A timer wakes the caller on its own core.
    """
    deadline = time.perf_counter() + timeout
    while not begun.is_set() and time.perf_counter() < deadline:
        time.sleep(_HAND_OVER_POLL)
