"""Ranking for long, pasted and multi-turn input (issue 35), on small in-memory libraries.

Each behaviour is pinned both ways: switched on it ranks the right skill first, switched off
(the constant or the option at its "off" value) the old ranking comes back, so a test fails
when the behaviour is lost: query-only stop words and code keywords, pasted code counting
less than prose, path words weighted by their rarity across ids, the body sketch damped
for long requests (hub control), the latest turn of a conversation over earlier ones,
chat words weighed by their frequency in English (`background`), and a long paste scaled
to the prose it comes with (`query.CODE_SHARE`).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from s3skills.skills import SkillInfo, SkillMetadata
from s3skills.skills.ranking import background, matching, query, rankers
from s3skills.skills.ranking.matching import Bm25Index
from s3skills.skills.ranking.query import code_line, query_parts


def skill(skill_id: str, description: str, sketch: str = "", category: str | None = None) -> SkillInfo:
    leaf = skill_id.rsplit("/", 1)[-1]
    meta = SkillMetadata(name=leaf, description=description, category=category)
    return SkillInfo(skill_id, meta, etag=f"e-{skill_id}", sketch=sketch)


def first(index: Bm25Index, text: str) -> str:
    ranked = index.rank(text)
    assert ranked, text
    return ranked[0][0].id


def test_a_fenced_block_and_indented_or_punctuated_lines_count_as_code_and_prose_stays_whole() -> None:
    text = "plot the survival curve\n```python\nkm = KaplanMeier()\n```\n    x = 1\nthen export it"
    parts = query_parts(text)
    assert [w for _, w in parts] == [1.0, query.CODE_WEIGHT, 1.0]
    assert "KaplanMeier" in parts[1][0]
    assert "x = 1" in parts[1][0]
    assert code_line('File "/app/main.py", line 12, in <module>') is True
    assert code_line("I need a chart of monthly revenue") is False
    assert query_parts("one line, no code") == [("one line, no code", 1.0)]


def test_an_unclosed_fence_runs_to_the_end_of_the_request() -> None:
    parts = query_parts("fix this\n```\nTraceback (most recent call last):\n  boom")
    assert parts[-1][1] == query.CODE_WEIGHT
    assert "boom" in parts[-1][0]


def test_words_only_in_pasted_code_count_less_than_the_words_the_user_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    library = [
        skill("tools/survival", "survival analysis"),
        skill("tools/deploy", "deployment pipelines"),
        skill("tools/other", "something unrelated"),
    ]
    request = "I need survival analysis help\n```\ndeploy pipelines deploy pipelines\n```"
    assert first(Bm25Index(library), request) == "tools/survival"
    monkeypatch.setattr(query, "CODE_WEIGHT", 1.0)  # off: code counts as much as prose
    scores = {s.id: v for s, v in Bm25Index(library).rank(request)}
    assert scores["tools/deploy"] >= scores["tools/survival"]


def test_a_request_drops_chat_and_code_keywords_that_a_skill_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    library = [
        skill("py/returns", "what a function should return", sketch="return none null self def"),
        skill("docs/markdown", "convert markdown notes"),
        skill("misc/filler", "nothing here"),
    ]
    request = "def convert(self): return None  # markdown notes, been there"
    assert first(Bm25Index(library), request) == "docs/markdown"
    assert Bm25Index(library).explain(request, "py/returns") == {}
    monkeypatch.setattr(matching, "QUERY_STOPWORDS", frozenset())  # off
    assert Bm25Index(library).explain(request, "py/returns") != {}


def test_a_folder_word_shared_by_many_ids_is_little_evidence_for_any_of_them() -> None:
    library = [skill(f"scientific-skills/tool{n}", f"handles format{n} files") for n in range(12)]
    library.append(skill("viz/figures", "draw a scientific figure from a dataframe"))
    library.append(skill("misc/notes", "take notes"))
    request = "scientific figure"
    rare = Bm25Index(library, path_words_rare=1)
    assert rare.explain(request, "scientific-skills/tool3") == {"name": ["scientific"]}
    scores = {s.id: v for s, v in rare.rank(request)}
    assert scores["viz/figures"] > 2 * scores["scientific-skills/tool3"]
    whole = {s.id: v for s, v in Bm25Index(library, path_words_rare=0).rank(request)}  # off
    assert whole["scientific-skills/tool3"] > scores["scientific-skills/tool3"]


def test_a_path_word_that_is_also_the_skills_own_name_keeps_its_full_weight() -> None:
    library = [skill(f"pdf/tool{n}", "does things") for n in range(10)] + [skill("pdf/pdf", "does things")]
    index = Bm25Index(library, path_words_rare=1)
    scores = {s.id: v for s, v in index.rank("pdf")}
    assert scores["pdf/pdf"] > scores["pdf/tool0"]


def _hub_library() -> list[SkillInfo]:
    chatter = "week manager team deadline friday meeting morning standup release colleague monday call"
    return [
        skill("work/daily-prep", "prepare your day", sketch=chatter),
        skill("bio/genbank", "parse genbank files and fasta records", sketch="genbank fasta records parse"),
        *[skill(f"misc/s{n}", f"topic{n} helper", sketch=f"topic{n}") for n in range(8)],
    ]


LONG_REQUEST = (
    "Hi, I've been on this all week, my manager wants it by friday and the team has a release on monday, "
    "I have a call in the morning with a colleague after standup and a meeting before the deadline. "
    "Anyway: parse genbank files into fasta records"
)


def test_a_long_request_does_not_let_a_chatty_body_outvote_the_skill_its_description_names() -> None:
    library = _hub_library()
    assert first(Bm25Index(library, long_query_terms=4), LONG_REQUEST) == "bio/genbank"
    assert first(Bm25Index(library, long_query_terms=0), LONG_REQUEST) == "work/daily-prep"  # off


def test_a_short_request_is_scored_as_before_by_the_long_request_damping() -> None:
    library = _hub_library()
    short = "parse genbank files into fasta records"
    damped = [(s.id, round(v, 9)) for s, v in Bm25Index(library, long_query_terms=6).rank(short)]
    plain = [(s.id, round(v, 9)) for s, v in Bm25Index(library, long_query_terms=0).rank(short)]
    assert damped == plain


def test_the_latest_turn_outweighs_an_earlier_turn_about_something_else(monkeypatch: pytest.MonkeyPatch) -> None:
    library = [
        skill("git/rename-branch", "rename a git branch"),
        skill("docs/docx", "convert markdown to a word docx document"),
        *[skill(f"misc/s{n}", f"topic{n}") for n in range(6)],
    ]
    turns = [
        "turn my markdown notes into a word docx document",
        "how do I rename a git branch I already pushed, git branch rename",
    ]
    scores, _ = rankers.conversation_scores(turns, library)
    assert max(scores, key=lambda k: scores[k]) == "docs/docx"
    assert scores["git/rename-branch"] == pytest.approx(
        rankers.EARLIER_WEIGHT * Bm25Index(library).rank(turns[1])[0][1]
    )
    monkeypatch.setattr(rankers, "EARLIER_WEIGHT", 0.0)  # off: earlier turns do not count
    scores, _ = rankers.conversation_scores(turns, library)
    assert "git/rename-branch" not in scores


# Background language: chat words weigh less (s3skills.skills.ranking.background).

PREAMBLE = (
    "Hi! I've been working on this all week and my manager wants it by Friday, so I'm a bit stressed. "
    "I have a meeting tomorrow morning with my colleague before the standup.\n\n"
)


def test_a_chatty_preamble_does_not_change_the_top_result_and_does_without_background_weighting() -> None:
    library = _hub_library()
    request = "parse genbank files into fasta records"
    assert first(Bm25Index(library), request) == "bio/genbank"
    assert first(Bm25Index(library, background=3000), PREAMBLE + request) == "bio/genbank"
    assert first(Bm25Index(library, background=0), PREAMBLE + request) == "work/daily-prep"  # off


def test_a_word_common_in_english_but_rare_among_skills_weighs_less_and_a_domain_word_weighs_whole() -> None:
    assert background.has_background()
    # "week": in 1 skill of 10, and about 1 word in 3,000 of English: little evidence.
    assert 0 < background.specificity_weight("week", 1, 10, 3000) < 0.5
    # "genbank" is not in the English list; "files" is held by as many of these skills as needed.
    assert background.specificity_weight("genbank", 1, 10, 3000) == 1.0
    assert background.specificity_weight("files", 5, 10, 3000) == 1.0
    # The more skills hold a word, the more it counts; off at 0.
    assert background.specificity_weight("week", 2, 10, 3000) > background.specificity_weight("week", 1, 10, 3000)
    assert background.specificity_weight("week", 1, 10, 0) == 1.0
    assert background.english_frequency("week") > background.english_frequency("genbank") == 0.0


def test_past_the_reference_size_a_word_is_judged_by_how_many_skills_hold_it_not_by_their_share() -> None:
    # A word held by 5 skills is as much evidence in a library of 10,000 as in one of 670: as a
    # share of 10,000 every topical word would look like chat (the synthetic bench lost 10 points).
    reference = background.REFERENCE_SKILLS
    at_reference = background.specificity_weight("meeting", 5, reference, 3000)
    assert 0 < at_reference < 1
    assert background.specificity_weight("meeting", 5, 10_000, 3000) == at_reference
    assert background.specificity_weight("meeting", 5, 100, 3000) > at_reference  # a share below it
    assert background.specificity_weight("meeting", 0, 0, 3000) == 0.0  # no skill, no division by zero


def test_without_wordfreq_every_word_counts_whole_and_ranking_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    library = _hub_library()
    off = [(s.id, round(v, 9)) for s, v in Bm25Index(library, background=0).rank(PREAMBLE + "parse genbank")]
    monkeypatch.setattr(background.importlib.util, "find_spec", lambda name: None)
    background._frequencies.cache_clear()
    try:
        assert not background.has_background()
        assert background.specificity_weight("week", 1, 10, 3000) == 1.0
        absent = [(s.id, round(v, 9)) for s, v in Bm25Index(library, background=3000).rank(PREAMBLE + "parse genbank")]
        assert absent == off
    finally:
        background._frequencies.cache_clear()


UTILITY_CODE = """Here is my helper file:

```javascript
export function debounce(fn, wait = 200) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), wait); };
}
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export function groupBy(list, keyOf) {
  const out = {};
  for (const item of list) { (out[keyOf(item)] ||= []).push(item); }
  return out;
}
export function chunk(list, size) {
  const out = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}
```"""


def _code_hub_library() -> list[SkillInfo]:
    generic = "function export promise resolve settimeout cleartimeout timer list item push slice chunk size wait"
    return [
        skill("js/jest-testing", "write jest tests for javascript", sketch=generic),
        skill("bio/genbank", "parse genbank files and fasta records", sketch="genbank fasta records parse"),
        *[skill(f"misc/s{n}", f"topic{n} helper", sketch=f"topic{n}") for n in range(8)],
    ]


def test_a_skill_matching_only_generic_code_words_of_a_paste_is_not_first(monkeypatch: pytest.MonkeyPatch) -> None:
    library = _code_hub_library()
    request = "parse genbank files into fasta records\n\n" + UTILITY_CODE
    assert first(Bm25Index(library, background=0), request) == "bio/genbank"
    monkeypatch.setattr(query, "CODE_SHARE", 0.0)  # off: the paste's length counts in full
    assert first(Bm25Index(library, background=0), request) == "js/jest-testing"


def test_pasted_code_is_scaled_to_the_prose_only_when_it_outnumbers_it() -> None:
    prose = (["genbank", "fasta"], 1.0)
    few = (["genbank", "parser"], query.CODE_WEIGHT)  # "genbank" is prose: it keeps 1
    assert query.word_weights([prose, few]) == {"genbank": 1.0, "fasta": 1.0, "parser": query.CODE_WEIGHT}
    many = ([f"name{n}" for n in range(8)], query.CODE_WEIGHT)
    weights = query.word_weights([prose, many])
    assert weights["name0"] == pytest.approx(query.CODE_WEIGHT * (2 / 8) ** query.CODE_SHARE)
    assert weights["genbank"] == 1.0
    # A request that is only a paste keeps the code weight (nothing to scale it to).
    assert query.word_weights([many]) == dict.fromkeys(many[0], query.CODE_WEIGHT)
    assert query.word_weights([]) == {}


@pytest.mark.parametrize(
    "request_text",
    [
        "",
        "   \n\n  ",
        "```\n```",
        "the of and week friday",
        "Ünïcödé wörds ñ 日本語 ✓ \x00 \ud800",
        "```" + "x = 1\n" * 2000,
        PREAMBLE * 50,
    ],
    ids=[
        "empty",
        "blank",
        "empty-fence",
        "stop-and-chat-words",
        "unicode-and-lone-surrogate",
        "huge-paste",
        "long-chat",
    ],
)
def test_odd_requests_rank_without_raising(request_text: str) -> None:
    ranked = Bm25Index(_hub_library(), background=3000).rank(request_text)
    assert all(score > 0 for _, score in ranked)


def test_a_short_everyday_request_keeps_most_of_its_words_weight_and_a_long_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    library = [
        skill("personal/budget", "pay off credit card debt and plan a monthly budget"),
        *[skill(f"misc/s{n}", f"topic{n} helper") for n in range(8)],
    ]
    index = Bm25Index(library, background=3000)
    short = "which credit card should I pay off first"

    def weight_of(text: str, word: str) -> float:
        return next(w for term, _, w, _ in index._terms(text) if term == word)

    assert background.background_strength(4) == pytest.approx(4 / background.BACKGROUND_WORDS)
    assert background.background_strength(background.BACKGROUND_WORDS * 3) == 1.0
    graded = weight_of(short, "pay")
    assert weight_of(PREAMBLE * 2 + short, "pay") < graded < 1.0  # a long message: the whole weighting
    monkeypatch.setattr(background, "BACKGROUND_WORDS", 0)  # off: the whole weighting at any length
    assert weight_of(short, "pay") < graded


def test_the_english_list_is_read_once_on_first_use_and_importing_the_ranking_reads_nothing() -> None:
    code = (
        "import sys\n"
        "from s3skills.skills.ranking import background, matching\n"
        "assert 'msgpack' not in sys.modules and 'wordfreq' not in sys.modules\n"
        "assert background._frequencies.cache_info().currsize == 0\n"
        "for _ in range(3):\n"
        "    background.specificity_weight('week', 1, 10)\n"
        "info = background._frequencies.cache_info()\n"
        "assert (info.misses, info.hits) == (1, 2), info\n"
        "assert 'wordfreq' not in sys.modules  # its data file is read without importing the package\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
