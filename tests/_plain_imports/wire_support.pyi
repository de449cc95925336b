"""``import wire_support`` under mypy: tests/wire_support.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.wire_support import *  # noqa: F403  (every public name, re-exported)
