"""Versions on a bucket that had skills before versioning was enabled (S3's VersionId "null").

Every existing bucket starts so: push, `versioning enable`, edit, push. The first push's
objects have VersionId "null" and are a real version: history, diff, rollback and a thread's
pin all reach it. The CLI cases and the store-level cases (a pin on a "null" version, one
replaced in place, one replaced while versioning was suspended) run on moto and on SeaweedFS
(and the store-level ones on `MemoryObjectStore` as well); the agent's thread runs on moto.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from s3skills import S3Backend, create_skills_agent
from s3skills.cli import main
from s3skills.config import Config
from s3skills.errors import SkillError
from s3skills.layout import KeyLayout
from s3skills.skills.versions.history import (
    NULL_VERSION,
    SkillChanged,
    current_version,
    history,
    read_pinned,
    read_version,
    restore,
)
from s3skills.storage import ObjectStore, RequestCounter
from s3skills.tenancy import PinnedFile, SkillPin
from s3skills.testing import MemoryObjectStore
from s3skills.testing.scripted import ScriptedChatModel, tool_call

FOLDER = "ana/skills/pdf/"


def skill_md(n: int) -> str:
    return f"---\nname: pdf\ndescription: Fills PDF forms.\n---\n# PDF\nStep {n} of the form.\n"


class Cli:
    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.globals = ["--bucket", bucket, "--user", "ana", "--endpoint-url", endpoint, "--layout", "seeds"]
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*self.globals, *argv])
        out = self.capsys.readouterr()
        return code, out.out, out.err


@pytest.fixture(params=["moto", "seaweedfs"])
def cli(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    if request.param == "seaweedfs":
        sw = request.getfixturevalue("seaweed_bucket")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", sw.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", sw.secret_key)
        return Cli(sw.endpoint_url, sw.bucket, capsys)
    return Cli(request.getfixturevalue("moto_endpoint"), request.getfixturevalue("bucket"), capsys)


@pytest.fixture(params=["memory", "moto", pytest.param("seaweedfs", marks=pytest.mark.seaweedfs)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[ObjectStore]:
    """A store on a bucket that has never had versioning: in memory, or on moto or SeaweedFS."""
    if request.param == "memory":
        yield MemoryObjectStore()
        return
    s3 = request.getfixturevalue("s3_store_on")(request.param)
    assert await s3.aget_versioning() == ""  # never enabled, like every existing bucket
    yield s3
    await s3.aclose()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "SKILL.md").write_text(skill_md(1))
    (tmp_path / "pdf" / "forms.md").write_text("Form A\n")
    return tmp_path


def test_the_first_push_before_versioning_is_a_version_diff_and_rollback_reach(cli: Cli, tree: Path) -> None:
    code, _, err = cli("push", str(tree))
    assert code == 0, err
    assert cli("versioning", "enable")[0] == 0
    (tree / "pdf" / "SKILL.md").write_text(skill_md(2))
    (tree / "pdf" / "forms.md").unlink()
    code, _, err = cli("push", str(tree), "--delete")
    assert code == 0, err

    code, out, err = cli("--json", "history", "pdf")
    assert code == 0, err
    versions = json.loads(out)["versions"]
    assert len(versions) == 2
    second, first = versions[0]["version"], versions[1]["version"]
    assert versions[1]["files"] == 2

    code, out, err = cli("diff", "pdf", "--from", first)
    assert code == 0, err
    assert "-Step 1 of the form." in out
    assert "+Step 2 of the form." in out
    assert "-Form A" in out  # the deleted file, read by VersionId "null"

    code, out, err = cli("rollback", "pdf", "--to", first)
    assert code == 0, err
    assert f"Rolled back pdf to version {first}" in out
    code, out, _ = cli("--json", "info", "pdf")
    assert json.loads(out)["version_id"] == first
    code, out, _ = cli("diff", "pdf", "--from", second)
    assert "+Step 1 of the form." in out
    assert "+Form A" in out


async def test_a_pin_on_a_null_version_reads_it_after_versioning_is_enabled_in_one_get(store: ObjectStore) -> None:
    etag = await store.aput(FOLDER + "ref.md", b"before versioning")
    await store.aput_versioning(True)
    await store.aput(FOLDER + "ref.md", b"after versioning")
    pin = SkillPin("x", {"ref.md": PinnedFile(etag, NULL_VERSION)})
    counter = RequestCounter()
    store.add_request_hook(counter)
    assert (await read_pinned(store, FOLDER + "ref.md", "ref.md", pin)).data == b"before versioning"
    assert counter.counts == {"GetObject": 1}


async def test_a_null_version_replaced_in_place_asks_for_a_reload_never_serves_other_bytes(
    store: ObjectStore,
) -> None:
    # Versioning off: each write replaces the "null" version.
    etag = await store.aput(FOLDER + "ref.md", b"v1")
    pin = SkillPin("x", {"ref.md": PinnedFile(etag, NULL_VERSION)})
    await store.aput(FOLDER + "ref.md", b"v2")
    with pytest.raises(SkillChanged, match=r"ref\.md changed.*no longer keeps the version loaded"):
        await read_pinned(store, FOLDER + "ref.md", "ref.md", pin)


async def test_a_null_version_replaced_while_versioning_was_suspended_is_reported_gone(store: ObjectStore) -> None:
    await store.aput(FOLDER + "SKILL.md", b"one")
    await store.aput_versioning(True)
    await store.aput(FOLDER + "SKILL.md", b"two")
    first = history("pdf", FOLDER, await store.alist_versions(FOLDER), lambda _k: True)[-1]
    assert first.file("SKILL.md") is not None
    assert (await read_version(store, first.files[0])).data == b"one"
    await store.aput_versioning(False)  # suspended: the next write replaces the "null" version
    await store.aput(FOLDER + "SKILL.md", b"three")
    with pytest.raises(SkillError, match="replaced in place"):
        await read_version(store, first.files[0])
    current = current_version("pdf", FOLDER, await store.alist_versions(FOLDER), lambda _k: True)
    with pytest.raises(SkillError, match="replaced in place"):
        await restore(store, first, current)
    assert (await store.aget(FOLDER + "SKILL.md")).data == b"three"  # nothing written


def test_a_thread_that_loaded_a_skill_before_versioning_keeps_reading_that_version(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    def put(version: str) -> None:
        s3_client.put_object(Bucket=bucket, Key=FOLDER + "guia.md", Body=f"Guía {version}".encode())
        s3_client.put_object(Bucket=bucket, Key=FOLDER + "SKILL.md", Body=skill_md(int(version[1:])).encode())

    def turn(steps: list[AIMessage], text: str) -> list[str]:
        agent = create_skills_agent(ScriptedChatModel(steps=steps), backend, checkpointer=saver)
        out = agent.invoke(
            {"messages": [{"role": "user", "content": text}]},
            context={"user_id": "ana"},
            config={"configurable": {"thread_id": "t1"}},
        )
        return [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]

    put("v1")  # the bucket has no versioning yet: these are "null" versions
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, config=Config(layout=KeyLayout.seeds(), verify="always"))
    saver = InMemorySaver()
    load = AIMessage(content="", tool_calls=[tool_call("cargar_habilidad", {"skill_path": "pdf"})])
    turn([load], "Hola")
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put("v2")
    read = AIMessage(content="", tool_calls=[tool_call("read_file", {"file_path": "/skills/pdf/guia.md"})])
    results = turn([read], "Sigue")
    assert "Guía v1" in results[-1]  # read by VersionId "null", as loaded
    assert "Guía v2" not in results[-1]
