"""Approval before a shared skill's script runs, and the audit trail of who did what (moto, CLI)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from s3skills import S3Backend
from s3skills._loop import run_sync
from s3skills.cli import main
from s3skills.layout import KeyLayout
from s3skills.runner import ScriptRunner
from s3skills.skills.versions.approvals import Approval, scripts_digest
from s3skills.storage import S3ObjectStore

SKILL_MD = "---\nname: calc\ndescription: Doubles numbers.\n---\n# Calc\n"
MAIN = "import json, sys\nfrom helpers import double\nprint(json.dumps(double(json.load(sys.stdin)['n'])))\n"
HELPERS = "def double(n):\n    return 2 * n\n"
APPROVALS = KeyLayout().approvals_prefix(KeyLayout().shared_prefix("org"))


class Org:
    def __init__(self, endpoint: str, bucket: str, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = ["--bucket", bucket, "--shared", "org", "--endpoint-url", endpoint]
        self.endpoint, self.bucket, self.root, self.capsys = endpoint, bucket, root, capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*self.base, *argv])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def push(self, helpers: str = HELPERS, actor: str = "author") -> None:
        src = self.root / "src"
        if src.exists():
            shutil.rmtree(src)
        (src / "calc" / "scripts").mkdir(parents=True)
        (src / "calc" / "SKILL.md").write_text(SKILL_MD)
        (src / "calc" / "scripts" / "main.py").write_text(MAIN)
        (src / "calc" / "scripts" / "helpers.py").write_text(helpers)
        code, _, err = self("--actor", actor, "push", str(src))
        assert code == 0, err

    def run(self, **config: Any) -> Any:
        backend = S3Backend(self.bucket, endpoint_url=self.endpoint, shared_prefix="org", user_id="ana", **config)
        return ScriptRunner(backend, timeout=20).run("calc", "main.py", {"n": 21}, loaded=["calc"])


@pytest.fixture
def org(moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Org:
    o = Org(moto_endpoint, bucket, tmp_path, capsys)
    assert o("versioning", "enable")[0] == 0
    return o


def test_a_script_changed_after_approval_is_refused_and_runs_after_approve(org: Org) -> None:
    org.push()
    refused = org.run()
    assert not refused.ok
    assert "not approved" in str(refused.error)
    assert "approve calc --script scripts/main.py" in str(refused.error)
    _, out, _ = org("--json", "approvals")
    assert json.loads(out)["pending"][0]["scripts"] == ["helpers.py", "main.py"]
    assert org("--actor", "reviewer", "approve", "calc", "--script", "scripts/main.py")[0] == 0
    ran = org.run()
    assert ran.ok, ran.error
    assert ran.result == 42
    # A helper the script imports changes: the folder's digest changes, the run is refused again.
    org.push(helpers="def double(n):\n    return 3 * n\n")
    again = org.run()
    assert not again.ok
    assert "not approved" in str(again.error)
    assert org("--actor", "reviewer", "approve", "calc")[0] == 0
    assert org.run().result == 63
    # With require_approval off (a deployment's choice) it runs without any.
    org.push(helpers="def double(n):\n    return 4 * n\n")
    from s3skills.config import Config

    config = Config(shared_library="org", require_approval=False)
    assert org.run(config=config).result == 84


def test_an_approval_forged_for_other_content_is_ignored(org: Org) -> None:
    org.push()
    assert org("approve", "calc")[0] == 0
    org.push(helpers="import os\ndef double(n):\n    return n\n")
    store = S3ObjectStore(org.bucket, endpoint_url=org.endpoint)
    files = {"main.py": MAIN.encode(), "helpers.py": b"import os\ndef double(n):\n    return n\n"}
    current = scripts_digest(files)
    objects, _ = run_sync(store.alist(APPROVALS))
    old = run_sync(store.aget(objects[0].key)).data
    # A library writer copies the old approval under the new content's key: its body names other content.
    run_sync(store.aput(f"{APPROVALS}calc/{current}.json", old))
    assert "not approved" in str(org.run().error)
    # One that names other scripts than the one run approves nothing of it either.
    forged = Approval("calc", current, ("other.py",), "mallory", "2026-01-01T00:00:00+00:00")
    run_sync(store.aput(f"{APPROVALS}calc/{current}.json", forged.to_bytes()))
    assert "not approved" in str(org.run().error)
    # Damaged ones are ignored too, never raised.
    run_sync(store.aput(f"{APPROVALS}calc/{current}.json", b"[" * 50_000))
    assert "not approved" in str(org.run().error)


def test_audit_shows_the_actor_of_pushes_rollbacks_channel_changes_and_approvals(org: Org) -> None:
    org.push(actor="alice")
    org.push(helpers="def double(n):\n    return 5 * n\n", actor="bob")
    code, out, _ = org("--json", "history", "calc")
    first = json.loads(out)["versions"][1]["version"]
    assert org("--actor", "carol", "rollback", "calc", "--to", first)[0] == 0
    assert org("--actor", "dave", "channel", "create", "production", "--from", "latest")[0] == 0
    assert org("--actor", "erin", "channel", "set", "production", "calc", "--version", first)[0] == 0
    assert org("--actor", "frank", "approve", "calc")[0] == 0
    assert org("--actor", "gina", "disable", "calc")[0] == 0
    code, out, err = org("--json", "audit")
    assert code == 0, err
    actions = [(a["actor"], a["action"]) for a in json.loads(out)["actions"]]
    assert set(actions) == {
        ("alice", "push"),
        ("bob", "push"),
        ("carol", "rollback"),
        ("dave", "channel create"),
        ("erin", "channel set"),
        ("frank", "approve"),
        ("gina", "disable"),
    }
    code, out, _ = org("--json", "audit", "calc", "--since", "1d")
    assert {a["actor"] for a in json.loads(out)["actions"]} >= {"alice", "erin", "frank"}
    code, out, _ = org("--json", "audit", "--since", "2999-01-01")
    assert json.loads(out)["actions"] == []
    assert org("audit", "--since", "yesterday")[0] == 1


def test_without_actor_the_aws_caller_identity_is_recorded(org: Org) -> None:
    org.push(actor="")
    _, out, _ = org("--json", "audit")
    actors = {a["actor"] for a in json.loads(out)["actions"]}
    assert len(actors) == 1
    assert next(iter(actors)).startswith("arn:aws:")  # moto answers STS GetCallerIdentity on loopback


def test_with_an_approvals_prefix_only_approvals_there_count(org: Org) -> None:
    org.push()
    # An approval beside the library (where any library writer can write) does not count
    # for a deployment whose approvals live under their own prefix.
    assert org("approve", "calc")[0] == 0
    from s3skills.config import Config

    config = Config(shared_library="org", approvals_prefix="approvals/org/")
    assert "not approved" in str(org.run(config=config).error)
    assert org("approve", "calc", "--approvals-prefix", "approvals/org/")[0] == 0
    assert org.run(config=config).result == 42
    with pytest.raises(ValueError, match="approvals_prefix"):
        Config(approvals_prefix="no-slash")
