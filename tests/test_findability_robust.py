"""The real-skills bench's robustness variants and realistic distractors (bench/, issue 35).

The variants wrap a request the way real input does (a preamble, pasted code, an unrelated
thread before it); the dev and test splits take their fillers from separate pools, so a
ranker tuned on dev has never seen the test fillers. The realistic distractors are real
skills' texts re-combined within a repository: they must parse, keep their category, never
take a real id, and share their donors' words.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import findability_distractors
import findability_real
import findability_robust as robust

from s3skills.aio import run_sync
from s3skills.skills import parse_skill_md, validate_skill_md
from s3skills.testing import MemoryObjectStore

MESSAGES = (("user", "parse my genbank file into fasta"),)


@pytest.mark.parametrize("variant", robust.VARIANTS)
def test_every_variant_ends_with_the_users_request_and_keeps_its_words(variant: str) -> None:
    out = robust.conversation(variant, "r001", "dev", MESSAGES)
    assert out[-1][0] == "user"
    assert "parse my genbank file into fasta" in out[-1][1]
    assert robust.conversation(variant, "r001", "dev", MESSAGES) == out  # the same every run


def test_the_wrappings_add_a_preamble_a_paste_or_an_earlier_thread() -> None:
    preamble = robust.conversation("preamble", "r001", "dev", MESSAGES)
    assert len(preamble) == 1
    assert preamble[0][1].endswith("parse my genbank file into fasta")
    code = robust.conversation("code", "r001", "dev", MESSAGES)
    assert code[0][1].startswith("parse my genbank file into fasta")
    assert "```" in code[0][1]
    assert 100 <= len(re.findall(r"[A-Za-z_]\w*", code[0][1])) <= 140
    thread = robust.conversation("thread", "r001", "dev", MESSAGES)
    assert [role for role, _ in thread] == ["user", "assistant", "user", "assistant", "user"]
    assert robust.conversation("plain", "r001", "dev", MESSAGES) == list(MESSAGES)


def test_dev_and_test_requests_never_share_a_filler() -> None:
    for variant in ("preamble", "code", "thread"):
        dev = {str(robust.conversation(variant, f"r{n}", "dev", MESSAGES)[:-1]) for n in range(40)}
        dev |= {robust.conversation(variant, f"r{n}", "dev", MESSAGES)[-1][1] for n in range(40)}
        test = {str(robust.conversation(variant, f"r{n}", "test", MESSAGES)[:-1]) for n in range(40)}
        test |= {robust.conversation(variant, f"r{n}", "test", MESSAGES)[-1][1] for n in range(40)}
        assert len(dev) > 2
        assert not (dev & test) - {"[]", MESSAGES[0][1]}  # the request itself is shared, no filler


def test_a_conversation_keeps_its_own_turns_and_a_bad_one_is_refused() -> None:
    own = (("user", "earlier"), ("assistant", "answer"), ("user", "the need"))
    assert robust.conversation("preamble", "r", "test", own)[:2] == list(own[:2])
    assert robust.conversation("thread", "r", "test", own)[-3:] == list(own)
    with pytest.raises(ValueError, match="unknown variant"):
        robust.conversation("shouting", "r", "dev", MESSAGES)
    with pytest.raises(ValueError, match="ends with the user's"):
        robust.conversation("plain", "r", "dev", (("assistant", "hi"),))


def test_a_long_message_reaches_the_words_asked_and_ends_with_the_request() -> None:
    text = robust.long_message("find the root cause", "r1", "dev", 2000)
    assert 2000 <= len(text.split()) <= 2300
    assert text.endswith("find the root cause")


def _real(name: str, description: str, body: str) -> str:
    return findability_distractors.skill_md(name, description, body)


def test_realistic_distractors_recombine_real_skills_within_a_category_under_new_ids() -> None:
    skills = [
        (
            "bio/genbank",
            _real("genbank", "Parse GenBank files. Write FASTA records.", "## Parse\nSeqIO.\n## Write\nout"),
        ),
        ("bio/blast", _real("blast", "Run BLAST searches. Read the hits.", "## Run\nblastn.\n## Hits\nparse")),
        ("ops/terraform", _real("terraform", "Write Terraform modules. Plan and apply.", "## Modules\nhcl")),
        ("ops/packer", _real("packer", "Build AMIs with Packer. Use HCL templates.", "## Build\npacker build")),
    ]
    store = MemoryObjectStore("bench")
    findability_distractors.put_real_distractors(store, skills, 30, random.Random(3))
    keys = [k for k in store.keys() if k.endswith("/SKILL.md")]
    assert len(keys) == 30
    real_ids = {sid for sid, _ in skills}
    for key in keys:
        skill_id = key[len(findability_distractors.PREFIX) : -len("/SKILL.md")]
        category, leaf = skill_id.split("/")
        assert skill_id not in real_ids
        parsed = parse_skill_md(run_sync(store.aget(key)).data, folder=leaf)
        words = set(re.findall(r"[a-z]+", parsed.metadata.description.lower()))
        donors = {
            w for sid, text in skills if sid.startswith(category + "/") for w in re.findall(r"[a-z]+", text.lower())
        }
        assert words <= donors  # its words are its category's real skills' words
        assert category in {"bio", "ops"}


def test_a_realistic_distractor_keeps_a_valid_description_when_its_donors_are_long() -> None:
    long = " ".join(f"Sentence number {n} says a lot about genomes." for n in range(60))
    skills = [("bio/a", _real("a", long, "## A\nx")), ("bio/b", _real("b", long, "## B\ny"))]
    store = MemoryObjectStore("bench")
    findability_distractors.put_real_distractors(store, skills, 5, random.Random(1))
    for key in store.keys():
        problems = validate_skill_md(run_sync(store.aget(key)).data, folder=key.split("/")[-2])
        assert [p.message for p in problems if p.level == "error" or p.fatal] == []


def test_the_hub_is_the_skill_ranked_first_most_often_for_requests_aimed_elsewhere() -> None:
    samples = [
        {"skill": "a/x", "top1": "h/hub"},
        {"skill": "a/y", "top1": "h/hub"},
        {"skill": "a/z", "top1": "a/z"},
        {"skill": "h/hub", "top1": "h/hub"},  # its own request: not counted against others
        {"skill": "a/w", "top1": None},
    ]
    assert findability_real.hubs(samples) == {"skill": "h/hub", "count": 2, "share": 50.0}
    assert findability_real.hubs([{"skill": "a/x", "top1": "a/x"}]) == {"skill": None, "count": 0, "share": 0.0}


def test_the_traffic_set_loads_as_the_benchs_requests_with_its_conversations() -> None:
    _, requests = findability_real.load_traffic()
    threads = [r for r in requests if r.messages]
    assert threads
    for request in threads:
        assert request.conversation()[-1] == ("user", request.query)
        assert {role for role, _ in request.conversation()} <= {"user", "assistant"}
    single = next(r for r in requests if not r.messages)
    assert single.conversation() == (("user", single.query),)
