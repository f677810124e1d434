"""The traffic-shaped request set (bench/findability_real_data/traffic.json) and bench/request_shape.py.

The second request set exists because the first one is one-line requests in the skill's own
words; its value is in its shape, so the shape is pinned here and cannot silently rot: the
counts issue 35 asks for (requests, skills, repositories, near misses), the share of long,
pasted, multi-turn and product-worded requests, a spread of lengths, no request naming its
target (id, folder or frontmatter `name`) or copying 8 words of its SKILL.md, and the first
set's split rule, so a skill is on one side in both sets. The measures of request_shape
(words, lines, pasted code, turns, overlap, the least-overlapping half) are checked on
small hand-made inputs, and the reader on malformed files.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import request_shape as rs

from s3skills.testing.corpus import CorpusNotFound

BENCH = Path(rs.__file__).resolve().parent


@pytest.fixture(scope="module")
def traffic() -> tuple[dict[str, str], list[rs.Request]]:
    return rs.read_request_file(rs.TRAFFIC)


@pytest.fixture(scope="module")
def corpus() -> Any:
    import findability_real  # imports the agent stack: only for the tests that need the corpus

    try:
        repositories, _ = rs.read_request_file(rs.FIRST_SET)
        return findability_real.load_corpus(repositories)
    except CorpusNotFound:
        pytest.skip("the real-skills corpus is not beside the repository")


@pytest.fixture(scope="module")
def shapes(traffic: tuple[dict[str, str], list[rs.Request]]) -> dict[str, rs.Shape]:
    return {r.id: rs.shape(r.turns) for r in traffic[1]}


def _share(items: list[rs.Request], keep: Any) -> float:
    return sum(1 for r in items if keep(r)) / len(items)


def test_the_traffic_set_meets_the_issue_counts_across_all_seven_repositories(
    traffic: tuple[dict[str, str], list[rs.Request]],
) -> None:
    repositories, items = traffic
    first_repositories, _ = rs.read_request_file(rs.FIRST_SET)
    assert repositories == first_repositories  # the same categories, so the same skill ids
    hits = [r for r in items if r.target is not None]
    assert len(hits) >= 220
    assert len({r.target for r in hits}) >= 100
    assert {r.repo for r in hits} == set(repositories)
    assert sum(r.target is None for r in items) >= 65
    assert len({r.text.strip().casefold() for r in items}) == len(items)  # no request twice


def test_the_requests_are_long_pasted_multi_turn_and_in_the_users_words_as_often_as_the_issue_asks(
    traffic: tuple[dict[str, str], list[rs.Request]], shapes: dict[str, rs.Shape]
) -> None:
    _, items = traffic
    assert _share(items, lambda r: shapes[r.id].words > 40) >= 0.5
    assert _share(items, lambda r: shapes[r.id].multi_line and shapes[r.id].code) >= 0.4
    assert _share(items, lambda r: shapes[r.id].turns > 1) >= 0.2
    assert _share(items, lambda r: bool(r.own_words)) >= 0.2
    # a spread of lengths: some short, most 40-150 words, some big pastes
    words = [shapes[r.id].words for r in items]
    assert sum(w <= 20 for w in words) >= 5
    assert sum(40 < w <= 150 for w in words) >= len(words) / 2
    assert sum(w > 300 for w in words) >= 3
    # a conversation puts the need last: earlier turns alternate and the user speaks last
    for request in items:
        roles = [t.role for t in request.turns]
        assert roles[-1] == "user", request.id
        assert all(a != b for a, b in itertools.pairwise(roles)), request.id


def test_the_split_is_the_first_sets_rule_so_a_skill_is_on_one_side_in_both_sets(
    traffic: tuple[dict[str, str], list[rs.Request]],
) -> None:
    import hashlib

    _, items = traffic
    _, first = rs.read_request_file(rs.FIRST_SET)
    doc = json.loads(rs.TRAFFIC.read_text(encoding="utf-8"))
    assert doc["split_rule"] == json.loads(rs.FIRST_SET.read_text(encoding="utf-8"))["split_rule"]
    sides: dict[str, set[str]] = defaultdict(set)
    for request in [*items, *first]:
        sides[request.skill].add(request.split)
        digest = int(hashlib.sha256(f"findability-real:{request.skill}".encode()).hexdigest(), 16)
        assert request.split == ("dev" if digest % 2 == 0 else "test"), request.id
    assert all(len(found) == 1 for found in sides.values())
    targets = {r.target: r.split for r in items if r.target is not None}
    assert 0.4 <= Counter(targets.values())["dev"] / len(targets) <= 0.6


def test_every_target_and_near_miss_is_a_corpus_skill_from_its_repository_and_folder(
    traffic: tuple[dict[str, str], list[rs.Request]], corpus: Any
) -> None:
    repositories, items = traffic
    for request in items:
        assert request.skill in corpus.skills, f"{request.id}: {request.skill} is not a corpus skill"
        assert corpus.repo_of[request.skill] == request.repo, request.id
        assert corpus.folder_of[request.skill] == request.folder, request.id
        assert request.skill == f"{repositories[request.repo]}/{request.folder.rsplit('/', 1)[-1]}", request.id


def _has_run(words: list[str], run: list[str]) -> bool:
    return any(words[i : i + len(run)] == run for i in range(len(words) - len(run) + 1))


def test_no_request_names_its_target_by_id_folder_or_frontmatter_name(
    traffic: tuple[dict[str, str], list[rs.Request]], corpus: Any
) -> None:
    from s3skills.skills import parse_skill_md

    _, items = traffic
    named = []
    for request in items:
        if request.target is None:
            continue
        folder = request.folder.rsplit("/", 1)[-1]
        name = parse_skill_md(corpus.skills[request.target], folder=folder).metadata.name or folder
        words = rs.words_of(request.text)
        named += [(request.id, n) for n in {request.target, folder, name} if _has_run(words, rs.words_of(n))]
    assert named == []


def _runs(text: str, n: int = 8) -> set[tuple[str, ...]]:
    words = rs.words_of(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_no_request_copies_a_run_of_eight_words_or_takes_its_own_words_from_its_skill(
    traffic: tuple[dict[str, str], list[rs.Request]], corpus: Any
) -> None:
    _, items = traffic
    copied = [r.id for r in items if _runs(r.text) & _runs(corpus.skills[r.skill])]
    assert copied == []
    borrowed = [(r.id, w) for r in items for w in r.own_words if w.casefold() in corpus.skills[r.skill].casefold()]
    assert borrowed == []


def test_a_pasted_trace_or_config_is_code_and_a_bulleted_paragraph_is_not() -> None:
    trace = rs.shape(
        [
            rs.Turn(
                "user",
                "my job fails:\n\nTraceback (most recent call last):\n"
                "  File \"run.py\", line 3, in <module>\n    main()\nKeyError: 'id'",
            )
        ]
    )
    assert (trace.words, trace.lines, trace.turns, trace.fenced, trace.code) == (17, 5, 1, False, True)
    prose = rs.shape([rs.Turn("user", "three things:\n- faster builds\n- fewer flaky tests, please\n- docs")])
    assert prose.multi_line
    assert not prose.code
    fenced = rs.shape([rs.Turn("user", "this:\n```\nx\n```")])
    assert fenced.fenced
    assert fenced.code
    rows = rs.shape([rs.Turn("user", "csv:\nid,name,n\n1,ana,3\n2,rui,4")])
    assert rows.pasted
    chat = rs.shape([rs.Turn("user", "hi"), rs.Turn("assistant", "hello"), rs.Turn("user", "fix my build")])
    assert (chat.turns, chat.lines, chat.multi_line) == (3, 3, False)  # one-line turns are not multi-line


def test_overlap_weights_rare_words_and_finds_the_longest_shared_run() -> None:
    idf = rs.idf_table(["plot figure data", "plot chart data", "geospatial shapefile data"])
    assert idf["shapefile"] > idf["plot"] > idf["data"]
    found = rs.overlap("join my shapefile and plot it", "geo-tools", "read a shapefile, plot data", idf)
    assert found.share == pytest.approx(2 / 3)  # join, shapefile, plot: two are in the description
    # each word weighs ln((N+1)/(df+1)) + 1; "join" is in no description, so it weighs most
    shapefile, plot, join = math.log(4 / 2) + 1, math.log(4 / 3) + 1, math.log(4) + 1
    assert found.weighted == pytest.approx((shapefile + plot) / (shapefile + plot + join))
    assert rs.longest_common_run("please read a shapefile today", "read a shapefile, plot") == 3
    assert rs.overlap("the and of", "x", "y", idf) == rs.Overlap(0.0, 0.0, 0)


def test_the_least_overlapping_half_is_the_lower_half_by_weighted_overlap_then_id() -> None:
    overlaps = {
        "a": rs.Overlap(0.5, 0.9, 3),
        "b": rs.Overlap(0.1, 0.1, 1),
        "c": rs.Overlap(0.2, 0.1, 0),
        "d": rs.Overlap(0.3, 0.4, 2),
        "e": rs.Overlap(0.3, 0.8, 2),
    }
    assert rs.least_overlapping_half(overlaps) == ["c", "b"]
    assert rs.least_overlapping_half({}) == []


def test_the_summary_gives_the_median_quartiles_and_shares_of_a_set() -> None:
    shapes = [rs.Shape(w, 1, 1, 1, False, False) for w in (10, 20, 30, 50)]
    shapes.append(rs.Shape(400, 12, 6, 3, True, True))
    got = rs.summary(shapes, [rs.Overlap(0.5, 0.25, 2), rs.Overlap(0.0, 0.0, 4)])
    assert got["requests"] == 5
    assert got["words"] == {"median": 30, "q1": 20, "q3": 50, "max": 400}
    assert (got["over_40_words"], got["multi_line"], got["code"], got["multi_turn"]) == (40.0, 20.0, 20.0, 20.0)
    assert got["overlap_weighted"]["median"] == 0.125
    assert got["longest_run"] == {"median": 3, "max": 4}
    table = rs.table({"one": got, "two": rs.summary(shapes[:2])})
    assert table.splitlines()[0] == "| | one | two |"
    assert "| words, median [Q1–Q3] (max) | 30 [20–50] (400) | 15 [12.5–17.5] (20) |" in table


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "traffic.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda item: item.update(query=[]), "non-empty string or a list of turns"),
        (
            lambda item: item.update(query=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]),
            "ends with the user",
        ),
        (lambda item: item.update(query=[{"role": "system", "content": "a"}]), "a turn must be"),
        (lambda item: item.update(query=[{"role": "user", "content": "  "}]), "a turn must be"),
        (lambda item: item.update(query=[{"role": "user", "content": "a", "name": "x"}]), "a turn must be"),
        (lambda item: item.update(own_words=["Nowhere Inc"]), "not in the request's text"),
        (lambda item: item.update(own_words="Basil"), "must be a list"),
        (lambda item: item.update(split="train"), "split must be dev or test"),
        (lambda item: item.update(near_miss_of="k-dense/scanpy"), "not both"),
        (lambda item: item.update(target=3), "wrong type"),
        (lambda item: item.update(colour="red"), "fields must be"),
    ],
)
def test_a_malformed_traffic_file_is_refused_with_the_request_named(tmp_path: Path, change: Any, message: str) -> None:
    doc = json.loads(rs.TRAFFIC.read_text(encoding="utf-8"))
    item = next(i for i in doc["requests"] if i.get("target") and isinstance(i["query"], str))
    change(item)
    with pytest.raises(ValueError, match=message) as caught:
        rs.read_request_file(_write(tmp_path, doc))
    assert item["id"] in str(caught.value)


def test_a_request_id_used_twice_and_a_file_that_is_not_a_request_file_are_refused(tmp_path: Path) -> None:
    doc = json.loads(rs.TRAFFIC.read_text(encoding="utf-8"))
    doc["requests"][2]["id"] = doc["requests"][1]["id"]
    with pytest.raises(ValueError, match="used twice"):
        rs.read_request_file(_write(tmp_path, doc))
    bad_files: list[object] = [[1, 2], {"repositories": [], "requests": []}, {"requests": []}]
    for bad in bad_files:
        with pytest.raises(ValueError, match=r"not a request file|must be an object"):
            rs.read_request_file(_write(tmp_path, bad))
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not a request file"):
        rs.read_request_file(tmp_path / "broken.json")


def test_a_request_keeps_the_files_query_and_joins_its_turns() -> None:
    one = rs.Request("t1", "r", "f", "a/b", None, "dev", (rs.Turn("user", "hi"),))
    assert (one.query, one.text, one.skill) == ("hi", "hi", "a/b")
    chat = rs.Request(
        "t2", "r", "f", None, "a/c", "test", (rs.Turn("user", "x"), rs.Turn("assistant", "y"), rs.Turn("user", "z"))
    )
    assert chat.query == [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "y"},
        {"role": "user", "content": "z"},
    ]
    assert (chat.text, chat.skill) == ("x\n\ny\n\nz", "a/c")


@pytest.mark.slow
def test_the_cli_prints_the_shape_table_of_both_sets_side_by_side() -> None:
    try:
        from s3skills.testing.corpus import find_corpus_archive

        find_corpus_archive()
    except CorpusNotFound:
        pytest.skip("the real-skills corpus is not beside the repository")
    done = subprocess.run(
        [sys.executable, str(BENCH / "request_shape.py")], capture_output=True, text=True, check=True, timeout=300
    )
    header = done.stdout.splitlines()[0]
    assert header.startswith("| | requests.json (all) | requests.json, least-overlapping half | traffic.json (all)")
    assert "| over 40 words |" in done.stdout
    assert "traffic.json:" in done.stdout
    figures = json.loads(
        subprocess.run(
            [sys.executable, str(BENCH / "request_shape.py"), "--json"],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
    )
    assert figures["traffic.json"]["all"]["over_40_words"] >= 50
    assert figures["requests.json"]["all"]["over_40_words"] < 5
