"""One list of finding kinds everywhere: each page that lists the kinds of the teardown
check names all of them, in the order of the report's verdicts (``findings.KINDS``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mgmtauth._verdicts.findings import KINDS, WARNINGS

ROOT = Path(__file__).parents[2]
#: The pages that list the kinds, and the text that starts the list on each.
PAGES = {
    "README.md": "the plugin checks for the mistakes",
    "docs/quickstart.md": "the plugin checks for the mistakes",
    "docs/token-reuse.md": "## The teardown check",
    "docs/reference.md": "**The teardown check.**",
    "docs/reference.md#strict": "| `strict` |",
}


def _warnings_in_order(text: str) -> list[str]:
    names = [WARNINGS[kind].__name__ for kind in KINDS]
    return sorted((n for n in names if n in text), key=text.index)


@pytest.mark.parametrize("page", PAGES)
def test_each_page_lists_every_finding_kind_in_one_order(page: str) -> None:
    text = (ROOT / page.split("#")[0]).read_text()
    start = text.index(PAGES[page])
    listed = text[start : start + 4000]
    if page.endswith("#strict"):
        listed = listed.split("\n", 1)[0]
    assert _warnings_in_order(listed) == [WARNINGS[kind].__name__ for kind in KINDS]


def test_a_page_missing_a_kind_is_caught() -> None:
    assert _warnings_in_order("TokenChurnWarning, RefusedCallWarning") == [
        "TokenChurnWarning",
        "RefusedCallWarning",
    ]
