"""Local files are read once, as they were scanned (issue 22, item 4): attacks on push and validate.

A push scans a tree, then hashes and uploads its files. These tests swap a file for a symlink
(to a secret outside the tree) between the scan and the upload, plant symlink loops, FIFOs and
device files, and check that nothing is followed, nothing blocks, every read is bounded, and
a loop is reported per path while the scan (and `validate`, and `push`) go on.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli

from s3skills.errors import SkillError
from s3skills.testing import MemoryObjectStore, builders
from s3skills.transfer import apush_tree
from s3skills.transfer.localtree import read_local, scan_tree

SECRET = b"OUTSIDE-SECRET"


def skill(folder: Path, name: str, files: dict[str, bytes]) -> Path:
    root = folder / name
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text(builders.skill_md(name, f"The {name} skill.", body="Body."))
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    return secret


def test_a_symlink_loop_is_reported_per_path_and_the_scan_goes_on(tmp_path: Path) -> None:
    tree_root = tmp_path / "tree"
    pdf = skill(tree_root, "pdf", {"ok.md": b"fine"})
    (pdf / "self").symlink_to(pdf / "self")
    (pdf / "a").symlink_to(pdf / "b")
    (pdf / "b").symlink_to(pdf / "a")
    (pdf / "dirloop").symlink_to(pdf / "dirloop", target_is_directory=True)
    tree = scan_tree(tree_root)
    refused = {item.path: item.reason for item in tree.refused}
    assert refused == {
        "pdf/self": "symlink loop",
        "pdf/a": "symlink loop",
        "pdf/b": "symlink loop",
        "pdf/dirloop/": "symlink loop",
    } or refused == {  # os.walk may list a looping link among the files rather than the folders
        "pdf/self": "symlink loop",
        "pdf/a": "symlink loop",
        "pdf/b": "symlink loop",
        "pdf/dirloop": "symlink loop",
    }
    assert [f.rel for f in tree.files] == ["pdf/SKILL.md", "pdf/ok.md"]


def test_a_broken_symlink_is_reported_as_broken_not_as_a_loop(tmp_path: Path) -> None:
    # The loop check resolves strictly (3.13's lenient resolve() hands a loop back unresolved);
    # a link to nothing must still be told apart from a loop, and from a link out of the tree.
    tree_root = tmp_path / "tree"
    pdf = skill(tree_root, "pdf", {"ok.md": b"fine"})
    (pdf / "gone.md").symlink_to(pdf / "missing.md")
    (pdf / "away.md").symlink_to(tmp_path / "nowhere" / "missing.md")
    (pdf / "chain.md").symlink_to(pdf / "gone.md")
    refused = {item.path: item.reason for item in scan_tree(tree_root).refused}
    assert refused == {
        "pdf/away.md": "symlink to a file outside the tree",
        "pdf/chain.md": "broken symlink",
        "pdf/gone.md": "broken symlink",
    }


def test_validate_and_push_report_a_symlink_loop_instead_of_an_unexpected_error(
    tmp_path: Path, moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tree_root = tmp_path / "tree"
    pdf = skill(tree_root, "pdf", {"ok.md": b"fine"})
    (pdf / "a").symlink_to(pdf / "b")
    (pdf / "b").symlink_to(pdf / "a")
    cli = Cli(moto_endpoint, bucket, capsys, "ana")
    assert cli("validate", str(tree_root)) == 1
    assert "symlink loop" in cli.out + cli.err
    assert "unexpected" not in cli.out + cli.err
    code = cli("push", str(tree_root))  # the loop is left out, named
    assert "unexpected" not in cli.out + cli.err, cli.err
    assert code == 0, cli.err
    assert [s["id"] for s in cli.json("list")["skills"]] == ["pdf"]


async def test_a_file_swapped_for_a_symlink_after_the_scan_is_not_followed(tmp_path: Path, outside: Path) -> None:
    tree_root = tmp_path / "tree"
    pdf = skill(tree_root, "pdf", {"a.md": b"first", "b.md": b"second"})
    store = MemoryObjectStore()
    swapped: list[str] = []

    def progress(path: str, done: int, total: int) -> None:
        if not swapped:  # after the first upload, the next file becomes a link to a secret
            target = pdf / ("b.md" if path.endswith("a.md") else "a.md")
            target.unlink()
            target.symlink_to(outside)
            swapped.append(target.name)

    with pytest.raises(SkillError, match="symlink: not followed"):
        await apush_tree(store, tree_root, "users/ana/skills/", progress=progress, concurrency=1)
    assert swapped
    for key in store.keys():
        assert SECRET not in store._get(key).data, key


async def test_a_file_replaced_by_another_after_the_scan_is_refused(tmp_path: Path) -> None:
    tree_root = tmp_path / "tree"
    pdf = skill(tree_root, "pdf", {"a.md": b"first", "b.md": b"second"})
    store = MemoryObjectStore()

    def progress(path: str, done: int, total: int) -> None:
        other = pdf / ("b.md" if path.endswith("a.md") else "a.md")
        if other.read_bytes() != b"REPLACED":
            fresh = tmp_path / "fresh"
            fresh.write_bytes(b"REPLACED")
            fresh.replace(other)  # another inode in its place

    with pytest.raises(SkillError, match="replaced after the scan"):
        await apush_tree(store, tree_root, "users/ana/skills/", progress=progress, concurrency=1)
    assert not [k for k in store.keys() if store._get(k).data == b"REPLACED"]


def _traced_peak(run: Any) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reads_refuse_a_symlink_a_device_and_a_fifo_and_read_at_most_the_limit_plus_one(
    tmp_path: Path, outside: Path
) -> None:
    link = tmp_path / "link.md"
    link.symlink_to(outside)
    with pytest.raises(SkillError, match="symlink: not followed"):
        read_local(link, 1024)
    with pytest.raises(SkillError, match="not a regular file"):
        read_local(Path("/dev/zero"), 1024)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SkillError, match="not a regular file"):
        read_local(fifo, 1024)  # opened without blocking, refused by fstat
    sparse = tmp_path / "sparse.bin"
    with sparse.open("wb") as handle:
        handle.truncate(1 << 30)  # 1 GiB that costs no disk
    errors: list[str] = []

    def read() -> None:
        try:
            read_local(sparse, 4096)
        except SkillError as exc:
            errors.append(str(exc))

    assert _traced_peak(read) < 1 << 20
    assert errors
    assert errors[0].endswith("the file is over 4096 bytes")
    assert read_local(outside, len(SECRET)) == SECRET
    with pytest.raises(SkillError, match="replaced after the scan"):
        read_local(outside, 1024, identity=(0, 0))


def test_a_fifo_or_device_in_the_tree_is_refused_by_the_scan_without_blocking(tmp_path: Path) -> None:
    tree_root = tmp_path / "tree"
    pdf = skill(tree_root, "pdf", {"ok.md": b"fine"})
    os.mkfifo(pdf / "pipe.md")
    tree = scan_tree(tree_root)
    assert {i.path: i.reason for i in tree.refused} == {"pdf/pipe.md": "not a regular file"}
    assert tree.skill_md["pdf"].startswith(b"---")
