"""``import live_support`` under mypy: tests/live/live_support.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.live.live_support import *  # noqa: F403  (every public name, re-exported)
