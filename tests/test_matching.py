"""Ranking skills for a request (BM25) and suggesting ids for unknown ones."""

from __future__ import annotations

from typing import Any

import pytest

from s3skills.skills import SkillInfo, SkillMetadata
from s3skills.skills.ranking.matching import language_of, rank, tokenize
from s3skills.skills.ranking.suggest import closest_ids


def skill(skill_id: str, description: str, **fields: Any) -> SkillInfo:
    leaf = skill_id.rsplit("/", 1)[-1]
    return SkillInfo(id=skill_id, metadata=SkillMetadata(name=leaf, description=description, **fields))


LIBRARY = [
    skill("escrituras/compraventa", "Redacta escrituras de compraventa de inmuebles."),
    skill("escrituras/hipoteca", "Redacta escrituras de préstamo hipotecario y su cancelación."),
    skill("escrituras/poderes", "Redacta poderes generales y especiales ante notario."),
    skill("contratos/arrendamiento", "Drafts rent and lease contracts for flats and offices.", tags=["alquiler"]),
    skill("contratos/laboral", "Contratos de trabajo: indefinidos, temporales y a tiempo parcial."),
    skill("pdf", "Fill, merge and split PDF files; extract text and tables."),
    skill("docx", "Create and edit Word documents with tracked changes."),
    skill("xlsx", "Spreadsheets: formulas, charts and data cleaning in Excel files."),
]


def ids(results: list[tuple[SkillInfo, float]]) -> list[str]:
    return [info.id for info, _ in results]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Compraventa", ["compraventa"]),
        ("ESCRITURAS de compraventa", ["escritur", "compravent"]),
        ("Cancelación HIPOTECARIA de la casa", ["cancel", "hipotecari", "cas"]),
        ("escrituras/compra-venta_rapida", ["escritura", "compra", "venta", "rapida"]),
        ("los inmuebles y el inmueble", ["inmuebl", "inmuebl"]),
        ("policies policy", ["polici", "polici"]),
        ("merging merged merges", ["merg", "merg", "merg"]),
        ("the PDF files of a user", ["pdf", "file", "user"]),
        ("", []),
    ],
)
def test_tokenize_folds_case_accents_and_stems_by_the_language_of_the_text(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("necesito una escritura de compraventa", "spanish"),
        ("cómo cancelo la hipoteca", "spanish"),
        ("merge the pdf files for me", "english"),
        ("pdf", "english"),
    ],
)
def test_language_of_reads_spanish_and_english(text: str, language: str) -> None:
    assert language_of(text) == language


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("necesito una escritura de compraventa", "escrituras/compraventa"),
        ("Compraventa", "escrituras/compraventa"),
        ("COMPRAVENTA DE INMUEBLES", "escrituras/compraventa"),
        ("cancelar una hipoteca", "escrituras/hipoteca"),
        ("préstamo hipotecario", "escrituras/hipoteca"),
        ("prestamo hipotecario", "escrituras/hipoteca"),
        ("rent contract", "contratos/arrendamiento"),
        ("contrato de alquiler", "contratos/arrendamiento"),
        ("contrato de trabajo temporal", "contratos/laboral"),
        ("merge two PDFs", "pdf"),
        ("word document", "docx"),
        ("excel formulas", "xlsx"),
        ("poder notarial", "escrituras/poderes"),
    ],
)
def test_rank_puts_the_right_skill_first(query: str, best: str) -> None:
    results = rank(query, LIBRARY)
    assert results
    assert ids(results)[0] == best


def test_rank_returns_only_positive_scores_best_first() -> None:
    results = rank("escritura", LIBRARY, limit=10)
    assert set(ids(results)) == {"escrituras/compraventa", "escrituras/hipoteca", "escrituras/poderes"}
    scores = [score for _, score in results]
    assert all(score > 0 for score in scores)
    assert scores == sorted(scores, reverse=True)


def test_rank_breaks_ties_by_id() -> None:
    twins = [skill("beta/same", "identical words"), skill("alfa/same", "identical words")]
    results = rank("identical", twins)
    assert ids(results) == ["alfa/same", "beta/same"]
    assert results[0][1] == results[1][1]


def test_rank_weighs_names_above_descriptions() -> None:
    library = [skill("tools/other", "Mentions invoices in passing."), skill("invoices", "Does accounting.")]
    assert ids(rank("invoice", library)) == ["invoices", "tools/other"]


@pytest.mark.parametrize("query", ["", "   ", "de la el the of", "zzzz qqqq"])
def test_rank_finds_nothing_for_empty_stopword_or_unknown_queries(query: str) -> None:
    assert rank(query, LIBRARY) == []


def test_rank_respects_limit() -> None:
    assert len(rank("escrituras contratos files", LIBRARY, limit=2)) == 2
    assert rank("escrituras", LIBRARY, limit=0) == []
    assert rank("escrituras", [], limit=5) == []


@pytest.mark.parametrize(
    ("name", "first"),
    [
        ("escrituras/compraventas", "escrituras/compraventa"),
        ("Escrituras/Compraventa", "escrituras/compraventa"),
        ("compraventa", "escrituras/compraventa"),
        ("escritura/hipotecas", "escrituras/hipoteca"),
        ("contratos/arrendamientos", "contratos/arrendamiento"),
        ("pfd", "pdf"),
        ("docs", "docx"),
    ],
)
def test_closest_ids_suggests_the_intended_skill(name: str, first: str) -> None:
    suggestions = closest_ids(name, LIBRARY)
    assert suggestions[0] == first
    assert len(suggestions) <= 3
    assert len(set(suggestions)) == len(suggestions)


def test_closest_ids_uses_related_words_when_the_spelling_is_far() -> None:
    assert "contratos/arrendamiento" in closest_ids("alquiler", LIBRARY)


def test_closest_ids_is_empty_when_nothing_is_close() -> None:
    assert closest_ids("quantum-chromodynamics", LIBRARY) == []


def test_closest_ids_respects_limit_and_deduplicates_ids() -> None:
    doubled = [*LIBRARY, skill("pdf", "A shared copy of the PDF skill.")]
    assert closest_ids("escrituras", doubled, limit=2) == closest_ids("escrituras", LIBRARY, limit=2)
    assert len(closest_ids("escrituras", LIBRARY, limit=2)) == 2
    assert closest_ids("pdf", doubled).count("pdf") == 1
