"""Channels and lockfiles through the CLI on moto: create, set, promote, show, diff; lock, verify."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from s3skills.cli import main
from s3skills.errors import SkillError
from s3skills.skills.versions.channels import Channel

SKILL = "---\nname: {name}\ndescription: Does {name} things.\n---\n# {name} {n}\n"


class Cli:
    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], root: Path) -> None:
        self.base = ["--bucket", bucket, "--user", "ana", "--endpoint-url", endpoint]
        self.capsys = capsys
        self.root = root

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*self.base, *argv])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def json(self, *argv: str) -> Any:
        code, out, err = self("--json", *argv)
        assert code == 0, err
        return json.loads(out)

    def push(self, n: int, names: tuple[str, ...] = ("pdf", "docx"), actor: str = "alice") -> None:
        src = self.root / "src"
        if src.exists():
            shutil.rmtree(src)
        for name in names:
            (src / name).mkdir(parents=True)
            (src / name / "SKILL.md").write_text(SKILL.format(name=name, n=n))
            (src / name / "notes.md").write_text(f"notes {n}")
        code, _, err = self("--actor", actor, "push", "--delete", str(src))
        assert code == 0, err


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    c = Cli(moto_endpoint, bucket, capsys, tmp_path)
    assert c("versioning", "enable")[0] == 0
    return c


def test_a_channel_keeps_its_versions_while_latest_moves_and_promote_moves_it(cli: Cli) -> None:
    cli.push(1)
    created = cli.json("--actor", "rel", "channel", "create", "production", "--from", "latest")
    assert set(created["skills"]) == {"pdf", "docx"}
    v1 = created["skills"]["pdf"]["version"]
    cli.push(2)
    shown = cli.json("channel", "show", "production")
    assert shown["skills"]["pdf"]["version"] == v1
    assert shown["actor"] == "rel"
    diff = cli.json("channel", "diff", "production", "latest")["differences"]
    assert {d["skill"] for d in diff} == {"pdf", "docx"}
    assert cli("channel", "create", "production", "--from", "latest")[0] == 1  # exists: never overwritten
    cli.json("channel", "promote", "latest", "production")
    assert cli.json("channel", "diff", "production", "latest")["differences"] == []
    # set one skill back to its first version, by the id history shows
    cli.json("channel", "set", "production", "pdf", "--version", v1)
    assert cli.json("channel", "show", "production")["skills"]["pdf"]["version"] == v1
    cli.json("channel", "set", "production", "docx", "--remove")
    assert set(cli.json("channel", "show", "production")["skills"]) == {"pdf"}


def test_a_stale_channel_edit_is_refused_by_its_etag(cli: Cli, moto_endpoint: str, bucket: str) -> None:
    import asyncio

    from s3skills.errors import Conflict
    from s3skills.layout import KeyLayout
    from s3skills.skills.versions.channels import aread_channel, awrite_channel
    from s3skills.storage import S3ObjectStore

    cli.push(1)
    cli.json("channel", "create", "staging", "--from", "latest")
    prefix = KeyLayout().channels_prefix(KeyLayout().user_prefix("ana"))

    async def race() -> None:
        store = S3ObjectStore(bucket, endpoint_url=moto_endpoint)
        first = await aread_channel(store, prefix, "staging")
        second = await aread_channel(store, prefix, "staging")
        await awrite_channel(store, prefix, first, actor="a")
        with pytest.raises(Conflict):
            await awrite_channel(store, prefix, second, actor="b")
        await store.aclose()

    asyncio.run(race())


def test_lock_then_verify_round_trips_and_a_changed_file_is_named(cli: Cli, tmp_path: Path, bucket: str) -> None:
    cli.push(1)
    lock = str(tmp_path / "skills-lock.json")
    assert cli("lock", "-o", lock)[0] == 0
    doc = json.loads(Path(lock).read_text())
    assert set(doc["skills"]) == {"pdf", "docx"}
    assert len(doc["skills"]["pdf"]["files"]["SKILL.md"]["sha256"]) == 64
    assert doc["source"] == {"bucket": bucket, "library": "users/ana/skills/", "channel": "latest"}
    code, out, _ = cli("verify", "--lock", lock)
    assert (code, out.strip()) == (0, f"latest matches {lock}.")
    code, out, err = cli("verify", "--lock", lock, "--user", "bob")  # another library than the lock's
    assert code == 1
    assert "locks s3://" in err
    assert "pdf: in the lock, not served" in out
    # a channel made of the lock serves exactly its versions, whatever is pushed later
    cli.json("channel", "create", "reviewed", "--from-lock", lock)
    cli.push(2, names=("pdf", "xlsx"))
    code, out, _ = cli("verify", "--lock", lock)
    assert code == 1
    assert "pdf/SKILL.md: changed (sha256 differs)" in out
    assert "pdf/notes.md: changed (sha256 differs)" in out
    assert "docx: in the lock, not served" in out
    assert "xlsx: served, not in the lock" in out
    code, out, _ = cli("verify", "--lock", lock, "--channel", "reviewed")
    assert code == 0, out
    shown = cli.json("channel", "show", "reviewed")["skills"]
    assert {s: v["version"] for s, v in shown.items()} == {s: v["version"] for s, v in doc["skills"].items()}


def test_a_damaged_lock_or_channel_is_refused_with_a_clear_error(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other"}')
    code, _, err = cli("verify", "--lock", str(bad))
    assert code == 1
    assert "not an s3skills lockfile" in err
    bad.write_text("[" * 10_000)
    assert "not an s3skills lockfile" in cli("verify", "--lock", str(bad))[2]
    for data in (b"{}", b'{"schema":"s3skills.channel/1","name":"x","skills":{"../a":{}}}', b"[" * 1000):
        with pytest.raises(SkillError, match="damaged"):
            Channel.decode(data, name="x")
    forged = {
        "schema": "s3skills.channel/1",
        "name": "x",
        "skills": {"pdf": {"version": "000000000000", "record": None, "files": {"SKILL.md": {"etag": "e"}}}},
    }
    with pytest.raises(SkillError, match="malformed"):  # a content id that is not its files'
        Channel.decode(json.dumps(forged).encode(), name="x")
    code, _, err = cli("channel", "show", "nothing")
    assert code == 1
    assert "No channel 'nothing'" in err
