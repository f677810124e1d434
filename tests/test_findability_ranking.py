"""Findability at scale (issue 19): body sketches in the manifest, BM25F over them, the
conversation as the query, a budget that follows the model, and the ranker seam."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from s3skills import S3Backend
from s3skills.aio import run_sync
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.middleware.skills_prompt import budget_for, ranked_for, recent_requests
from s3skills.skills import LexicalRanker, Ranker, SkillInfo, SkillMetadata
from s3skills.skills.format import render
from s3skills.skills.index.manifest import decode_manifest
from s3skills.skills.ranking.matching import rank
from s3skills.skills.ranking.sketch import MAX_SKETCH_CHARS, make_sketch
from s3skills.storage import RequestCounter
from s3skills.testing import MemoryObjectStore
from s3skills.testing.scripted import ScriptedChatModel

SEEDS = KeyLayout.seeds()
USER = "ana"
PREFIX = f"{USER}/skills/"


def skill_md(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n{body}\n"


def info(skill_id: str, description: str, sketch: str = "") -> SkillInfo:
    leaf = skill_id.rsplit("/", 1)[-1]
    return SkillInfo(skill_id, SkillMetadata(name=leaf, description=description), etag=f"e-{skill_id}", sketch=sketch)


# -- the sketch ---------------------------------------------------------------------------------


def test_a_sketch_lists_the_headings_then_the_most_frequent_words() -> None:
    body = "# Invoices\n\n## Reminders\n\nSend a reminder when a payment is late. A late payment gets a reminder."
    sketch = make_sketch(body)
    assert sketch.startswith("Invoices; Reminders | ")
    words = sketch.split(" | ", 1)[1].split()
    assert words[:4] == ["reminder", "payment", "late", "send"]  # twice each, in order of appearance, then once
    assert "reminders" not in words  # a heading's words are not repeated
    assert "when" not in words
    assert "a" not in words


def test_a_sketch_leaves_out_fenced_code_and_never_passes_its_limit() -> None:
    body = "# Tool\n\n```python\nsecret_function_name()\n```\n\n" + " ".join(f"term{i}" for i in range(3000))
    sketch = make_sketch(body)
    assert "secret_function_name" not in sketch
    assert len(sketch) <= MAX_SKETCH_CHARS
    assert len(make_sketch(body, limit=100)) <= 100
    assert make_sketch("") == ""


def test_a_rebuilt_manifest_carries_the_sketch_of_each_body() -> None:
    store = MemoryObjectStore()
    short = "# Merging\n\nStick several PDFs together into one document."
    long_body = "# Big skill\n\n" + "Rotate sideways pages before printing.\n" * 400  # past the 8 KiB head
    store.put_object(f"{PREFIX}docs/pdf/SKILL.md", skill_md("pdf", "PDF tools.", short))
    store.put_object(f"{PREFIX}docs/big/SKILL.md", skill_md("big", "A big one.", long_body))
    backend = S3Backend("memory", user_id=USER, store=store, layout=SEEDS)
    skills = {s.id: s for s in backend.skills.index()}
    assert skills["docs/pdf"].sketch == make_sketch(short)
    assert skills["docs/big"].sketch.startswith("Big skill | rotate sideways pages")
    backend.skills.flush()  # the manifest the first index rebuilt is written after its answer
    manifest = json.loads(run_sync(store.aget(SEEDS.manifest_key(PREFIX))).data)
    assert manifest["skills"]["docs/pdf"]["sketch"] == make_sketch(short)
    # A second backend (a fresh process) reads the sketches from the manifest alone.
    again = S3Backend("memory", user_id=USER, store=store, layout=SEEDS)
    counter = RequestCounter()
    store.add_request_hook(counter)
    assert {s.id: s.sketch for s in again.skills.index()} == {sid: s.sketch for sid, s in skills.items()}
    assert counter.counts.get("GetObject", 0) + counter.counts.get("ListObjectsV2", 0) <= 2


@pytest.mark.parametrize("sketch", ["x" * (MAX_SKETCH_CHARS + 1), 42, ["a"]])
def test_a_manifest_entry_with_a_bad_sketch_is_dropped_or_the_manifest_rebuilt(sketch: object) -> None:
    key = f"{PREFIX}pdf/SKILL.md"
    entry = {"key": key, "etag": "e1", "size": 10, "metadata": {"name": "pdf", "description": "PDF."}}
    doc = {
        "schema": "s3skills.manifest/1",
        "prefix": PREFIX,
        "built_at": 1.0,
        "verified_at": None,
        "skills": {"pdf": {**entry, "sketch": sketch}, "ok": {**entry, "key": f"{PREFIX}ok/SKILL.md"}},
    }
    manifest = decode_manifest(json.dumps(doc).encode(), PREFIX, "user", max_entries=10)
    if not isinstance(sketch, str):  # not a string where a sketch is: refused before decoding, rebuilt
        assert manifest is None
        return
    assert manifest is not None
    assert set(manifest.entries) == {"ok"}
    assert manifest.dropped == 1


# -- ranking --------------------------------------------------------------------------------------


def test_a_word_only_the_body_uses_finds_the_skill() -> None:
    library = [
        info("docs/pdf", "Read and create PDF files.", sketch=make_sketch("## Merge\n\nStick several files together.")),
        info("docs/docx", "Read and create Word files.", sketch=make_sketch("## Comments\n\nReview a draft.")),
    ]
    assert [s.id for s, _ in rank("stick these together", library)] == ["docs/pdf"]
    without = [SkillInfo(s.id, s.metadata, etag=f"{s.etag}-old") for s in library]  # a manifest without sketches
    assert rank("stick these together", without) == []


def test_an_english_request_finds_a_spanish_skill_by_its_words() -> None:
    library = [
        info("escrituras/hipoteca", "Redacta escrituras de cancelación de hipotecas."),
        info("docs/pdf", "Read and create PDF files."),
    ]
    # English words only: "cancel" meets "cancelación" once both are stemmed; the PDF skill shares none.
    assert [s.id for s, _ in rank("cancel the mortgage", library)] == ["escrituras/hipoteca"]
    assert [s.id for s, _ in rank("I need to cancel a mortgage deed", library)] == ["escrituras/hipoteca"]


def test_earlier_turns_keep_a_follow_up_on_the_skill_of_the_thread() -> None:
    library = [
        info("documents/pdf", "Fill PDF forms, merge and split PDF files."),
        info("data/charts", "Plot charts of data: bars, lines, scatter plots."),
        info("writing/summarize", "Summarise long documents into key points."),
    ]
    turns = ["now the second one please", "fill in the pdf form from the bank"]
    assert ranked_for(turns, library, set())[0].id == "documents/pdf"
    assert ranked_for(turns[0], library, set())[0].id == "data/charts"  # no match: by id
    state = {"messages": [HumanMessage(turns[1]), AIMessage("done"), HumanMessage(turns[0])]}
    assert recent_requests(state) == turns


class ByDescriptionLength:
    """A ranker of the application's own: the longest description first (a stand-in for
    embeddings or a search service)."""

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        return sorted(((s, float(len(s.metadata.description))) for s in skills), key=lambda p: -p[1])


def test_an_application_ranker_orders_the_prompt_index() -> None:
    assert isinstance(ByDescriptionLength(), Ranker)
    assert isinstance(LexicalRanker(), Ranker)
    store = MemoryObjectStore()
    for i in range(120):
        description = f"Skill number {i:03d} " + "word " * ((i * 37) % 120)  # lengths all differ
        store.put_object(f"{PREFIX}apps/s{i:03d}/SKILL.md", skill_md(f"s{i:03d}", description, "Body."))
    backend = S3Backend("memory", user_id=USER, store=store, layout=SEEDS)
    middleware = SkillsPromptMiddleware(backend, budget_chars=2000, ranker=ByDescriptionLength())
    prompt = run_sync(middleware.build_prompt({"messages": [HumanMessage("skill number 3")]}))
    first = prompt.index("<name>", prompt.index("<available_skills>"))
    longest = max(range(120), key=lambda i: (i * 37) % 120)
    assert prompt[first:].startswith(f"<name>s{longest:03d}</name>")


# -- the budget ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "budget"),
    [
        (None, 6000),
        ({}, 6000),
        ({"max_input_tokens": 32_000}, 6000),  # 1 % is 1,280 characters: never below today's 6,000
        ({"max_input_tokens": 200_000}, 8000),
        ({"max_input_tokens": 1_000_000}, 40_000),
    ],
)
def test_the_index_budget_is_a_share_of_the_models_context_window(profile: Any, budget: int) -> None:
    model = ScriptedChatModel(steps=[], profile=profile)
    assert budget_for(model) == budget


def test_under_pressure_lower_ranked_skills_lose_their_descriptions_before_any_is_left_out() -> None:
    library = [info(f"cat{i % 5}/skill{i:04d}", f"Does task {i} " + "carefully " * 12) for i in range(3000)]
    small, large = (render.format_ranked(library, budget) for budget in (6000, 40_000))
    assert len(small) <= 6000
    assert len(large) <= 40_000
    for text in (small, large):
        described = text.split("Also relevant (ids only):")[0].count("<description>")
        named = text.split("Also relevant (ids only):")[1].split(".\n")[0].count(",") + 1
        left = int(text.rsplit("\n", 1)[1].split(" more skills")[0])
        assert described > 0
        assert named > described
        assert described + named + left == 3000  # every skill is shown or counted
    assert large.count("<description>") > 4 * small.count("<description>")
    assert "skill0000" in small
    assert "<name>skill0000</name>" in small


def test_a_model_call_costs_no_more_requests_than_before_at_a_thousand_skills() -> None:
    store = MemoryObjectStore()
    for i in range(1000):
        store.put_object(f"{PREFIX}apps/a{i:04d}/SKILL.md", skill_md(f"a{i:04d}", f"App {i} tasks.", "# Use\n\nDo it."))
    backend = S3Backend("memory", user_id=USER, store=store, layout=SEEDS)
    middleware = SkillsPromptMiddleware(backend)
    run_sync(middleware.build_prompt({"messages": [HumanMessage("hello")]}))
    backend.skills.flush()  # the cold index's manifest is written in the background: not a model call's cost
    counter = RequestCounter()
    store.add_request_hook(counter)
    for request in ("app 17 tasks", "do it for app 400", "something else"):
        run_sync(middleware.build_prompt({"messages": [HumanMessage(request)]}))
    assert counter.total <= 3  # at most the manifest's conditional GET per call, as before sketches
    assert set(counter.counts) <= {"GetObject"}


def test_the_library_writers_and_push_record_the_sketch_of_what_they_write(tmp_path: Any) -> None:
    from s3skills.transfer import push_tree

    store = MemoryObjectStore()
    store.put_object(f"{PREFIX}docs/old/SKILL.md", skill_md("old", "Old one.", "# Old\n\nNothing new."))
    backend = S3Backend("memory", user_id=USER, store=store, layout=SEEDS)
    backend.skills.index()  # the manifest now exists; writers update it in place
    created = "# Reminders\n\nChase late payments politely."
    backend.skills.create("docs/invoices", {"SKILL.md": skill_md("invoices", "Invoices.", created).encode()})
    folder = tmp_path / "docs" / "maps"
    folder.mkdir(parents=True)
    pushed = "# Geocoding\n\nTurn street addresses into coordinates."
    (folder / "SKILL.md").write_text(skill_md("maps", "Maps.", pushed), encoding="utf-8")
    push_tree(store, tmp_path, PREFIX)
    manifest = json.loads(run_sync(store.aget(SEEDS.manifest_key(PREFIX))).data)["skills"]
    assert manifest["docs/invoices"]["sketch"] == make_sketch(created)
    assert manifest["docs/maps"]["sketch"] == make_sketch(pushed)
    assert manifest["docs/old"]["sketch"] == make_sketch("# Old\n\nNothing new.")


# -- per-call CPU: the merged index is reused while no library changed --------------------------


def test_an_unchanged_library_is_merged_once_and_a_changed_skill_shows_on_the_next_refresh() -> None:
    from s3skills.config import Config
    from s3skills.skills.library import SkillLibrary
    from s3skills.tenancy import Tenant

    store = MemoryObjectStore()
    store.put_object("org/skills/shared/tool/SKILL.md", skill_md("tool", "The shared tool.", "Use it."))
    for name in ("alpha", "beta"):
        store.put_object(f"{PREFIX}docs/{name}/SKILL.md", skill_md(name, f"The {name} skill.", "Steps."))
    store.put_object(f"{PREFIX}docs/off/SKILL.md", "---\nname: off\ndescription: Hidden.\nenabled: false\n---\nx\n")
    library = SkillLibrary(store, Config(layout=SEEDS, shared_library="org"), tenant=lambda: Tenant(user_id=USER))
    first = run_sync(library.aindex(refresh=True))
    second = run_sync(library.aindex(refresh=True))
    assert [s.id for s in first] == ["docs/alpha", "docs/beta", "shared/tool"]
    # The same verified library: the same SkillInfo objects, in a list of the caller's own.
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert first is not second
    first.clear()
    assert [s.id for s in run_sync(library.aindex())] == ["docs/alpha", "docs/beta", "shared/tool"]
    assert [s.id for s in run_sync(library.aindex(include_disabled=True))] == [
        "docs/alpha",
        "docs/beta",
        "docs/off",
        "shared/tool",
    ]
    assert [s.id for s in run_sync(library.aindex("shared"))] == ["shared/tool"]
    # A SKILL.md rewritten in the store shows as soon as the catalog has verified it again.
    store.put_object(f"{PREFIX}docs/beta/SKILL.md", skill_md("beta", "The new beta.", "Steps."))
    store.put_object(f"{PREFIX}docs/gamma/SKILL.md", skill_md("gamma", "A new one.", "Steps."))
    after = {s.id: s.metadata.description for s in run_sync(library.aindex(refresh=True))}
    assert after == {
        "docs/alpha": "The alpha skill.",
        "docs/beta": "The new beta.",
        "docs/gamma": "A new one.",
        "shared/tool": "The shared tool.",
    }
    # The writers update the catalog's entries in place: the next call (no refresh) sees it.
    assert run_sync(library.aset_enabled("docs/alpha", False))
    run_sync(library.acreate("docs/delta", {"SKILL.md": skill_md("delta", "Made here.", "Steps.").encode()}))
    assert [s.id for s in run_sync(library.aindex())] == ["docs/beta", "docs/delta", "docs/gamma", "shared/tool"]


# -- priors: the skills a user uses, the categories the thread has loaded ------------------------


def _two_sheet_skills(store: MemoryObjectStore) -> None:
    store.put_object(f"{PREFIX}documents/xlsx/SKILL.md", skill_md("xlsx", "Fix totals in spreadsheets.", "Excel."))
    store.put_object(f"{PREFIX}finance/ledger/SKILL.md", skill_md("ledger", "Fix totals in ledgers.", "Books."))
    store.put_object(f"{PREFIX}personal/recipes/SKILL.md", skill_md("recipes", "Cook dinner.", "Food."))
    # More than the index budget holds, so the index is in ranked order (not by id).
    for i in range(120):
        long = f"Automate App{i:03d} through its connector: boards, contacts and deals, one call at a time."
        store.put_object(f"{PREFIX}apps/app{i:03d}/SKILL.md", skill_md(f"app{i:03d}", long, "Connector."))


def _index_order(prompt: str) -> list[str]:
    index = prompt.split("### Loaded skills")[0]
    return sorted(
        (sid for sid in ("documents/xlsx", "finance/ledger", "personal/recipes") if sid in index), key=index.index
    )


def test_the_skill_a_user_uses_ranks_above_an_equal_match_and_only_for_that_user() -> None:
    from s3skills.skills.usage import log_usage, reset_usage

    store = MemoryObjectStore()
    _two_sheet_skills(store)
    middleware = SkillsPromptMiddleware(S3Backend("memory", user_id=USER, store=store, layout=SEEDS))
    state = {"messages": [HumanMessage("the totals are wrong again")]}
    reset_usage()
    try:
        before = run_sync(middleware.build_prompt(state))
        assert _index_order(before) == ["documents/xlsx", "finance/ledger", "personal/recipes"]
        for _ in range(3):
            log_usage("skill_load", skill="finance/ledger", user="bob", thread="t", duration_ms=1, outcome="ok")
        assert run_sync(middleware.build_prompt(state)) == before  # another user's habits change nothing
        log_usage("skill_load", skill="finance/ledger", user=USER, thread="t", duration_ms=1, outcome="error")
        assert run_sync(middleware.build_prompt(state)) == before  # a failed load is no use
        log_usage("skill_load", skill="finance/ledger", user=USER, thread="t", duration_ms=1, outcome="ok")
        assert _index_order(run_sync(middleware.build_prompt(state)))[:2] == ["finance/ledger", "documents/xlsx"]
        # A prior reorders matches; it never brings a skill that does not match ahead of one that does.
        for _ in range(50):
            log_usage("skill_load", skill="personal/recipes", user=USER, thread="t", duration_ms=1, outcome="ok")
        assert _index_order(run_sync(middleware.build_prompt(state)))[:2] == ["finance/ledger", "documents/xlsx"]
    finally:
        reset_usage()


def test_a_skill_in_the_category_the_thread_loaded_ranks_above_an_equal_match() -> None:
    from s3skills.skills.ranking.rankers import prior_for

    library = [
        info("documents/xlsx", "Fix totals in spreadsheets."),
        info("finance/ledger", "Fix totals in ledgers."),
        info("finance/invoices", "Send invoices."),
    ]
    assert [s.id for s in ranked_for("fix the totals", library, set())][:2] == ["documents/xlsx", "finance/ledger"]
    prior = prior_for({}, ["finance/invoices"])
    ranked = ranked_for("fix the totals", library, {"finance/invoices"}, prior=prior)
    assert [s.id for s in ranked] == ["finance/ledger", "documents/xlsx"]


def test_the_usage_prior_forgets_uses_that_left_the_log_window() -> None:
    from s3skills.skills.usage import _Recorder

    recorder = _Recorder(capacity=2)
    for skill in ("a/one", "a/one", "b/two"):
        recorder.add({"skill": skill, "user_id": "ana", "outcome": "ok"})
    assert dict(recorder.uses["ana"]) == {"a/one": 1, "b/two": 1}
    recorder.add({"skill": "b/two", "user_id": "ana", "outcome": "refused"})
    assert dict(recorder.uses["ana"]) == {"b/two": 1}


def test_list_skills_puts_the_match_a_user_uses_first_and_pages_stay_complete() -> None:
    from s3skills.skills.usage import log_usage, reset_usage
    from s3skills.tools import skill_tools

    store = MemoryObjectStore()
    _two_sheet_skills(store)
    backend = S3Backend("memory", user_id=USER, store=store, layout=SEEDS)
    list_tool = next(t for t in skill_tools(backend, page_size=1) if t.name == "list_skills")

    everything = sorted(s.id for s in backend.skills.index())
    assert len(everything) == 123

    def first_two() -> list[str]:
        """Every page, by the cursor each page gives: each skill exactly once; the first two ids."""
        listed: list[str] = []
        cursor: str | None = None
        for _ in range(len(everything) + 1):
            page = str(
                run_sync(list_tool.ainvoke({"query": "the totals are wrong", **({"cursor": cursor} if cursor else {})}))
            )
            assert page.startswith(f"Skills {len(listed) + 1}-{len(listed) + 1} of {len(everything)}"), page
            listed += re.findall(r"^- ([^\s:\[]+)", page, flags=re.MULTILINE)
            more = re.search(r"cursor='(\d+)' for the next page\.$", page)
            if more is None:
                break
            cursor = more.group(1)
        assert sorted(listed) == everything  # complete: every skill, none twice
        return listed[:2]

    reset_usage()
    try:
        assert first_two() == ["documents/xlsx", "finance/ledger"]  # a tie: by id
        log_usage("skill_load", skill="finance/ledger", user="bob", thread="t", duration_ms=1, outcome="ok")
        assert first_two() == ["documents/xlsx", "finance/ledger"]  # another user's habits change nothing
        log_usage("skill_load", skill="finance/ledger", user=USER, thread="t", duration_ms=1, outcome="ok")
        assert first_two() == ["finance/ledger", "documents/xlsx"]
    finally:
        reset_usage()
