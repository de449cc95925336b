"""``import badge_flow`` under mypy: tests/live/badge_flow.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.live.badge_flow import *  # noqa: F403  (every public name, re-exported)
