"""Starting the plugin's background threads where a process may have none to give."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import threading


def start(thread: threading.Thread) -> bool:
    """Start ``thread``; False when no thread can be had (the process is at its thread
    limit, and ``Thread.start`` raises ``RuntimeError``). Every background thread of the
    plugin does work ahead that its caller can do itself: a caller told False does it."""
    try:
        thread.start()
    except RuntimeError:
        return False
    return True
