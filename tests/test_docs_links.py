"""Every relative link in the README and the docs resolves: the file exists in the repository,
and a `#fragment` names a heading of the target (the anchor GitHub gives it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "bench" / "README.md",
    ROOT / "localstack" / "README.md",
    *sorted((ROOT / "examples").glob("*/README.md")),
]
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(path: Path) -> str:
    """The Markdown without its fenced code blocks (a link in an example is not a link)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (duplicates get -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_prose(path)):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_the_slugs_are_githubs() -> None:
    assert anchors(ROOT / "docs" / "THREAT_MODEL.md") >= {"3-the-script-runner-run_skill_script", "threat-model"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_with_its_anchor(doc: Path) -> None:
    name = doc.relative_to(ROOT)
    for target in _LINK.findall(_prose(doc)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file_part, _, fragment = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        assert resolved.is_relative_to(ROOT), f"{name} -> {target}: outside the repository"
        assert resolved.exists(), f"{name} links to a missing {target}"
        if fragment and resolved.suffix == ".md":
            assert fragment in anchors(resolved), f"{name} -> {target}: no such heading"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_never_point_outside_the_repository(doc: Path) -> None:
    assert "../shared" not in doc.read_text(encoding="utf-8"), doc.name
