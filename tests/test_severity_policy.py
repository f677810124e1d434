"""The one validation policy (`s3skills.skills.format.severity.SEVERITIES`), as `push` applies it.

What hosts load is stored; what no host can read is left out (its library copy kept);
`strict` refuses both, and `validate` fails exactly where `strict` refuses. Each typical
real-world deviation is a row of the table below, pushed into an in-memory library.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.skills.format.severity import SEVERITIES, Severity
from s3skills.testing import MemoryObjectStore, skill_md
from s3skills.testing import write_file as write
from s3skills.transfer import PushRefused, push_tree
from s3skills.transfer.reports import names_line

PREFIX = "ana/skills/"
LONG = "Handles long things. " * 60  # over 1,024 characters
META = "---\nname: meta\ndescription: Nested metadata.\nmetadata:\n  authors: [a, b]\n---\nBody\n"

# (folder, SKILL.md, stored by default, refused by strict)
DEVIATIONS = [
    ("clean", skill_md("clean", "Clean. Use it always."), True, False),
    ("pdf-tools", skill_md("pdf", "Name differs from the folder."), True, True),
    ("long", skill_md("long", LONG), True, True),
    ("meta", META, True, True),  # a metadata value that is not a string
    ("xero", skill_md("Xero Automation", "Uppercase and a space in the name."), True, True),
    ("advice", skill_md("advice", "An unknown field only.", colour="blue"), True, False),
    ("no-description", "---\nname: no-description\n---\nBody\n", False, True),
    ("bad-yaml", "---\nname: [unclosed\ndescription: x\n---\nBody\n", False, True),
]


def test_validate_fails_exactly_where_strict_refuses_and_what_is_loaded_is_pushed() -> None:
    for rule in SEVERITIES.values():
        assert rule.fails_validate == rule.strict_refuses
        assert rule.pushed or not rule.loaded  # never leave out what agents would load
        assert rule.named_by_push or not rule.strict_refuses  # what strict refuses, push names
    assert not SEVERITIES[Severity.FATAL].pushed
    assert SEVERITIES[Severity.ERROR].pushed


@pytest.mark.parametrize(("folder", "text", "stored", "refused"), DEVIATIONS, ids=[d[0] for d in DEVIATIONS])
def test_each_real_world_deviation_is_stored_or_left_out_as_the_hosts_do(
    tmp_path: Path, folder: str, text: str, stored: bool, refused: bool
) -> None:
    tree = tmp_path / "repo"
    write(tree, f"{folder}/SKILL.md", text)
    write(tree, "other/SKILL.md", skill_md("other", "Another skill. Use it too."))
    store = MemoryObjectStore()
    if refused:
        with pytest.raises(PushRefused, match="--strict refuses 1 skill"):
            push_tree(store, tree, PREFIX, strict=True)
        assert store.keys() == []
    else:
        push_tree(store, tree, PREFIX, strict=True)
    report = push_tree(store, tree, PREFIX)
    assert (folder in report.skills) == stored
    assert (folder in report.left_out) == (not stored)
    assert "other" in report.skills
    library = S3Backend("memory", user_id="ana", store=store, layout=KeyLayout.seeds()).skills
    ids = {s.id for s in library.index(refresh=True)}
    assert (folder in ids) == stored
    if stored:
        assert library.load(folder).skill.id == folder


def test_a_left_out_skill_keeps_its_library_copy_even_when_mirroring(tmp_path: Path) -> None:
    tree = tmp_path / "repo"
    write(tree, "pdf/SKILL.md", skill_md("pdf", "Fills PDF forms."))
    write(tree, "pdf/notes.md", "notes")
    store = MemoryObjectStore()
    push_tree(store, tree, PREFIX)
    write(tree, "pdf/SKILL.md", "no frontmatter\n")  # broken locally
    report = push_tree(store, tree, PREFIX, delete=True)
    assert report.left_out == ["pdf"]
    assert report.deleted == []
    assert {PREFIX + "pdf/SKILL.md", PREFIX + "pdf/notes.md"} <= set(store.keys())


def test_names_line_keeps_lines_short_and_names_at_least_one() -> None:
    ids = [f"category-{i:03d}/a-rather-long-skill-name-{i:03d}" for i in range(50)]
    line = names_line(ids, 120)
    assert len(line) <= 120 + len(", +50 more")
    assert line.startswith(ids[0])
    assert line.endswith(f", +{50 - line.count('category-')} more")
    assert names_line(["x" * 300], 10) == "x" * 300  # one name always shows; the printer cuts the line
    assert names_line([], 10) == ""
