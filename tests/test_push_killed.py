"""A push killed at any point leaves no stale index: the next reader sees the bucket as it is.

Before writers marked the library, a push of 3,000 skills killed 4 s in left 780 SKILL.md in
the bucket and a fresh agent's index showed the 300 of the manifest from before the push,
until the verify interval (300 s) ran out; a cut-off `--delete` left skills in the index that
no longer existed. Here a real `s3skills push` process is killed with SIGKILL half-way
(slowed by a loopback latency proxy in front of moto), then a fresh reader's index must equal
the listing; and after a push that was not cut off, a fresh reader costs one GET, no LIST.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from keylog import KeyLogStore

from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.index.marks import WRITE_LEASE, amark
from s3skills.skills.index.writers import library_builder
from s3skills.storage import S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import FaultProxy, skill_md
from s3skills.transfer import apush_tree

PREFIX = "users/ana/skills/"
MANIFEST = KeyLayout().manifest_key(PREFIX)


def _tree(root: Path, names: list[str]) -> Path:
    for name in names:
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_md(name, f"Handles {name} requests for the team."))
        (folder / "notes.md").write_text(f"notes of {name}\n")
    return root


def _cli(bucket: str, endpoint: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "s3skills.cli",
        "--bucket",
        bucket,
        "--user",
        "ana",
        "--endpoint-url",
        endpoint,
        *args,
    ]


def _listed_ids(s3_client: Any, bucket: str) -> set[str]:
    ids = set()
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=PREFIX):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if key.endswith("/SKILL.md") and "/.s3skills/" not in key:
                ids.add(key[len(PREFIX) : -len("/SKILL.md")])
    return ids


def _push_and_kill(command: list[str], s3_client: Any, bucket: str, done: Any) -> None:
    """Start the push, SIGKILL it once `done(listed ids)` says it is half-way (bounded polls)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as process:
        try:
            for _ in range(3000):
                if process.poll() is not None:
                    break
                if done(_listed_ids(s3_client, bucket)):
                    process.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.01)  # polling the bucket, not timing anything
        finally:
            if process.poll() is None:
                process.kill()
            err = process.stderr.read().decode() if process.stderr else ""
            process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, f"the push was not cut off half-way: {err[-2000:]}"


def _fresh_index(bucket: str, endpoint: str) -> set[str]:
    async def read() -> set[str]:
        store = S3ObjectStore(bucket, endpoint_url=endpoint)
        try:
            library = SkillLibrary(store, Config())
            return {s.id for s in await library.aindex(tenant=Tenant("ana", "t1"))}
        finally:
            await store.aclose()

    from s3skills._loop import run_sync

    return run_sync(read())


def _manifest(s3_client: Any, bucket: str) -> dict[str, Any]:
    body = s3_client.get_object(Bucket=bucket, Key=MANIFEST)["Body"].read()
    doc: dict[str, Any] = json.loads(body)
    return doc


@pytest.mark.slow
def test_a_push_killed_half_way_is_visible_to_the_next_reader(
    bucket: str, moto_endpoint: str, s3_client: Any, tmp_path: Path
) -> None:
    before = [f"old-{i:03d}" for i in range(30)]
    new = [f"new-{i:03d}" for i in range(200)]
    assert (
        subprocess.run(_cli(bucket, moto_endpoint, "push", str(_tree(tmp_path / "a", before))), check=False).returncode
        == 0
    )
    assert _fresh_index(bucket, moto_endpoint) == set(before)
    with FaultProxy(moto_endpoint, latency=0.1) as proxy:
        command = _cli(bucket, proxy.url, "push", str(_tree(tmp_path / "b", new)))
        _push_and_kill(command, s3_client, bucket, lambda ids: 20 <= len(ids - set(before)) <= len(new) - 20)
    listed = _listed_ids(s3_client, bucket)
    assert set(before) < listed < set(before) | set(new)  # cut off half-way
    assert _manifest(s3_client, bucket).get("writing")  # the dead writer's mark is still there
    assert _fresh_index(bucket, moto_endpoint) == listed


@pytest.mark.slow
def test_a_delete_killed_half_way_leaves_no_deleted_skill_in_the_index(
    bucket: str, moto_endpoint: str, s3_client: Any, tmp_path: Path
) -> None:
    names = [f"skill-{i:03d}" for i in range(200)]
    assert (
        subprocess.run(_cli(bucket, moto_endpoint, "push", str(_tree(tmp_path / "a", names))), check=False).returncode
        == 0
    )
    assert _fresh_index(bucket, moto_endpoint) == set(names)
    kept = names[:10]
    with FaultProxy(moto_endpoint, latency=0.1) as proxy:
        command = _cli(bucket, proxy.url, "push", "--delete", str(_tree(tmp_path / "b", kept)))
        # The SKILL.md files go in one batch request: cut off right after it, before the manifest's update.
        _push_and_kill(command, s3_client, bucket, lambda ids: ids == set(kept))
    assert _listed_ids(s3_client, bucket) == set(kept)
    assert _manifest(s3_client, bucket).get("writing")  # cut off before the push's last manifest update
    assert _fresh_index(bucket, moto_endpoint) == set(kept)


def _doc(store: KeyLogStore) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(store._objects[MANIFEST].data)  # arranging: no request hook
    return doc


async def test_after_a_push_that_finished_a_fresh_reader_costs_one_get_and_no_list(tmp_path: Path) -> None:
    store = KeyLogStore()
    names = [f"s-{i:02d}" for i in range(12)]
    await apush_tree(store, _tree(tmp_path / "t", names), PREFIX)
    manifest = _doc(store)
    assert "writing" not in manifest  # the push's last manifest update cleared its mark
    store.take()
    library = SkillLibrary(store, Config())
    assert {s.id for s in await library.aindex(tenant=Tenant("ana", "t1"))} == set(names)
    assert [op for op in store.take() if not op[0].endswith(".bytes")] == [("GetObject", MANIFEST)]


async def test_a_mark_past_its_lease_is_dropped_by_the_next_readers_rewrite(tmp_path: Path) -> None:
    store = KeyLogStore()
    await apush_tree(store, _tree(tmp_path / "t", ["a", "b"]), PREFIX)
    doc = _doc(store)
    doc["writing"] = {"dead0writer": 1000.0, "live0writer": 4_000_000_000.0}  # one long dead, one ahead
    store.put_object(MANIFEST, json.dumps(doc))
    store.put_object(PREFIX + "c/SKILL.md", skill_md("c"))  # what the dead writer managed to write
    library = SkillLibrary(store, Config())
    assert {s.id for s in await library.aindex(tenant=Tenant("ana", "t1"))} == {"a", "b", "c"}
    await library.aflush()
    assert _doc(store)["writing"] == {"live0writer": 4_000_000_000.0}
    assert WRITE_LEASE == 300.0


async def test_a_writer_that_dies_after_marking_leaves_every_fresh_reader_listing(tmp_path: Path) -> None:
    """The same death, in process: the mark is written, objects follow, the last update never comes."""
    store = KeyLogStore()
    await apush_tree(store, _tree(tmp_path / "t", ["a", "b"]), PREFIX)
    assert await amark(store, MANIFEST, PREFIX, "writer0dead", library_builder(store, PREFIX))
    store.put_object(PREFIX + "c/SKILL.md", skill_md("c"))  # written, then the writer died
    store.put_object(PREFIX + "a/SKILL.md", skill_md("a", "Changed after the manifest was written."))
    for _ in range(2):  # every fresh reader, not only the first
        store.take()
        library = SkillLibrary(store, Config())
        skills = {s.id: s for s in await library.aindex(tenant=Tenant("ana", "t1"))}
        assert set(skills) == {"a", "b", "c"}
        assert skills["a"].metadata.description == "Changed after the manifest was written."
        ops = [op for op, _ in store.take()]
        assert "ListObjectsV2" in ops  # it listed: the marked manifest was not trusted
        await library.aflush()
    assert "writer0dead" in _doc(store)["writing"]  # live until its lease runs out
