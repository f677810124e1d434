"""The console in a real browser (headless Chromium through Playwright): slow.

A curator reviews, diffs, approves, promotes and disables on a library pushed from the real
corpus to SeaweedFS, and the CLI and an agent's view agree afterwards; a reader's POST and a
POST without a CSRF token are refused; a hostile library runs no script, whatever page shows it.
Screenshots go to $S3SKILLS_CONSOLE_SCREENSHOTS (docs/console for docs/CONSOLE.md) or tmp_path.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from console_browser import ConsoleProcess, browser, log_in, need_chromium, payload_globals, shoot, watch
from console_harness import CURATOR, READER, write_skill, write_tokens

from s3skills import S3Backend
from s3skills.cli import main
from s3skills.testing import SeaweedBucket

pytestmark = pytest.mark.slow


class Org:
    """The CLI on the shared library `org` of one bucket."""

    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.globals = ["--bucket", bucket, "--shared", "org", "--endpoint-url", endpoint]
        self.endpoint, self.bucket, self.capsys = endpoint, bucket, capsys

    def __call__(self, *argv: str) -> Any:
        self.capsys.readouterr()
        code = main([*self.globals, "--json", *argv])
        out = self.capsys.readouterr()
        assert code == 0, out.err
        return json.loads(out.out) if out.out.strip() else {}


def _script_of(src: Path, sid: str) -> Path:
    """The first script of skill `sid` in the pushed tree (push names a skill by its folder)."""
    folder = next(p.parent for p in sorted(src.rglob("SKILL.md")) if p.parent.name == sid.rsplit("/", 1)[-1])
    return sorted(p for p in (folder / "scripts").rglob("*") if p.is_file() and p.suffix in (".py", ".sh"))[0]


def _usage_log(path: Path, skills: list[str]) -> Path:
    """Loads of `skills` over the last ten days, as the agents' usage records shipped as JSON lines."""
    now = datetime.now(UTC)
    lines = [
        json.dumps(
            {"event": "skill_load", "skill": sid, "outcome": "ok", "time": (now - timedelta(days=d)).isoformat()}
        )
        for rank, sid in enumerate(skills)
        for d in range(10)
        for _ in range((d * (rank + 1)) % 7 + 1)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_curator_diffs_approves_promotes_and_disables_in_chromium(
    seaweed_bucket: SeaweedBucket, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    need_chromium()
    from s3skills.testing.corpus import CorpusNotFound, real_repositories

    try:
        repo = next(r for r in real_repositories() if r.name == "getsentry/skills")
    except CorpusNotFound:
        pytest.skip("the real-skills corpus is not on this machine")
    keys = {"AWS_ACCESS_KEY_ID": seaweed_bucket.access_key, "AWS_SECRET_ACCESS_KEY": seaweed_bucket.secret_key}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    org = Org(seaweed_bucket.endpoint_url, seaweed_bucket.bucket, capsys)
    org("versioning", "enable")
    src = tmp_path / "lib"
    shutil.copytree(repo.root, src)
    org("--actor", "author", "push", str(src))
    with_scripts = [p["id"] for p in org("approvals")["pending"]]
    assert with_scripts
    for sid in with_scripts:
        org("--actor", "lead", "approve", sid)
    org("channel", "create", "staging", "--from", "latest")
    org("channel", "create", "production", "--from", "latest")
    changed = with_scripts[0]
    script = _script_of(src, changed)
    script.write_text(script.read_text() + "\n# changed: also prints the run's id\n")
    org("--actor", "author", "push", str(src))
    org("channel", "promote", "latest", "staging")
    assert [p["id"] for p in org("approvals")["pending"]] == [changed]
    every = [s["id"] for s in org("list")["skills"]]
    quiet = next(s for s in every if s not in with_scripts)
    shots = tmp_path / "shots"

    usage = _usage_log(tmp_path / "usage.jsonl", every[:4])
    console = ConsoleProcess(org.globals, write_tokens(tmp_path / "tokens.json"), keys, "--usage-log", str(usage))
    try:
        with browser() as chromium:
            page = chromium.new_page()
            dialogs = watch(page)
            page.goto(f"{console.url}/login")
            shoot(page, shots, "login")
            log_in(page, console.url, CURATOR)
            assert page.locator("table.skills tbody tr").count() == min(len(every), 50)
            assert page.locator("table.skills svg.spark polyline").count() == min(len(every), 50)  # loads, 30 days
            shoot(page, shots, "library")
            page.click(f"a.skill-link[href='/skill?id={changed.replace('/', '%2F')}']")
            page.wait_for_selector("h2:has-text('Versions')")
            shoot(page, shots, "skill")
            page.click("#compare")
            page.wait_for_selector(".difffile")
            assert "changed: also prints the run" in page.inner_text("table.sbs")
            shoot(page, shots, "diff")
            page.goto(f"{console.url}/approvals")
            assert "changed: also prints the run" in page.inner_text("main")
            shoot(page, shots, "approvals")
            page.click("button.approve")
            page.wait_for_selector("p.done")
            assert org("approvals")["pending"] == []
            assert ("cora", "approve", changed) in [
                (a["actor"], a["action"], a["skill"]) for a in org("audit")["actions"]
            ]
            page.goto(f"{console.url}/channels")
            shoot(page, shots, "channels")
            page.click("a:has-text('Promote staging → production')")
            page.wait_for_selector("#confirm-promote")
            assert changed in page.inner_text("main")
            shoot(page, shots, "promote")
            page.click("#confirm-promote")
            page.wait_for_selector("p.done")
            production, staging = org("channel", "show", "production"), org("channel", "show", "staging")
            assert production["skills"] == staging["skills"]
            assert production["actor"] == "cora"
            page.goto(f"{console.url}/skill?id={quiet}")
            page.click("#toggle-enabled")
            page.wait_for_selector("p.done")
            page.goto(f"{console.url}/audit")
            assert "cora" in page.inner_text("table.audit")
            shoot(page, shots, "audit")
            page.goto(f"{console.url}/usage")
            assert page.locator("#usage-plot").evaluate("(img) => img.complete && img.naturalWidth > 0")
            shoot(page, shots, "usage")
            assert dialogs == []
    finally:
        console.close()
    agent = S3Backend(
        seaweed_bucket.bucket, endpoint_url=seaweed_bucket.endpoint_url, shared_prefix="org", user_id="ana"
    )
    try:
        seen = {s.id for s in agent.skills.index()}
    finally:
        agent.close()
    assert quiet not in seen
    assert changed in seen


HOSTILE_MD = """---
name: evil
description: <img src=x onerror="window.pwned7=1;alert(7)"> A skill that tries everything.
---
# Evil <script>window.pwned=1; alert(1)</script>

<img src="x" onerror="window.pwned2=1; alert(2)">
<a href="javascript:window.pwned3=1;alert(3)" id="js-link">click me</a>
[markdown link](javascript:window.pwned4=1)
<svg onload="window.pwned5=1"><script>window.pwned6=1</script></svg>
<iframe src="javascript:alert(8)"></iframe>
<form action="javascript:alert(9)"><button id="evil-button">go</button></form>
<div onmouseover="alert(10)" id="hover-me">hover me</div>
"""
HOSTILE_FILES: dict[str, str | bytes] = {
    "x.html": "<html><body><script>window.pwned=1; alert('html')</script><h1>html file</h1></body></html>",
    "pic.svg": '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(11)"><script>alert(12)</script></svg>',
    "scripts/run.py": "print('</pre><script>alert(13)</script>')\n",
    "notes.md": "<script>alert(14)</script>",
}


def test_a_hostile_library_runs_no_script_and_a_reader_cannot_post(
    moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need_chromium()
    org = Org(moto_endpoint, bucket, capsys)
    src = tmp_path / "lib"
    write_skill(src, "evil", HOSTILE_MD, HOSTILE_FILES)
    org("push", str(src))
    console = ConsoleProcess(org.globals, write_tokens(tmp_path / "tokens.json"), {})
    try:
        with browser() as chromium:
            control = chromium.new_page()  # the detector sees a payload that does run
            seen = watch(control)
            control.set_content("<script>window.pwned = 1; alert('ran')</script>")
            assert payload_globals(control) == ["pwned"]
            assert seen == ["ran"]
            page = chromium.new_page()
            dialogs = watch(page)
            log_in(page, console.url, READER)
            for path in (
                "/",
                "/?q=%3Cscript%3Ewindow.pwned%3D1%3C%2Fscript%3E",
                "/skill?id=evil",
                "/file?id=evil&path=x.html",
                "/file?id=evil&path=pic.svg",
                "/file?id=evil&path=scripts/run.py",
                "/file?id=evil&path=notes.md",
                "/raw?id=evil&path=notes.md",
                "/raw?id=evil&path=x.html",
            ):
                page.goto(console.url + path)
                assert payload_globals(page) == [], path
            assert page.evaluate("() => document.contentType") == "text/plain"  # x.html is not HTML
            page.goto(f"{console.url}/raw?id=evil&path=pic.svg")  # UTF-8 text: its source, never drawn
            assert page.evaluate("() => document.contentType") == "text/plain"
            assert payload_globals(page) == []
            page.goto(f"{console.url}/skill?id=evil")
            page.hover("text=hover me")
            for link in page.locator(".markdown a").all():
                link.click(no_wait_after=True)
            assert page.locator(".markdown iframe, .markdown form, .markdown svg, .markdown script").count() == 0
            assert payload_globals(page) == []
            assert dialogs == []
            # A reader's POST is refused, with or without the page's CSRF token.
            csrf = page.get_attribute("input[name=csrf]", "value")
            refused = page.request.post(f"{console.url}/disable", form={"id": "evil", "csrf": csrf or ""})
            assert refused.status == 403
            curator = chromium.new_page()
            log_in(curator, console.url, CURATOR)
            assert curator.request.post(f"{console.url}/disable", form={"id": "evil"}).status == 403
    finally:
        console.close()
    assert [s["id"] for s in org("list")["skills"]] == ["evil"]  # still enabled
