"""``import clients_support`` under mypy: tests/clients/clients_support.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.clients.clients_support import *  # noqa: F403  (every public name, re-exported)
