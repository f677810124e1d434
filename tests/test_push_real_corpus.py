"""The 7 public repositories of the real-skills corpus push from their roots with no flag (issue 31).

What Claude Code and the vercel `skills` CLI load, `push` stores (the severity policy,
`s3skills.skills.format.severity`): every `SKILL.md` folder ends up in the library, or was a
byte-identical copy of one that did, and every skill loads for the agent. `--strict` refuses
what the policy calls an error and names the skills. No line the CLI prints is over 200
characters. Each repository is pushed into a fresh SeaweedFS bucket through the command line
(a server in a process of its own: the in-process moto server held gigabytes for one of these
repositories, 780 s and a 2.8 GB process for the two largest).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli

from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.skills.format.severity import SEVERITIES, severity_of
from s3skills.testing import SeaweedBucket, make_client
from s3skills.testing.corpus import REPOSITORY_NAMES, RealRepository, real_repositories, real_repository
from s3skills.transfer.localtree import JUNK_NAMES, scan_tree

USER = "ana"

pytestmark = pytest.mark.slow


def _long_lines(*texts: str) -> list[str]:
    return [line for text in texts for line in text.splitlines() if len(line) > 200]


def _folders(repo: RealRepository) -> set[str]:
    """Every folder of the repository holding a SKILL.md (outside junk such as `.git`)."""
    out = set()
    for folder in repo.skill_folders():
        rel = folder.relative_to(repo.root)
        if not JUNK_NAMES & set(rel.parts):
            out.add(rel.as_posix() if rel.parts else "")
    return out


@pytest.fixture
def cli(seaweed_bucket: SeaweedBucket, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed_bucket.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed_bucket.secret_key)
    return Cli(seaweed_bucket.endpoint_url, seaweed_bucket.bucket, capsys, USER)


@pytest.fixture
def s3_client(seaweed_bucket: SeaweedBucket) -> Iterator[Any]:
    client = make_client(
        seaweed_bucket.endpoint_url, access_key=seaweed_bucket.access_key, secret_key=seaweed_bucket.secret_key
    )
    yield client
    client.close()


@pytest.mark.parametrize("name", REPOSITORY_NAMES)
def test_real_repository_pushes_from_its_root_without_a_flag_and_every_skill_loads(
    name: str, cli: Cli, s3_client: Any, seaweed_bucket: SeaweedBucket
) -> None:
    bucket = seaweed_bucket.bucket
    repo = real_repository(name)
    tree = scan_tree(repo.root)  # what the push maps: the expected ids, independently of its output
    strict = {
        sid
        for sid, folder in tree.mapping.items()
        for p in tree.problems
        if p.path == (f"{folder}/SKILL.md" if folder else "SKILL.md") and SEVERITIES[severity_of(p)].strict_refuses
    }

    code = cli("push", "--strict", str(repo.root))
    assert _long_lines(cli.out, cli.err) == []
    if strict:
        assert code == 1, cli.err
        assert "--strict refuses" in cli.err
        assert f"{len(strict)} skill" in cli.err
        named = [sid for sid in sorted(strict) if f"  {sid}: " in cli.err]
        assert len(named) == min(len(strict), 10), cli.err  # one line each, summarised beyond 10
        assert s3_client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # nothing written
    else:
        assert code == 0, cli.err
        s3_client.delete_objects(
            Bucket=bucket,
            Delete={"Objects": [{"Key": o["Key"]} for o in s3_client.list_objects_v2(Bucket=bucket)["Contents"]]},
        )

    code = cli("push", str(repo.root))
    assert code == 0, cli.err
    assert _long_lines(cli.out, cli.err) == []
    if strict:
        assert "break the Agent Skills specification" in cli.err
    for note in tree.renamed:  # distinct ids derived for differing folders, said in the output
        folder = note.path.removesuffix("/SKILL.md")
        assert any(line.strip().startswith(f"{folder} -> ") for line in cli.err.splitlines()), cli.err

    duplicates = {item.path.removesuffix("SKILL.md").rstrip("/") for item in tree.duplicates}
    assert set(tree.mapping.values()) | duplicates == _folders(repo)

    backend = S3Backend(bucket, endpoint_url=seaweed_bucket.endpoint_url, user_id=USER, layout=KeyLayout.seeds())
    try:
        library = backend.skills
        assert {s.id for s in library.index()} == set(tree.mapping)
        for skill_id in sorted(tree.mapping):
            loaded = library.load(skill_id)
            assert loaded.skill.id == skill_id
    finally:
        backend.close()


def test_corpus_has_the_seven_repositories() -> None:
    repositories = real_repositories()
    assert tuple(repo.name for repo in repositories) == REPOSITORY_NAMES
    assert all(Path(repo.root).is_dir() for repo in repositories)
