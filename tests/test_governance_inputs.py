"""Governance under attack: a lock is checked by content, input files are bounded, forged
records and channels are reported and never widen what is served.

Through the CLI on the shared moto server, as a user with a library would try it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_channels_lock import Cli as LockCli

# The classic 128-byte MD5 collision pair (Wang and Yu, 2004): two different byte strings with
# one MD5. S3's ETag of a single-part PUT is the body's MD5, so both halves get the same ETag.
COLLISION_A = bytes.fromhex(
    "d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f89"
    "55ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5b"
    "d8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0"
    "e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70"
)
COLLISION_B = bytes.fromhex(
    "d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f89"
    "55ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5b"
    "d8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0"
    "e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70"
)
SKILL = "---\nname: {name}\ndescription: Does {name} things for the tests.\n---\n# {name}\n"


class Cli(LockCli):
    """The CLI on ana's library (`tests/test_channels_lock.py`), pushing trees of any files."""

    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], root: Path) -> None:
        super().__init__(endpoint, bucket, capsys, root)
        self.bucket = bucket

    def push_files(self, files: dict[str, bytes | str]) -> None:
        src = self.root / "src"
        for rel, body in files.items():
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body.encode() if isinstance(body, str) else body)
        code, _, err = self("push", str(src))
        assert code == 0, err


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    c = Cli(moto_endpoint, bucket, capsys, tmp_path)
    assert c("versioning", "enable")[0] == 0
    return c


# -- verify --lock by content ----------------------------------------------------------------------


def test_the_collision_pair_has_one_md5_and_two_sha256() -> None:
    assert COLLISION_A != COLLISION_B
    assert hashlib.md5(COLLISION_A).digest() == hashlib.md5(COLLISION_B).digest()
    assert hashlib.sha256(COLLISION_A).digest() != hashlib.sha256(COLLISION_B).digest()


def test_verify_names_a_file_replaced_by_the_other_half_of_an_md5_collision(
    cli: Cli, tmp_path: Path, s3_client: Any
) -> None:
    cli.push_files({"pdf/SKILL.md": SKILL.format(name="pdf"), "pdf/data.bin": COLLISION_A})
    lock = str(tmp_path / "skills-lock.json")
    assert cli("lock", "-o", lock)[0] == 0
    key = "users/ana/skills/pdf/data.bin"
    before = s3_client.head_object(Bucket=cli.bucket, Key=key)
    s3_client.put_object(Bucket=cli.bucket, Key=key, Body=COLLISION_B)
    after = s3_client.head_object(Bucket=cli.bucket, Key=key)
    assert after["ETag"] == before["ETag"]  # what an ETag comparison sees: nothing changed
    assert after["VersionId"] != before["VersionId"]
    code, out, _ = cli("verify", "--lock", lock)
    assert code == 1, out
    assert "pdf/data.bin: changed (sha256 differs)" in out
    assert "pdf/SKILL.md" not in out


def test_verify_names_another_version_of_the_same_bytes(cli: Cli, tmp_path: Path, s3_client: Any) -> None:
    cli.push_files({"pdf/SKILL.md": SKILL.format(name="pdf"), "pdf/notes.md": "notes"})
    lock = str(tmp_path / "skills-lock.json")
    assert cli("lock", "-o", lock)[0] == 0
    s3_client.put_object(Bucket=cli.bucket, Key="users/ana/skills/pdf/notes.md", Body=b"notes")
    code, out, _ = cli("verify", "--lock", lock)
    assert code == 1
    assert "pdf/notes.md: another version of the same bytes (VersionId differs)" in out


# -- eval's input files are bounded ----------------------------------------------------------------

TRIGGERS = [
    {"query": "fill in the fields of a pdf form", "should_trigger": True},
    {"query": "plan a birthday party", "should_trigger": False},
]


def test_eval_all_reports_a_hostile_triggers_file_and_evaluates_the_rest_with_exit_2(cli: Cli) -> None:
    cli.push_files(
        {
            "pdf/SKILL.md": SKILL.format(name="pdf"),
            "pdf/evals/triggers.json": json.dumps(TRIGGERS),
            "docx/SKILL.md": SKILL.format(name="docx"),
            "docx/evals/triggers.json": "[" * 400_000,  # under the 1 MiB cap, past any recursion limit
            "xlsx/SKILL.md": SKILL.format(name="xlsx"),
            "xlsx/evals/triggers.json": "[" * 5 + json.dumps(TRIGGERS) + "]" * 5,  # cheap, but nested
        }
    )
    code, out, err = cli("--json", "eval", "--all")
    assert code == 2, err
    assert "Traceback" not in err
    report = json.loads(out)
    assert [s["skill"] for s in report["skills"]] == ["pdf"]
    assert report["skills"][0]["should_trigger"] == 1
    errors = sorted(report["errors"])
    assert len(errors) == 2
    assert errors[0].startswith("docx/evals/triggers.json: ")
    assert "too costly to decode" in errors[0] or "nested deeper" in errors[0]
    assert errors[1].startswith("xlsx/evals/triggers.json: nested deeper than")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[" * 400_000, "nested deeper than 4 levels"),
        (b"[" * 50_000 + b"]" * 50_000, "nested deeper than 4 levels"),
        (b"," * 1_000_000, "too costly to decode"),
        (b"[[[[" + json.dumps(TRIGGERS).encode() + b"]]]]", "nested deeper than 4 levels"),
        (b"[{", "not JSON"),
    ],
    ids=["deep", "deep-closed", "commas", "nested", "not-json"],
)
def test_eval_refuses_a_hostile_queries_file_with_exit_2_and_a_clear_error(
    cli: Cli, tmp_path: Path, content: bytes, message: str
) -> None:
    cli.push_files({"docx/SKILL.md": SKILL.format(name="docx")})
    path = tmp_path / "q.json"
    path.write_bytes(content)
    code, _, err = cli("eval", "docx", "--queries", str(path))
    assert code == 2
    assert "Traceback" not in err
    assert "unexpected" not in err
    assert f"{path}: " in err
    assert message in err
    assert path.read_bytes() == content  # nothing lost


def test_a_hostile_lockfile_is_refused_with_a_clear_error(cli: Cli, tmp_path: Path) -> None:
    for content in (b"[" * 400_000, b"," * 1_000_000, b'{"schema": "s3skills.lock/1", "skills": ' * 5000):
        lock = tmp_path / "lock.json"
        lock.write_bytes(content)
        code, _, err = cli("verify", "--lock", str(lock))
        assert code == 1
        assert "not an s3skills lockfile" in err
        assert "Traceback" not in err


# -- a forged channel never widens a skill ---------------------------------------------------------


def test_a_forged_channel_entry_never_lists_a_nested_skills_files_under_its_parent(cli: Cli, s3_client: Any) -> None:
    from s3skills.config import Config
    from s3skills.layout import KeyLayout
    from s3skills.skills import SkillLibrary
    from s3skills.skills.versions.history import version_id_of
    from s3skills.storage import S3ObjectStore
    from s3skills.tenancy import Tenant

    cli.push_files({"deploy/SKILL.md": SKILL.format(name="deploy"), "deploy/notes.md": "deploy notes"})
    for rel, body in (("notes.md", "canary notes"), ("SKILL.md", SKILL.format(name="canary"))):  # nested in place
        s3_client.put_object(Bucket=cli.bucket, Key=f"users/ana/skills/deploy/canary/{rel}", Body=body.encode())
    assert cli("channel", "create", "production", "--from", "latest")[0] == 0
    layout = KeyLayout()
    key = layout.channels_prefix(layout.user_prefix("ana")) + "production.json"
    doc = json.loads(s3_client.get_object(Bucket=cli.bucket, Key=key)["Body"].read())
    # A library writer adds the nested skill's file to its parent's entry, with its real pin.
    deploy = doc["skills"]["deploy"]
    deploy["files"]["canary/notes.md"] = doc["skills"]["deploy/canary"]["files"]["notes.md"]
    deploy["version"] = version_id_of((p, f["etag"]) for p, f in deploy["files"].items())
    s3_client.put_object(Bucket=cli.bucket, Key=key, Body=json.dumps(doc).encode())
    store = S3ObjectStore(cli.bucket, endpoint_url=cli.base[-1])
    library = SkillLibrary(
        store, Config(channel="production", catalog_ttl=None, verify="always"), tenant=lambda: Tenant(user_id="ana")
    )
    loaded = library.load("deploy")
    assert loaded.files == ["/skills/deploy/SKILL.md", "/skills/deploy/notes.md"]
    assert loaded.version is not None
    assert sorted(f.path for f in loaded.version.files) == ["SKILL.md", "notes.md"]
    assert {f.path for f in library.files("deploy")} == {"SKILL.md", "notes.md"}
    assert library.open("deploy/canary", "notes.md").data == b"canary notes"  # the nested skill is served as itself


# -- history --json names what it left out --------------------------------------------------------


def test_history_json_lists_every_record_it_ignored_with_the_reason(cli: Cli, s3_client: Any) -> None:
    from s3skills.layout import KeyLayout
    from s3skills.skills.versions.records import new_record_id

    cli.push_files({"pdf/SKILL.md": SKILL.format(name="pdf"), "pdf/notes.md": "one"})
    cli.push_files({"pdf/notes.md": "two"})
    layout = KeyLayout()
    records = layout.records_prefix(layout.user_prefix("ana")) + "pdf/"
    keys = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=cli.bucket, Prefix=records)["Contents"])
    real = json.loads(s3_client.get_object(Bucket=cli.bucket, Key=keys[-1])["Body"].read())
    liar = new_record_id()  # names a VersionId the bucket never had
    files = [{**f, "version_id": "3HL4kqtJlcpXroDTDmJ-rmSpXd3dIbrHY"} for f in real["files"]]
    s3_client.put_object(
        Bucket=cli.bucket, Key=f"{records}{liar}.json", Body=json.dumps({**real, "id": liar, "files": files}).encode()
    )
    damaged = new_record_id()
    s3_client.put_object(Bucket=cli.bucket, Key=f"{records}{damaged}.json", Body=b"[" * 100_000)
    code, out, err = cli("--json", "history", "pdf")
    assert code == 0, err
    report = json.loads(out)
    assert [v["record"] for v in report["versions"]] == [k.rsplit("/", 1)[-1][:-5] for k in reversed(keys)]
    by_record = {i["record"]: i for i in report["ignored"] if i["record"]}
    assert set(by_record) == {liar}
    assert by_record[liar]["reason"]
    assert by_record[liar]["reason"] in err  # the same reason as the warning
    damaged_entries = [i for i in report["ignored"] if i["object"] and damaged in i["object"]]
    assert len(damaged_entries) == 1
    assert damaged_entries[0]["reason"]


def test_a_content_id_shared_with_an_md5_collision_is_refused_and_its_record_id_restores_the_real_bytes(
    cli: Cli, s3_client: Any
) -> None:
    cli.push_files({"pdf/SKILL.md": SKILL.format(name="pdf"), "pdf/data.bin": COLLISION_A})
    assert cli("channel", "create", "production", "--from", "latest")[0] == 0
    key = "users/ana/skills/pdf/data.bin"
    s3_client.put_object(Bucket=cli.bucket, Key=key, Body=COLLISION_B)  # same ETag, other bytes
    history = cli.json("history", "pdf")["versions"]
    assert len(history) == 2
    assert history[0]["version"] == history[1]["version"]  # the content id cannot tell them apart
    reviewed = history[1]["record"]
    assert reviewed is not None
    # The newest version with that id is the forged one: naming the id alone is refused.
    for argv in (
        ("channel", "set", "production", "pdf", "--version", history[0]["version"]),
        ("rollback", "pdf", "--to", history[0]["version"]),
        ("diff", "pdf", "--to", history[0]["version"]),
    ):
        code, _, err = cli(*argv)
        assert code == 1, argv
        assert "same ETags but other bytes" in err
        assert reviewed in err
    # The record id names one version: rollback restores its bytes, though their ETag is the current one's.
    code, out, err = cli("rollback", "pdf", "--to", reviewed)
    assert code == 0, err
    assert "already" not in out
    assert s3_client.get_object(Bucket=cli.bucket, Key=key)["Body"].read() == COLLISION_A
