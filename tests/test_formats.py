"""Skill indexes for the system prompt: content, escaping, and the character budget."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from s3skills.skills import SkillInfo, SkillMetadata
from s3skills.skills.format.render import format_grouped, format_xml, format_yaml

Formatter = Callable[[Sequence[SkillInfo], int], str]
FORMATS: list[Formatter] = [format_yaml, format_grouped, format_xml]
BIG = 100_000


def skill(skill_id: str, description: str, **fields: Any) -> SkillInfo:
    leaf = skill_id.rsplit("/", 1)[-1]
    return SkillInfo(id=skill_id, metadata=SkillMetadata(name=leaf, description=description, **fields))


LIBRARY = [
    skill("pdf", "Fill, merge and split PDF files; extract text and tables from them."),
    skill(
        "escrituras/compraventa",
        "Redacta escrituras de compraventa de inmuebles con cargas, precio y forma de pago.",
        tags=["notaría", "inmuebles"],
        version="1.0",
    ),
    skill("escrituras/hipoteca", "Redacta escrituras de préstamo hipotecario y su cancelación registral."),
    skill("contratos/arrendamiento", "Drafts residential and commercial lease (rent) contracts."),
    skill("docx", "Create and edit Word documents, keeping tracked changes and comments."),
]


# --- content -------------------------------------------------------------------------------


def _yaml_blocks(text: str) -> list[dict[str, object]]:
    return [yaml.safe_load(block.removeprefix("---\n").removesuffix("\n---")) for block in text.split("\n\n")]


def test_yaml_has_one_frontmatter_block_per_skill_sorted_by_id() -> None:
    text = format_yaml(LIBRARY, BIG)
    blocks = _yaml_blocks(text)
    assert [block["id"] for block in blocks] == sorted(s.id for s in LIBRARY)
    compraventa = blocks[2]
    assert compraventa == {
        "name": "compraventa",
        "id": "escrituras/compraventa",
        "description": LIBRARY[1].metadata.description,
        "category": "escrituras",
        "tags": ["notaría", "inmuebles"],
        "version": "1.0",
    }
    assert blocks[-1] == {"name": "pdf", "id": "pdf", "description": LIBRARY[0].metadata.description}
    assert all(block.startswith("---\n") and block.endswith("\n---") for block in text.split("\n\n"))


def test_yaml_quotes_values_that_yaml_would_misread() -> None:
    tricky = skill("yes", "key: value # not a comment", version="1.10")
    [block] = _yaml_blocks(format_yaml([tricky], BIG))
    assert block == {"name": "yes", "id": "yes", "description": "key: value # not a comment", "version": "1.10"}


def test_grouped_lists_categories_in_order_and_uncategorised_last() -> None:
    assert format_grouped(LIBRARY, BIG) == (
        "contratos:\n"
        "- contratos/arrendamiento: Drafts residential and commercial lease (rent) contracts.\n"
        "\n"
        "escrituras:\n"
        "- escrituras/compraventa: Redacta escrituras de compraventa de inmuebles con cargas, precio y forma"
        " de pago.\n"
        "- escrituras/hipoteca: Redacta escrituras de préstamo hipotecario y su cancelación registral.\n"
        "\n"
        "other:\n"
        "- docx: Create and edit Word documents, keeping tracked changes and comments.\n"
        "- pdf: Fill, merge and split PDF files; extract text and tables from them."
    )


def test_grouped_without_categories_has_no_heading() -> None:
    text = format_grouped([skill("pdf", "PDF files."), skill("docx", "Word files.")], BIG)
    assert text == "- docx: Word files.\n- pdf: PDF files."


def test_grouped_uses_the_metadata_category_over_the_id_prefix() -> None:
    text = format_grouped([skill("pdf", "PDF files.", category="documents")], BIG)
    assert text == "documents:\n- pdf: PDF files."


def test_xml_lists_name_description_and_location() -> None:
    text = format_xml(LIBRARY[:1], BIG)
    assert text == (
        "<available_skills>\n"
        "  <skill>\n"
        "    <name>pdf</name>\n"
        "    <description>Fill, merge and split PDF files; extract text and tables from them.</description>\n"
        "    <location>pdf</location>\n"
        "  </skill>\n"
        "</available_skills>"
    )


def test_xml_location_can_be_chosen() -> None:
    text = format_xml(LIBRARY[:1], BIG, location=lambda s: f"/skills/{s.leaf}/SKILL.md")
    assert "<location>/skills/pdf/SKILL.md</location>" in text


def test_xml_escapes_every_value() -> None:
    hostile = SkillInfo(
        id="a&b",
        metadata=SkillMetadata(name="<x>", description="Use </description><skill> & \"quotes\" 'too'"),
    )
    text = format_xml([hostile], BIG)
    assert "<name>&lt;x&gt;</name>" in text
    assert "<description>Use &lt;/description&gt;&lt;skill&gt; &amp; &quot;quotes&quot; &apos;too&apos;" in text
    assert "<location>a&amp;b</location>" in text
    assert text.count("<skill>") == 1


@pytest.mark.parametrize("formatter", FORMATS)
def test_multi_line_and_control_characters_become_one_line(formatter: Formatter) -> None:
    text = formatter([skill("pdf", "Line one.\n\n  Line\ttwo.\x00\x07")], BIG)
    assert "Line one. Line two." in text
    assert "\x00" not in text
    assert "\x07" not in text


@pytest.mark.parametrize("formatter", FORMATS)
def test_empty_library_gives_empty_text(formatter: Formatter) -> None:
    assert formatter([], BIG) == ""


@pytest.mark.parametrize("formatter", FORMATS)
def test_output_does_not_depend_on_input_order(formatter: Formatter) -> None:
    for budget in (BIG, 400, 250):
        assert formatter(LIBRARY, budget) == formatter(list(reversed(LIBRARY)), budget)


# --- degradation stages --------------------------------------------------------------------


def _full_length(formatter: Formatter) -> int:
    return len(formatter(LIBRARY, BIG))


@pytest.mark.parametrize("formatter", FORMATS)
def test_stage_0_everything_fits_exactly_at_its_length(formatter: Formatter) -> None:
    full = formatter(LIBRARY, BIG)
    assert formatter(LIBRARY, len(full)) == full
    assert "…" not in full


@pytest.mark.parametrize("formatter", FORMATS)
def test_stage_1_descriptions_are_shortened_at_a_word(formatter: Formatter) -> None:
    budget = _full_length(formatter) - 30
    text = formatter(LIBRARY, budget)
    assert len(text) <= budget
    assert "…" in text
    assert all(s.id in text for s in LIBRARY)
    assert "list_skills" not in text
    for word_cut in re.findall(r"(\w+)…", text):  # every cut ends on a whole word
        assert any(re.search(rf"\b{word_cut}\b", s.metadata.description) for s in LIBRARY)


@pytest.mark.parametrize("formatter", FORMATS)
def test_stage_2_lists_names_only(formatter: Formatter) -> None:
    # Budgets below the shortest stage-1 text and above the names-only one (measured).
    budget = {"format_yaml": 300, "format_grouped": 200, "format_xml": 600}[formatter.__name__]
    text = formatter(LIBRARY, budget)
    assert len(text) <= budget
    assert all(s.id in text for s in LIBRARY)
    assert not any(word in text for word in ("Redacta", "Fill", "Drafts", "…"))
    assert "list_skills" not in text


@pytest.mark.parametrize("formatter", FORMATS)
def test_stage_3_drops_skills_from_the_end_and_says_so(formatter: Formatter) -> None:
    budget = {"format_yaml": 200, "format_grouped": 112, "format_xml": 300}[formatter.__name__]  # measured
    text = formatter(LIBRARY, budget)
    assert len(text) <= budget
    shown = [s.id for s in LIBRARY if s.id in text]
    match = re.search(r"(\d+) more skills? (?:was|were) left out; call the list_skills tool", text)
    assert match is not None
    assert int(match.group(1)) == len(LIBRARY) - len(shown)
    assert 0 < len(shown) < len(LIBRARY)


def test_stage_3_keeps_the_leading_skills_in_display_order() -> None:
    text = format_yaml(LIBRARY, 200)
    ordered = sorted(s.id for s in LIBRARY)
    shown = [skill_id for skill_id in ordered if f"id: {skill_id}\n" in text]
    assert shown == ordered[: len(shown)]


@pytest.mark.parametrize("formatter", FORMATS)
@pytest.mark.parametrize("budget", [0, 1, 10, 40, 59])
def test_tiny_budgets_give_the_count_line_cut_to_fit(formatter: Formatter, budget: int) -> None:
    text = formatter(LIBRARY, budget)
    assert len(text) <= budget
    assert "5 skills available; call the list_skills tool to see them.".startswith(text.removesuffix("…"))


@pytest.mark.parametrize("formatter", FORMATS)
def test_count_line_fits_whole_when_there_is_room(formatter: Formatter) -> None:
    many = [skill(f"s{i:03d}", "d" * 50) for i in range(200)]
    text = formatter(many, 60)
    assert text == "200 skills available; call the list_skills tool to see them."


# --- the budget property ---------------------------------------------------------------------

segment = st.from_regex(r"[a-z0-9][a-z0-9-]{0,15}", fullmatch=True)
skill_infos = st.builds(
    lambda ids, description, category, tags, version: SkillInfo(
        id="/".join(ids),
        metadata=SkillMetadata(name=ids[-1], description=description, category=category, tags=tags, version=version),
    ),
    st.lists(segment, min_size=1, max_size=2),
    st.text(min_size=1, max_size=400).filter(lambda s: s.strip() != ""),
    st.none() | st.text(max_size=20),
    st.lists(st.text(max_size=10), max_size=3),
    st.none() | st.text(max_size=8),
)


@settings(max_examples=150, deadline=None)
@given(skills=st.lists(skill_infos, max_size=25), budget=st.integers(min_value=0, max_value=4000))
def test_no_format_ever_exceeds_its_budget(skills: list[SkillInfo], budget: int) -> None:
    for formatter in FORMATS:
        text = formatter(skills, budget)
        assert len(text) <= budget
        if budget >= 200 and skills:
            assert text
            assert "list_skills" in text or all(s.id in text for s in skills)
