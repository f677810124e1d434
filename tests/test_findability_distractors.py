"""The real-skills bench's blended distractors and their calibration (bench/, issue 35).

A blended distractor is made of several real skills' texts so that it competes with targets
as often as a real skill does, without carrying a large share of any one real skill: these
tests pin what the construction promises (the same library for a seed, clauses of bounded
length in rotation, each donor at most its share, valid and unique names, frontmatter within
the limits, emoji intact) and the arithmetic of the calibration that chose it.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import findability_calibrate as calibrate
import findability_distractors as distractors

from s3skills.aio import run_sync
from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.skills import InvalidSkill, parse_skill_md, validate_skill_md
from s3skills.testing import MemoryObjectStore
from s3skills.testing.corpus import real_repository


def _skill(name: str, description: str, body: str) -> str:
    return distractors.skill_md(name, description, body)


def _donor(tag: str, words: int) -> str:
    """A description whose every word names its donor (`a0 a1 ... a17.`), in clauses of 5."""
    parts = [f"{tag}{n}" + ("," if n % 5 == 4 else "") for n in range(words)]
    return " ".join(parts) + "."


def _library(skills: list[tuple[str, str]], count: int, seed: int, **options: object) -> dict[str, str]:
    store = MemoryObjectStore("bench")
    distractors.put_blended_distractors(store, skills, count, random.Random(seed), **options)  # type: ignore[arg-type]
    return {key: run_sync(store.aget(key)).data.decode("utf-8") for key in store.keys()}


SMALL = [
    ("bio/genbank", _skill("genbank", "Parse GenBank files, extract features. Write FASTA records.", "## Parse\nx")),
    ("bio/blast", _skill("blast", "Run BLAST searches against NCBI. Read the hits, rank them.", "## Run\ny")),
    ("bio/tree", _skill("tree", "Build phylogenetic trees with IQ-TREE, bootstrap support.", "## Trees\nz")),
    ("ops/terraform", _skill("terraform", "Write Terraform modules. Plan and apply changes.", "## Modules\nhcl")),
    ("ops/packer", _skill("packer", "Build AMIs with Packer, from HCL templates.", "## Build\npacker")),
]


def test_the_same_seed_builds_the_same_library_and_another_seed_another() -> None:
    first = _library(SMALL, 40, seed=5)
    assert first == _library(SMALL, 40, seed=5)
    assert first != _library(SMALL, 40, seed=6)


def test_each_donor_gives_clauses_in_rotation_and_at_most_its_share() -> None:
    donors = [_donor("a", 40), _donor("b", 25), _donor("c", 12)]
    for seed in range(20):
        text = distractors.blend_description(donors, random.Random(seed), chunk=4)
        words = text.rstrip(".").replace(",", "").split()
        tags = [w[0].lower() for w in words]
        for tag, source in zip("abc", donors, strict=True):
            assert tags.count(tag) <= -(-len(source.split()) // len(donors))  # ceil(own words / donors)
        runs = [len(list(group)) for group in _groups(tags)]
        assert max(runs) <= 4  # never more than one piece of `chunk` words from a donor at a time
        assert text[0].isupper()
        assert text.endswith(".")


def _groups(tags: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    for tag in tags:
        if out and out[-1][0] == tag:
            out[-1].append(tag)
        else:
            out.append([tag])
    return out


def test_a_blended_body_takes_sections_from_every_donor_within_their_share() -> None:
    bodies = ["## A1\nalpha\n\n## A2\nalpha two\n\n## A3\nalpha three", "## B1\nbeta\n\n## B2\nbeta two"]
    body = distractors.blend_body(bodies, random.Random(2))
    assert "## A" in body
    assert "## B" in body
    assert len(body) <= sum(len(b) for b in bodies)


def test_names_are_unique_valid_and_never_a_real_id_and_the_frontmatter_is_within_limits() -> None:
    long = " ".join(f"Clause {n} about genomes and their annotation pipelines," for n in range(80))
    skills = [*SMALL, ("bio/long-one", _skill("long-one", long[:1020] + ".", "## L\n" + "w " * 3000))]
    library = _library(skills, 60, seed=1, donors=3)
    assert len(library) == 60  # no two distractors got the same key
    real_ids = {sid for sid, _ in skills}
    for key, text in library.items():
        skill_id = key[len(distractors.PREFIX) : -len("/SKILL.md")]
        assert skill_id not in real_ids
        assert skill_id.split("/")[0] in {"bio", "ops"}
        problems = validate_skill_md(text, folder=skill_id.split("/")[1])
        assert [p.message for p in problems if p.level == "error" or p.fatal] == []
        meta = parse_skill_md(text, folder=skill_id.split("/")[1]).metadata
        assert len(meta.name) <= 64
        assert 0 < len(meta.description) <= 1024


def test_emoji_and_astral_characters_of_donors_survive_into_a_readable_library() -> None:
    skills = [
        ("fun/party", _skill("party", "Plan a party 🎉 with friends, send invites 💌. Track RSVPs.", "## 🎈 Plan\nok")),
        ("fun/math", _skill("math", "Typeset 𝔽 fields and 𝒪 notation, render proofs. Check them.", "## Proofs\nqed")),
    ]
    store = MemoryObjectStore("bench")
    distractors.put_blended_distractors(store, skills, 12, random.Random(4), donors=2)
    backend = S3Backend("bench", user_id="bench", store=store, layout=KeyLayout.seeds())
    library = run_sync(backend.skills.aindex())
    made = [s for s in library if s.id not in {"fun/party", "fun/math"}]
    assert len(made) == 12
    text = " ".join(s.metadata.description for s in made)
    assert {"🎉", "𝔽"} & set(text)  # astral characters came through whole
    text.encode("utf-8")  # no lone surrogate anywhere


def test_a_bad_blend_setting_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match="donors"):
        distractors.put_blended_distractors(MemoryObjectStore("bench"), SMALL, 1, random.Random(1), donors=0)
    with pytest.raises(ValueError, match="scope"):
        distractors.put_blended_distractors(MemoryObjectStore("bench"), SMALL, 1, random.Random(1), scope="all")
    with pytest.raises(ValueError, match="no skill"):
        distractors.put_blended_distractors(MemoryObjectStore("bench"), [("a/b", "no head")], 1, random.Random(1))
    for kind in ("blended:donors=x", "blended:colour=red", "real:donors=2", "synthetic"):
        with pytest.raises(ValueError, match="distractor"):
            distractors.maker(kind)
    assert distractors.maker("generated") is distractors.put_distractors


def test_on_a_real_repository_no_distractor_copies_much_of_any_one_real_description() -> None:
    repo = real_repository("getsentry/skills")  # without the corpus: skipped (tests/conftest.py)
    skills = [(f"sentry/{p.parent.name}", p.read_text(encoding="utf-8")) for p in sorted(repo.root.rglob("SKILL.md"))]
    real = {}
    for sid, text in skills:
        try:
            real[sid] = parse_skill_md(text, folder=sid.split("/")[1]).metadata.description
        except InvalidSkill:  # a skill push refuses: not a donor either
            continue
    library = _library(skills, 50, seed=7)
    chunk = distractors.BLEND_CHUNK
    for key, text in library.items():
        description = parse_skill_md(text, folder=key.split("/")[-2]).metadata.description
        for source in real.values():
            longest, copied = distractors.copied(description, source, run=4)
            assert longest <= chunk + 3, (key, source)  # one piece, plus words that happen to follow it
            share = -(-len(source.split()) // distractors.BLEND_DONORS)
            assert copied <= share + chunk, (key, source)  # its share, plus one coincidental piece


def test_the_calibration_counts_only_ranked_skills_above_the_target_per_skill_of_each_kind() -> None:
    real = {"r/t", "r/a", "r/b", "r/c", "r/d"}
    rows = [
        calibrate.outranked(["r/a", "d/x", "r/t", "d/y"], "r/t", {"r/a", "d/x", "r/t", "d/y"}, real),
        calibrate.outranked(["d/x", "r/b", "r/t"], "r/t", {"d/x", "r/t"}, real),  # r/b unmatched: not ranked
        calibrate.outranked(["r/t", "d/y"], "r/t", {"r/t", "d/y"}, real),
        calibrate.outranked(["r/a", "d/x"], "r/t", {"r/a", "d/x"}, real),  # the target matched nothing
    ]
    assert [(r["real_above"], r["distractors_above"], r["top1_kind"]) for r in rows] == [
        (1, 1, "real"),
        (0, 1, "distractor"),
        (0, 0, "target"),
        (1, 1, "real"),
    ]
    out = calibrate.calibration(rows, real_skills=5, distractors=2)
    assert out["real_rate_permille"] == pytest.approx(1000 * 2 / (4 * 4))
    assert out["distractor_rate_permille"] == pytest.approx(1000 * 3 / (4 * 2))
    assert out["ratio"] == pytest.approx(3.0)
    assert out["as_hard"] is False
    assert out["top1_ratio"] == pytest.approx((1 / 8) / (2 / 16))
    assert out["max_top1_distractor"] == {"skill": "d/x", "share": 25.0}
    assert out["max_top1_real"] == {"skill": "r/a", "share": 50.0}
    even = calibrate.calibration(rows[:1], real_skills=3, distractors=2)
    assert even["ratio"] == pytest.approx(1.0)
    assert even["as_hard"] is True


def test_the_bench_refuses_an_unknown_distractor_family_before_running() -> None:
    import findability_real

    with pytest.raises(SystemExit):
        findability_real.main(["--distractors", "blended:donors=zero", "--sizes", "corpus"])


@pytest.mark.slow
def test_a_run_with_distractors_saves_and_prints_how_hard_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import findability_real

    out = tmp_path / "results.json"
    assert findability_real.main(["--split", "dev", "--sizes", "800", "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["distractors"] == distractors.DEFAULT_KIND
    (run,) = report["runs"]
    found = run["calibration"]
    assert found["requests"] == run["requests"]
    assert found["real_skills"] == report["corpus_skills"]
    assert found["distractors"] == 800 - report["corpus_skills"]
    assert found["real_rate_permille"] > 0
    assert found["ratio"] is not None
    assert "how hard they are" in capsys.readouterr().out
