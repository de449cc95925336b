"""The docs read on a code host, where pymdownx snippets are not expanded (issue 38,
"First minutes"): each include of an example (``--8<-- "docs/examples/FILE:SECTION"``)
shows there as that line, so the block it stands in is followed by a ``Source:`` line
linking the example file and naming its section(s); any other include is named in the
page's prose. The built site shows the code and the link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
INCLUDE = re.compile(r'^(?P<indent>\s*)--8<-- "(?P<target>[^"]+)"\s*$')
FENCE = re.compile(r"^\s*(```|~~~)")


def _blocks(lines: list[str]) -> list[tuple[list[str], str | None]]:
    """The includes of each fenced block (in order) and the first non-blank line after
    its closing fence; unfenced includes as blocks of their own."""
    blocks: list[tuple[list[str], str | None]] = []
    inside: list[str] | None = None
    for index, line in enumerate(lines):
        include = INCLUDE.match(line)
        if FENCE.match(line):
            if inside is None:
                inside = []
                continue
            if inside:
                after = next((rest for rest in lines[index + 1 :] if rest.strip()), None)
                blocks.append((inside, after))
            inside = None
        elif include is not None:
            if inside is None:
                blocks.append(([include["target"]], None))
            else:
                inside.append(include["target"])
    return blocks


def _sections(path: Path) -> set[str]:
    return set(re.findall(r"--8<-- \[start:([\w-]+)\]", path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_included_example_is_linked_where_it_is_included(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    for targets, after in _blocks(lines):
        examples = [t for t in targets if t.startswith("docs/examples/")]
        for other in (t for t in targets if not t.startswith("docs/examples/")):
            # Not an example (the changelog page's CHANGELOG.md): said in the prose.
            prose = [line for line in lines if not INCLUDE.match(line)]
            assert any(f"`{other}`" in line for line in prose), (
                f"{page.name} includes {other} without naming it for a code host's reader"
            )
        if not examples:
            continue
        files = {t.partition(":")[0] for t in examples}
        assert len(files) == 1, f"{page.name}: one block includes several files: {files}"
        (name,) = files
        assert (ROOT / name).is_file(), f"{page.name} includes {name}, which does not exist"
        link = f"[`{name}`]({name.removeprefix('docs/')})"
        assert after is not None, f"{page.name}: nothing follows the block including {name}"
        assert after.strip().startswith(f"Source: {link}"), (
            f"{page.name}: the block including {examples} is not followed by "
            f"'Source: {link}...' (what a code host's reader sees instead of the code)"
        )
        for target in examples:
            section = target.partition(":")[2]
            if section:
                assert section in _sections(ROOT / name), f"{name} has no section {section!r}"
                assert f"`{section}`" in after, f"{page.name}: the Source line of {target}"


def test_the_check_sees_every_include() -> None:
    # The pages hold includes, and the parser finds each of them in a block.
    counted = 0
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        found = sum(len(targets) for targets, _ in _blocks(lines))
        assert found == sum(1 for line in lines if INCLUDE.match(line)), page.name
        counted += found
    assert counted >= 50
