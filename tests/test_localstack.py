"""s3skills against a live LocalStack (S3 only), run on the host from its own Python 3.13 venv.

Every test here is `localstack` and `slow` (conftest marks those using the LocalStack
fixtures; the one that starts its own server is marked by hand); `.ci/run` runs them after
the README's command. The ObjectStore conformance,
conditional writes and versions run on LocalStack from their own modules (parametrised);
this module pins the server itself (loopback only), the demo on its endpoint, and a CLI
round trip. What LocalStack does not honour is pinned here as a tested difference: a
DeleteObject with If-Match answers 501 NotImplemented, so a rollback that has to remove
files stops with a clear error before it deletes or writes anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aioboto3
import pytest
from cli_harness import Cli

from s3skills.errors import StoreError
from s3skills.skills.versions.history import FileVersion, SkillVersion, restore
from s3skills.storage import ObjectVersion, S3ObjectStore
from s3skills.testing import (
    LOCALSTACK_REQUIREMENTS,
    LocalStackBucket,
    LocalStackServer,
    find_localstack_python,
    make_client,
    skill_md,
)
from s3skills.testing import write_file as write
from s3skills.transfer import PULL_RECORD

REPO = Path(__file__).resolve().parents[1]
USER = "ana"
PREFIX = f"{USER}/skills/"


@pytest.fixture
def s3(localstack_bucket: LocalStackBucket) -> Any:
    client = make_client(localstack_bucket.endpoint_url)
    yield client
    client.close()


@pytest.fixture
def cli(localstack_bucket: LocalStackBucket, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(localstack_bucket.endpoint_url, localstack_bucket.bucket, capsys, USER)


# -- the server ----------------------------------------------------------------------------------


def _listening_addresses(pid: int) -> list[str]:
    """The local addresses of the TCP sockets that process `pid` listens on (from /proc).

    A descriptor the server closes between the listing and its `readlink` is skipped: a listening
    socket stays open for the server's life, so only a short-lived one can vanish that way."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1])
    return found


def test_localstack_listens_on_loopback_only_and_reports_s3_running(localstack_server: LocalStackServer) -> None:
    health = localstack_server.health()
    services = health["services"]
    assert isinstance(services, dict)
    assert services["s3"] in ("available", "running")
    assert f"=={health['version']}" in LOCALSTACK_REQUIREMENTS[0]  # the pinned runtime answers
    assert localstack_server.endpoint_url.startswith("http://127.0.0.1:")
    assert localstack_server.pid is not None
    listening = _listening_addresses(localstack_server.pid)
    port = f"{int(localstack_server.endpoint_url.rsplit(':', 1)[1]):04X}"
    # 127.0.0.1 (and ::1) in /proc's little-endian hex: the gateway's port, nothing on another interface.
    loopback = ("0100007F:", "00000000000000000000000001000000:")
    assert f"0100007F:{port}" in listening
    assert [a for a in listening if not a.startswith(loopback)] == []


@pytest.mark.slow
@pytest.mark.localstack
def test_stop_ends_the_whole_process_group_and_removes_its_files() -> None:
    python = find_localstack_python()
    if python is None:
        pytest.skip("LocalStack not available: its runtime needs Python >= 3.13 (none on PATH or under pyenv)")
    server = LocalStackServer(python=python)
    pid, folder = server.pid, server.dir
    assert pid is not None
    assert folder.is_dir()
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # no process of its group is left
    assert not folder.exists()
    assert server.pid is None
    server.stop()  # a second stop is harmless


# -- the demo --------------------------------------------------------------------------------------


def test_demo_against_localstack(localstack_bucket: LocalStackBucket, tmp_path: Path) -> None:
    """`s3skills --endpoint-url URL ... demo` on LocalStack, as a subprocess with a clean environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3SKILLS_"))}
    env.update(
        HOME=str(tmp_path),
        PYTHONPATH=str(REPO),
        AWS_ACCESS_KEY_ID=localstack_bucket.access_key,
        AWS_SECRET_ACCESS_KEY=localstack_bucket.secret_key,
        AWS_EC2_METADATA_DISABLED="true",
    )
    argv = ["--endpoint-url", localstack_bucket.endpoint_url, "--bucket", localstack_bucket.bucket, "--user", "lucia"]
    proc = subprocess.run(
        [sys.executable, "-m", "s3skills.cli", *argv, "demo", "--json", "--layout", "seeds"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is True
    assert result["embedded"] is False
    assert (result["bucket"], result["user"], result["library"]) == (localstack_bucket.bucket, "lucia", "lucia/skills/")


# -- a CLI round trip ----------------------------------------------------------------------------


def _tree(root: Path) -> Path:
    write(root, "docs/pdf/SKILL.md", skill_md("pdf", version="1.0"))
    write(root, "docs/pdf/forms.md", "# Forms\n")
    write(root, "escrituras/compraventa/SKILL.md", skill_md("compraventa"))
    write(root, "escrituras/compraventa/assets/logo.png", bytes(range(256)))
    write(root, "sql/SKILL.md", skill_md("sql"))
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_cli_push_list_disable_pull_round_trip(cli: Cli, tmp_path: Path, s3: Any) -> None:
    tree = _tree(tmp_path / "lib")
    pushed = cli.json("push", str(tree))
    assert len(pushed["uploaded"]) == 5
    assert [s["id"] for s in cli.json("list")["skills"]] == ["docs/pdf", "escrituras/compraventa", "sql"]

    library = f"s3://{cli.globals[1]}/{PREFIX}"
    assert cli.json("disable", "sql") == {
        "id": "sql",
        "enabled": False,
        "changed": True,
        "library": library,
        "channels": [],
    }
    assert [s["id"] for s in cli.json("list")["skills"]] == ["docs/pdf", "escrituras/compraventa"]
    assert "enabled: false" in s3.get_object(Bucket=cli.globals[1], Key=PREFIX + "sql/SKILL.md")["Body"].read().decode()
    assert cli("enable", "sql") == 0

    dest = tmp_path / "pulled"
    assert len(cli.json("pull", str(dest))["downloaded"]) == 5
    pulled = _files(dest)
    assert PULL_RECORD in pulled  # where each folder came from: pull -> edit -> push just works
    del pulled[PULL_RECORD]
    assert pulled == _files(tree)
    assert cli.json("push", str(dest))["uploaded"] == []  # what was pulled is the same library


def test_cli_versioning_history_and_rollback(cli: Cli, tmp_path: Path, s3: Any) -> None:
    bucket = cli.globals[1]
    tree = _tree(tmp_path / "lib")
    assert cli.json("versioning", "enable")["versioning"] == "Enabled"
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    cli.json("push", str(tree))
    write(tree, "docs/pdf/SKILL.md", skill_md("pdf", version="2.0"))
    cli.json("push", str(tree))

    versions = [v["version"] for v in cli.json("history", "docs/pdf")["versions"]]
    assert len(versions) == 2
    v2, v1 = versions
    rolled = cli.json("rollback", "docs/pdf", "--to", v1)
    assert (rolled["version"], rolled["changed"]) == (v1, ["SKILL.md"])
    body = s3.get_object(Bucket=bucket, Key=PREFIX + "docs/pdf/SKILL.md")["Body"].read().decode()
    assert body == skill_md("pdf", version="1.0")
    assert [v["version"] for v in cli.json("history", "docs/pdf")["versions"]] == [v1, v2, v1]


async def test_a_rollback_that_must_delete_a_file_stops_before_writing_on_localstack(
    localstack_bucket: LocalStackBucket,
) -> None:
    """The tested difference: LocalStack refuses DeleteObject with If-Match (501 NotImplemented).

    A rollback removes the files the old version lacked first, each with a conditional delete
    so that a concurrent push is not lost. On LocalStack that first delete is refused: a clear
    `StoreError`, and the skill is exactly as it was (nothing deleted, nothing written). The
    two versions are built from the bucket's real version listing (a CLI `history` groups
    writes by their one-second timestamps, which would make this test depend on the clock).
    """
    session = aioboto3.Session(
        aws_access_key_id=localstack_bucket.access_key, aws_secret_access_key=localstack_bucket.secret_key
    )
    store = S3ObjectStore(localstack_bucket.bucket, endpoint_url=localstack_bucket.endpoint_url, session=session)
    folder = PREFIX + "pdf/"
    try:
        await store.aput_versioning(True)
        await store.aput(folder + "SKILL.md", b"one")
        await store.aput(folder + "extra.md", b"added by the second push")
        await store.aput(folder + "SKILL.md", b"two")
        listed = await store.alist_versions(folder)

        def file(v: ObjectVersion) -> FileVersion:
            return FileVersion(v.key.removeprefix(folder), v.etag, v.version_id, v.size, v.last_modified, v.key)

        skill_md_versions = [v for v in listed if v.key == folder + "SKILL.md"]  # newest first
        extra = next(v for v in listed if v.key == folder + "extra.md")
        old = SkillVersion("pdf", "old", (file(skill_md_versions[1]),), None)
        newest = SkillVersion("pdf", "new", (file(skill_md_versions[0]), file(extra)), None, latest=True)

        with pytest.raises(StoreError, match="NotImplemented"):
            await restore(store, old, newest)
        assert (await store.aget(folder + "SKILL.md")).data == b"two"
        assert (await store.aget(folder + "extra.md")).data == b"added by the second push"
        assert len(await store.alist_versions(folder)) == len(listed)  # not even a delete marker
    finally:
        await store.aclose()
