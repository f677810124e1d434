"""Identifiers and paths in requests, the query-word knobs, `Bm25Index.explain`, and the sketch modes.

Real requests carry code: `canonicalize_url`, `src/codec.py`, `axios.get.mockResolvedValue`.
The ranker reads an identifier in parts and whole (`matching.IDENTIFIERS`), explains why a
skill matched (`s3skills find`), and the benches compare what the body sketch holds.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from s3skills.skills import SkillInfo, SkillMetadata
from s3skills.skills.ranking import identifiers, matching, sketch
from s3skills.skills.ranking.matching import Bm25Index, tokenize
from s3skills.skills.ranking.sketch import MAX_SKETCH_CHARS, SKETCH_MODES, make_sketch
from s3skills.testing.corpus import real_skills_root


def info(skill_id: str, description: str, sketch: str = "", **fields: Any) -> SkillInfo:
    leaf = skill_id.rsplit("/", 1)[-1]
    return SkillInfo(id=skill_id, metadata=SkillMetadata(name=leaf, description=description, **fields), sketch=sketch)


@pytest.mark.parametrize(
    ("text", "extra"),
    [
        ("canonicalize_url", {"canonicalize_url"}),
        ("src/codec.py", {"codec.pi"}),  # the whole file name, stemmed like any word
        ("axios.get.mockResolvedValue", {"axios.get.mockresolvedvalu", "mock", "resolv", "valu"}),
        ("HTTPServer", {"http", "server"}),
    ],
)
def test_an_identifier_is_a_word_whole_as_well_as_in_parts(text: str, extra: set[str]) -> None:
    plain = set(tokenize(text, "english"))
    with_ids = set(tokenize(text, "english", identifiers=True))
    assert plain <= with_ids
    assert extra <= with_ids
    assert not (extra & plain)


def test_prose_without_identifiers_tokenizes_the_same_either_way() -> None:
    text = "Merge several PDF files into one, then add page numbers."
    assert tokenize(text, identifiers=True) == tokenize(text)


def test_a_camel_case_name_in_a_request_finds_the_skill_that_spells_it_in_words() -> None:
    skills = [
        info("testing/jest", "Write Jest tests: mock resolved values of async calls, spies, timers."),
        info("testing/pytest", "Write pytest tests: fixtures, parametrize, monkeypatch."),
    ]
    query = "axios.get.mockResolvedValue is undefined"
    assert [s.id for s, _ in Bm25Index(skills, identifiers=True).rank(query)][:1] == ["testing/jest"]
    assert "testing/jest" not in [s.id for s, _ in Bm25Index(skills, identifiers=False).rank(query)]


def test_the_default_reads_identifiers() -> None:
    assert matching.IDENTIFIERS is True
    assert Bm25Index([info("a/b", "x")]).identifiers is True


def test_explain_names_each_field_and_the_query_words_that_hit_it() -> None:
    skill = info("docs/pdf-merge", "Merge PDF files into one document.", sketch="Bookmarks | merge pages order")
    index = Bm25Index([skill, info("docs/docx", "Word documents.")])
    assert index.explain("merge these pdf files, keep the bookmarks", skill) == {
        "name": ["merge", "pdf"],
        "description": ["merge", "pdf", "files"],
        "sketch": ["merge", "bookmarks"],
    }
    assert index.explain("spreadsheet", "docs/pdf-merge") == {}
    with pytest.raises(KeyError):
        index.explain("pdf", "docs/unknown")


def test_explain_leaves_out_a_field_of_weight_zero() -> None:
    skill = info("docs/pdf", "Read PDF files.", sketch="merge split")
    index = Bm25Index([skill], {"name": 2.0, "description": 1.0, "sketch": 0.0})
    assert index.explain("merge pdf", skill) == {"name": ["pdf"], "description": ["pdf"]}


def test_a_query_word_cap_keeps_the_rarest_words() -> None:
    skills = [info(f"lib/s{n}", "common words here" + (" zebra" if n == 0 else "")) for n in range(20)]
    capped = Bm25Index(skills, max_query_terms=1)
    assert [s.id for s, _ in capped.rank("common zebra")] == ["lib/s0"]  # only the rare word counts
    assert len(Bm25Index(skills).rank("common zebra")) == 20


def test_an_idf_floor_drops_the_words_most_of_the_library_has() -> None:
    skills = [info(f"lib/s{n}", "common" + (" zebra" if n == 0 else "")) for n in range(20)]
    assert [s.id for s, _ in Bm25Index(skills, min_idf=0.5).rank("common zebra")] == ["lib/s0"]


BODY = """# Scanpy

Scanpy analyses single-cell data at scale.

## When to Use This Skill

- clustering cells and drawing a UMAP

## Quick start

```python
import scanpy as sc
```
"""


def test_each_sketch_mode_holds_what_it_says_within_the_limit() -> None:
    assert make_sketch(BODY) == make_sketch(BODY, mode="words")
    assert make_sketch(BODY, mode="none") == ""
    assert make_sketch(BODY, mode="headings") == "Scanpy; When to Use This Skill; Quick start"
    assert make_sketch(BODY, mode="first").endswith("| Scanpy analyses single-cell data at scale.")
    assert make_sketch(BODY, mode="when").endswith("| - clustering cells and drawing a UMAP")
    lead = make_sketch(BODY, mode="lead")
    assert "single-cell" in lead
    assert "UMAP" in lead
    for mode in SKETCH_MODES:
        assert len(make_sketch(BODY * 200, mode=mode)) <= MAX_SKETCH_CHARS  # type: ignore[arg-type]
        assert "import scanpy" not in make_sketch(BODY, mode=mode)  # type: ignore[arg-type]  # code is left out


# -- hostile text: every scan is linear in the text (issue 30) -------------------------------

_REFERENCE_IDENT = identifiers._IDENT_RE  # the pattern itself, run over the whole text as before
_REFERENCE_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)  # before: cubic on blanks


def _reference_identifier_words(text: str) -> list[str]:
    out: list[str] = []
    for ident in _REFERENCE_IDENT.findall(text):
        if "." in ident or "_" in ident:
            out.append(matching._fold(ident))
        if not ident.islower():
            out.extend(matching._fold(part) for part in identifiers._CAMEL_RE.findall(ident) if part)
    return [w for w in out if w not in matching._STOPWORDS]


@pytest.mark.parametrize("seed", range(20))
def test_identifiers_read_run_by_run_are_those_of_the_whole_text(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "aZbY._ -/9é(" + "xX"
    text = "".join(rng.choice(alphabet) for _ in range(2_000))
    assert matching._identifier_words(text) == _reference_identifier_words(text)


# Slow: every SKILL.md of the real corpus through the backtracking reference (~4 s of CPU); the
# 20 random texts above keep the same comparison in the README's command.
@pytest.mark.slow
def test_identifiers_of_the_real_corpus_are_read_as_the_whole_text_reads_them() -> None:
    for skill_md in sorted(real_skills_root().rglob("SKILL.md")):
        text = skill_md.read_text(encoding="utf-8", errors="replace")
        assert matching._identifier_words(text) == _reference_identifier_words(text), skill_md


def test_a_word_longer_than_the_identifier_cap_is_never_scanned_for_identifiers(monkeypatch: Any) -> None:
    scanned: list[int] = []
    real = identifiers._IDENT_RE

    class Recording:
        def findall(self, text: str) -> list[str]:
            scanned.append(len(text))
            return real.findall(text)

    monkeypatch.setattr(identifiers, "_IDENT_RE", Recording())
    hostile = "A" + "x" * 50_000  # the whole-text scan backtracked over it quadratically
    words = tokenize(f"parseHeaders {hostile} in sc.pp.neighbors", "english", identifiers=True)
    assert scanned
    assert max(scanned) <= identifiers.MAX_IDENTIFIER_CHARS
    assert {"pars", "header", "sc.pp.neighbor"} <= set(words)  # short identifiers still read
    assert hostile.casefold() in words  # the long word is still a plain word


def _reference_headings(body: str) -> list[str]:
    return [m.group(1) for m in _REFERENCE_HEADING.finditer(sketch._FENCE_RE.sub(" ", body))]


def test_headings_of_the_real_corpus_sketch_as_the_backtracking_pattern_read_them() -> None:
    for skill_md in sorted(real_skills_root().rglob("SKILL.md")):
        body = skill_md.read_text(encoding="utf-8", errors="replace")
        text = sketch._FENCE_RE.sub(" ", body)
        ours = [sketch._heading_title(m.group(1)) for m in sketch._HEADING_RE.finditer(text)]
        assert ours == _reference_headings(body), skill_md


@pytest.mark.parametrize("mode", SKETCH_MODES)
def test_a_heading_line_of_many_blanks_or_hashes_is_sketched_in_one_pass(mode: str) -> None:
    # Pushed by anyone with a library: the backtracking pattern took 24 s for 2,000 blanks.
    body = "# a" + " " * 50_000 + "x\n\n## b" + " " * 20_000 + "#" * 6 + " " * 9 + "\n\nSome words here.\n"
    text = make_sketch(body, mode=mode)  # type: ignore[arg-type]
    if mode != "none":
        assert text.startswith("a x; b")
    assert len(text) <= MAX_SKETCH_CHARS
