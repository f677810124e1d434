"""The console's skill pages and changes: versions, diffs, channels, approvals, enable/disable.

Every change goes through the CLI's own command as the signed-in curator, so the CLI sees
it and `audit` names them. Fast: TestClient on the moto fixture.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from console_harness import CURATOR, READER, OrgConsole, write_skill
from starlette.testclient import TestClient

from s3skills.aio import run_sync
from s3skills.console import TokenRoles, create_app
from s3skills.skills.versions.approvals import Approval, scripts_digest

CALC = "---\nname: calc\ndescription: Doubles numbers for accounting sheets.\n---\n# Calc\n\nRun main.py.\n"
MAIN = "import sys\nprint(2 * int(sys.argv[1]))\n"
TRIGGERS = json.dumps(
    [
        {"query": "double these numbers for the accounting sheet", "should_trigger": True},
        {"query": "write a poem about autumn", "should_trigger": False},
    ]
)


@pytest.fixture
def org(moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> OrgConsole:
    o = OrgConsole(moto_endpoint, bucket, tmp_path, capsys)
    assert o.cli("versioning", "enable")[0] == 0
    write_skill(
        o.src, "calc", CALC, {"scripts/main.py": MAIN, "evals/triggers.json": TRIGGERS, "logo.png": b"\x89PNG\r\n"}
    )
    o.push(actor="alice")
    write_skill(
        o.src,
        "calc",
        CALC.replace("Run main.py.", "Run main.py with a number."),
        {"scripts/main.py": MAIN.replace("2 *", "3 *"), "evals/triggers.json": TRIGGERS, "logo.png": b"\x89PNG\r\n"},
    )
    o.push(actor="bob")
    return o


def _versions(org: OrgConsole) -> list[str]:
    code, out, err = org.cli("--json", "history", "calc")
    assert code == 0, err
    return [v["version"] for v in json.loads(out)["versions"]]


def test_the_skill_page_shows_files_and_versions_with_who_and_which_command(org: OrgConsole) -> None:
    page = org.client(READER).get("/skill?id=calc").text
    assert "scripts/main.py" in page
    assert "logo.png" in page
    assert "alice" in page
    assert "bob" in page
    assert page.count("<td>push</td>") == 2
    assert "Run main.py with a number." in page  # SKILL.md rendered


def test_a_text_file_is_highlighted_and_an_image_is_shown(org: OrgConsole) -> None:
    client = org.client(READER)
    script = client.get("/file?id=calc&path=scripts/main.py").text
    assert 'class="hl' in script
    image = client.get("/file?id=calc&path=logo.png").text
    assert '<img class="shown" src="/raw?id=calc&path=logo.png"' in image
    raw = client.get("/raw?id=calc&path=logo.png")
    assert raw.headers["content-type"] == "image/png"


def test_two_versions_are_diffed_side_by_side_for_every_file(org: OrgConsole) -> None:
    new, old = _versions(org)[:2]
    page = org.client(READER).get(f"/diff?id=calc&from={old}&to={new}").text
    assert "scripts/main.py" in page
    assert "SKILL.md" in page
    assert '<tr class="changed">' in page
    assert "print(3 * int" in page
    assert "print(2 * int" in page
    assert "evals/triggers.json" not in page  # unchanged files are left out


def test_the_trigger_evals_of_a_skill_that_ships_them_are_shown(org: OrgConsole) -> None:
    page = org.client(READER).get("/skill?id=calc&evals=1").text
    assert "recall 1.0" in page
    assert "write a poem about autumn" in page
    usage = org.client(READER).get("/usage?evals=1").text
    assert "1 skill(s) ship trigger evals; 0 fail." in usage


def test_disable_and_enable_are_recorded_as_the_console_user(org: OrgConsole) -> None:
    client = org.client(CURATOR)
    done = client.post("/disable", data={"id": "calc", "csrf": org.csrf(client)})
    assert done.status_code == 303
    assert [s.metadata.enabled for s in org.source.library.index(include_disabled=True)] == [False]
    _code, out, _ = org.cli("--json", "list")
    assert [s["id"] for s in json.loads(out)["skills"]] == []
    assert "disabled" in client.get("/skill?id=calc").text
    assert client.post("/enable", data={"id": "calc", "csrf": org.csrf(client)}).status_code == 303
    _, out, _ = org.cli("--json", "audit", "calc")
    actions = [(a["actor"], a["action"]) for a in json.loads(out)["actions"]]
    assert ("cora", "disable") in actions
    assert ("cora", "enable") in actions


@pytest.mark.slow  # ~3 s: three pushes and the queue's diffs
def test_approving_from_the_queue_shows_the_diff_and_is_recorded_like_s3skills_approve(org: OrgConsole) -> None:
    client = org.client(CURATOR)
    _, out, _ = org.cli("--json", "approvals")
    assert [p["id"] for p in json.loads(out)["pending"]] == ["calc"]
    queue = client.get("/approvals").text
    assert "never approved" in queue
    assert client.post("/approve", data={"id": "calc", "csrf": org.csrf(client)}).status_code == 303
    _, out, _ = org.cli("--json", "approvals")
    assert json.loads(out)["pending"] == []
    _, out, _ = org.cli("--json", "audit", "calc")
    assert ("cora", "approve") in [(a["actor"], a["action"]) for a in json.loads(out)["actions"]]
    # A changed script comes back to the queue, with its diff against the approved version.
    write_skill(org.src, "calc", CALC, {"scripts/main.py": MAIN.replace("2 *", "5 *")})
    org.push(actor="mallory")
    queue = client.get("/approvals").text
    assert "Last approved by cora" in queue
    assert "print(5 * int" in queue
    assert "print(3 * int" in queue


@pytest.mark.slow  # ~4 s: two channels, a set, a promotion and their diffs
def test_a_channel_version_is_set_and_promoted_after_a_confirmation_showing_the_diff(org: OrgConsole) -> None:
    new, old = _versions(org)[:2]
    assert org.cli("channel", "create", "staging", "--from", "latest")[0] == 0
    assert org.cli("channel", "create", "production", "--from", "latest")[0] == 0
    client = org.client(CURATOR)
    csrf = org.csrf(client)
    done = client.post("/channels/set", data={"channel": "production", "id": "calc", "version": old, "csrf": csrf})
    assert done.status_code == 303, done.text
    _, out, _ = org.cli("--json", "channel", "show", "production")
    assert json.loads(out)["skills"]["calc"]["version"] == old
    channels = client.get("/channels").text
    assert "1 differ from latest" in channels
    skill = client.get("/skill?id=calc").text
    assert "production" in skill
    confirm = client.get("/channels/promote?source=staging&target=production")
    assert "1 skill(s) would change" in confirm.text
    assert "print(3 * int" in confirm.text  # the diff of what promoting changes
    assert (
        client.post("/channels/promote", data={"source": "staging", "target": "production", "csrf": csrf}).status_code
        == 400
    )
    promoted = client.post(
        "/channels/promote", data={"source": "staging", "target": "production", "confirm": "yes", "csrf": csrf}
    )
    assert promoted.status_code == 303
    _, out, _ = org.cli("--json", "channel", "show", "production")
    assert json.loads(out)["skills"]["calc"]["version"] == new
    _, out, _ = org.cli("--json", "audit")
    actions = [(a["actor"], a["action"]) for a in json.loads(out)["actions"]]
    assert ("cora", "channel set") in actions
    assert ("cora", "channel promote") in actions


def test_a_change_that_fails_shows_the_clis_message_and_changes_nothing(org: OrgConsole) -> None:
    client = org.client(CURATOR)
    csrf = org.csrf(client)
    bad = client.post("/channels/set", data={"channel": "latest", "id": "calc", "version": "zzz", "csrf": csrf})
    assert bad.status_code == 400
    assert "built in" in bad.text or "no version" in bad.text
    assert client.post("/disable", data={"id": "../calc", "csrf": csrf}).status_code == 400
    assert client.post("/disable", data={"id": "nope", "csrf": csrf}).status_code == 400
    assert org.source.library.get("calc").metadata.enabled


def test_the_audit_page_filters_by_skill_actor_command_and_date(org: OrgConsole) -> None:
    client = org.client(READER)
    everything = client.get("/audit").text
    assert "alice" in everything
    assert "bob" in everything
    only_bob = client.get("/audit?actor=bob").text
    assert "bob" in only_bob
    assert "alice" not in only_bob.split("<tbody>")[1]
    assert "2 action(s)" in client.get("/audit?command=push").text
    assert "0 action(s)" in client.get("/audit?until=2000-01-01").text
    assert "0 action(s)" in client.get("/audit?skill=nope").text
    assert client.get("/audit?since=yesterday-ish").status_code == 400


def _usage_log(path: Path) -> Path:
    now = datetime.now(UTC)
    lines = [
        json.dumps({"event": "skill_load", "skill": "calc", "outcome": "ok", "time": now.isoformat()}),
        json.dumps({"event": "skill_load", "skill": "calc", "outcome": "ok", "created": now.timestamp()}),
        json.dumps({"event": "script_run", "skill": "calc", "outcome": "error", "time": now.isoformat()}),
        json.dumps({"event": "skill_load", "skill": "calc", "outcome": "ok", "time": "2001-01-01T00:00:00"}),
        "not json",
        json.dumps({"skill": ["a list"]}),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_usage_page_counts_loads_per_skill_and_names_the_skills_never_loaded(org: OrgConsole) -> None:
    write_skill(org.src, "idle", "---\nname: idle\ndescription: Never used by anyone.\n---\n# Idle\n")
    org.push()
    app = create_app(org.source, TokenRoles(org.tokens), usage_log=_usage_log(org.root / "usage.jsonl"))
    client = TestClient(app, headers={"Authorization": f"Bearer {READER}"})
    page = client.get("/usage").text
    assert "2 line(s) of the log did not parse" in page
    row = page.split('skill?id=calc">calc</a>')[1].split("</tr>")[0]
    assert "<td>2</td>" in row  # two loads in the window, the 2001 one is outside it
    assert "<td>1</td>" in row  # one failed script run
    never = page.split("Never loaded")[1]
    assert "idle" in never
    assert "calc" not in never.split("</aside>")[0]
    plot = client.get("/usage.svg")
    assert plot.headers["content-type"].startswith("image/svg+xml")
    assert "sandbox" in plot.headers["content-security-policy"]
    assert plot.text.lstrip().startswith("<?xml")
    assert '<span class="total">2</span>' in client.get("/").text  # the library page's loads column


def test_with_no_load_counted_the_usage_page_says_where_loads_come_from(org: OrgConsole) -> None:
    page = org.client(READER).get("/usage").text
    assert "No load counted" in page
    assert ".s3skills/usage/" in page
    assert "--usage-log" in page


def _approve_as_recorded(org: OrgConsole, main: str, *, when: str | None = None) -> str:
    """An approval of `calc`'s scripts folder holding `main` as `scripts/main.py` (its digest)."""
    digest = scripts_digest({"main.py": main.encode()})
    record = Approval("calc", digest, ("*",), "cora", when or datetime.now(UTC).isoformat())
    prefix = org.source.layout.approvals_prefix(org.source.prefix)
    run_sync(org.source.store.aput(f"{prefix}calc/{digest}.json", record.to_bytes()))
    return digest


def _queue_diff(org: OrgConsole) -> str:
    page = org.client(READER).get("/approvals")
    assert page.status_code == 200
    return page.text.split('class="approval"')[1]


def test_the_queue_diffs_against_the_approved_scripts_not_the_previous_version(org: OrgConsole) -> None:
    _approve_as_recorded(org, MAIN)  # v1, alice's "2 *"; bob's v2 ("3 *") changed it
    write_skill(org.src, "calc", CALC, {"scripts/main.py": MAIN.replace("2 *", "5 *")})
    org.push(actor="mallory")  # v3
    v3, _, v1 = _versions(org)[:3]
    queue = _queue_diff(org)
    assert "Last approved by cora" in queue
    assert f"against version <code>{v1}</code>" in queue
    assert f"{v3}/scripts/main.py" in queue or "print(5 * int" in queue
    assert "print(2 * int" in queue  # the approved script, against the latest...
    assert "print(5 * int" in queue
    assert "print(3 * int" not in queue  # ...never the version in between


def test_an_approval_of_scripts_no_version_has_is_named_and_nothing_is_diffed(org: OrgConsole) -> None:
    _approve_as_recorded(org, "print('never pushed')\n")
    queue = _queue_diff(org)
    assert "nothing to diff against" in queue
    assert "print(3 * int" not in queue  # no diff against some other version
    assert "print(2 * int" not in queue
