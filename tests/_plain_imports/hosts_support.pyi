"""``import hosts_support`` under mypy: tests/hosts/hosts_support.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.hosts.hosts_support import *  # noqa: F403  (every public name, re-exported)
