"""``import standalone_support`` under mypy: tests/standalone/standalone_support.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.standalone.standalone_support import *  # noqa: F403  (every public name, re-exported)
