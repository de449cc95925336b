"""``python -m pytest_mgmtauth``: the standalone server, as ``mgmtauth-server``."""

from __future__ import annotations

from ._standalone.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
