"""``import domain_support`` under mypy: tests/domain_support.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.domain_support import *  # noqa: F403  (every public name, re-exported)
