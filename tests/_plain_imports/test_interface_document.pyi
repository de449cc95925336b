"""``import test_interface_document`` under mypy: tests/fidelity/test_interface_document.py.

The module pytest imports under that name; see README.md beside this file.
"""

from tests.fidelity.test_interface_document import *  # noqa: F403  (every public name, re-exported)
