"""``import hostile_support`` under mypy: tests/hostile/hostile_support.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.hostile.hostile_support import *  # noqa: F403  (every public name, re-exported)
