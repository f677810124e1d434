"""The 7 real repositories of the corpus pushed one after another into one library (issue 36).

The issue's walk used the 13 public skill repositories most used today; those are not
available offline, so this runs on the 7 of the real-skills corpus (`s3skills.testing.corpus`),
two of whose ids clash across repositories (`prompt-optimizer` and `security-review`, in
getsentry/skills and github/awesome-copilot). Pushed with no flag, in two orders, each push
exits 0, stores every skill that clashes with nothing already there, and leaves each
clashing one out with one line naming both sources and both ways out; the library ends with
every skill of every repository but the later copies of the clashing ids, whatever the
order. With `--category-from-repo` every skill of every repository is stored. On SeaweedFS
(a server in a process of its own: moto holds every version in memory and grows to gigabytes
on this corpus).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_harness import Cli

from s3skills.skills.format.severity import SEVERITIES, severity_of
from s3skills.testing import SeaweedBucket, make_client
from s3skills.testing.corpus import REPOSITORY_NAMES, real_repository
from s3skills.transfer.localtree import scan_tree
from s3skills.transfer.repository import ORIGIN_KEY, repository_name

pytestmark = pytest.mark.slow

USER = "ana"
PREFIX = f"{USER}/skills/"  # the seeds layout of `Cli`


def _pushable(name: str, **options: Any) -> set[str]:
    """The ids a push of this repository alone stores: every mapped skill a host can read."""
    tree = scan_tree(real_repository(name).root, **options)
    folders = {folder: sid for sid, folder in tree.mapping.items()}
    unreadable = {
        folders[folder]
        for p in tree.problems
        if not SEVERITIES[severity_of(p)].pushed and (folder := p.path.removesuffix("SKILL.md").rstrip("/")) in folders
    }
    return set(tree.skills) - unreadable


@pytest.fixture
def cli(seaweed_bucket: SeaweedBucket, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed_bucket.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed_bucket.secret_key)
    return Cli(seaweed_bucket.endpoint_url, seaweed_bucket.bucket, capsys, USER)


def _origin(seaweed_bucket: SeaweedBucket, skill_id: str) -> str:
    client = make_client(
        seaweed_bucket.endpoint_url, access_key=seaweed_bucket.access_key, secret_key=seaweed_bucket.secret_key
    )
    try:
        head = client.head_object(Bucket=seaweed_bucket.bucket, Key=f"{PREFIX}{skill_id}/SKILL.md")
    finally:
        client.close()
    return str(head["Metadata"][ORIGIN_KEY])


@pytest.mark.parametrize("order", [REPOSITORY_NAMES, tuple(reversed(REPOSITORY_NAMES))], ids=["a-z", "z-a"])
def test_the_corpus_pushed_one_repository_after_another_keeps_every_skill_but_the_later_clashing_copies(
    order: tuple[str, ...], cli: Cli, seaweed_bucket: SeaweedBucket
) -> None:
    held: dict[str, str] = {}  # id -> the repository whose copy the library holds
    for name in order:
        root = real_repository(name).root
        assert cli("--json", "push", str(root)) == 0, cli.err
        report = json.loads(cli.out)
        mine = _pushable(name)
        clashing = {sid for sid in mine if sid in held}
        assert set(report["replaceable"]) == clashing, name
        assert set(report["skills"]) == mine - clashing, name
        for sid in mine - clashing:
            held[sid] = name
        for conflict in report["conflicts"]:
            reason = conflict["reason"]
            theirs = repository_name(real_repository(held[conflict["path"]]).root)
            assert reason.startswith(f"library copy from {theirs}/"), reason
            assert f"this one from {repository_name(root)}/" in reason
            assert reason.endswith("keep both: --category-from-repo; take it over: --replace")
    # Across the 7 repositories two ids clash, whatever the order.
    every = [sid for name in order for sid in _pushable(name)]
    assert {sid for sid in every if every.count(sid) > 1} == {"prompt-optimizer", "security-review"}
    stored = {s["id"] for s in cli.json("list", "--all")["skills"]}
    assert stored == set(held)
    first = next(name for name in order if "security-review" in _pushable(name))
    assert _origin(seaweed_bucket, "security-review").startswith(repository_name(real_repository(first).root) + "/")


def test_the_corpus_pushed_with_category_from_repo_keeps_every_skill_of_every_repository(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    expected: set[str] = set()
    for name in REPOSITORY_NAMES:
        root = real_repository(name).root
        assert cli("push", "--category-from-repo", str(root)) == 0, cli.err
        assert "whose library copy was pushed from another folder" not in cli.err
        expected |= _pushable(name, repository=repository_name(root))
    stored = {s["id"] for s in cli.json("list", "--all")["skills"]}
    assert stored == expected
    assert len(stored) == sum(len(_pushable(name)) for name in REPOSITORY_NAMES)  # no skill lost to the category
