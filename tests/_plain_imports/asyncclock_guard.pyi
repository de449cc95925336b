"""``import asyncclock_guard`` under mypy: tests/clock/asyncclock_guard.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.clock.asyncclock_guard import *  # noqa: F403  (every public name, re-exported)
