"""No line over 200 characters from the CLI or the MCP server's log; tables never split an id.

On moto: a library of many invalid skills (long ids, `name` unlike the folder, 1,500-character
descriptions, metadata that is not text) and one real repository of the shared corpus
(github/awesome-copilot, which hosts load and the strictest policy refuses) go through
`validate`, `push`, `list`, `list --all`, `info`, `mcp --check` and the stdio server's
start-up (its stderr, where hosts keep the log). Every line printed is at most 200
characters, and every id in `list`'s table is whole (wrapped within its cell when long). A message longer than a line
is wrapped, never cut: every word of it is printed (push, `mcp --check`, the server's log).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, table_column
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_harness import child_env, server_args

from s3skills.cli import main
from s3skills.lines import MAX_LINE, summarise, wrap
from s3skills.testing import SeaweedBucket, skill_md, write_file

LONG = " ".join(["Automates invoices, contacts and payments through the accounting API."] * 22)  # ~1,500


def _bad_library(root: Path, count: int = 40) -> list[str]:
    ids = []
    for i in range(count):
        folder = f"acct-{i:02d}-" + "integration-automation-" * 4  # ~100 characters, one id
        folder = folder.rstrip("-")
        ids.append(folder)
        text = skill_md(f"Accounting Automation {i}", LONG, metadata="{version: 2, tags: [1, 2]}")
        write_file(root, f"{folder}/SKILL.md", text)
    return ids


def _long_lines(*texts: str) -> list[str]:
    return [line for text in texts for line in text.splitlines() if len(line) > MAX_LINE]


def _push(cli: Cli, directory: Path) -> str:
    """Push as a person would, plainly (push stores what the hosts load: no flag needed); its output."""
    assert cli("push", str(directory)) == 0, cli.err
    return cli.out + cli.err


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys, "ana")


def test_no_cli_line_is_over_200_characters_on_a_library_of_invalid_skills(
    cli: Cli, tmp_path: Path, bucket: str, moto_endpoint: str
) -> None:
    ids = _bad_library(tmp_path / "lib")
    printed: list[str] = []
    cli("validate", str(tmp_path / "lib"))
    printed += [cli.out, cli.err]
    printed.append(_push(cli, tmp_path / "lib"))
    for argv in (["list"], ["list", "--all"], ["info", ids[0]], ["mcp", "--check"]):
        cli(*argv)
        printed += [cli.out, cli.err]
    assert _long_lines(*printed) == []
    assert cli("list") == 0, cli.err
    assert sorted(table_column(cli.out, "ID", "ON")) == sorted(ids)  # whole: wrapped within its cell, never cut


@pytest.mark.slow  # a stdio server subprocess (~3 s): test_mcp_server.py keeps the fast stdio smoke
def test_no_server_start_up_line_is_over_200_characters_on_a_library_of_invalid_skills(
    cli: Cli, tmp_path: Path, bucket: str, moto_endpoint: str
) -> None:
    _bad_library(tmp_path / "lib")
    _push(cli, tmp_path / "lib")
    start_up = asyncio.run(_server_start_up(bucket, moto_endpoint))
    assert "are not listed by skills/list" in start_up  # the start-up warning is there, summarised
    assert _long_lines(start_up) == []


@pytest.mark.slow  # the largest corpus repository, pushed whole (to SeaweedFS: ~3 minutes on moto)
def test_pushing_a_real_repository_prints_no_line_over_200_characters(
    seaweed_bucket: SeaweedBucket, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed_bucket.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed_bucket.secret_key)
    cli = Cli(seaweed_bucket.endpoint_url, seaweed_bucket.bucket, capsys, "ana")
    from s3skills.testing.corpus import real_repository

    repo = real_repository("github/awesome-copilot")  # without the corpus: skipped (tests/conftest.py)
    printed = [_push(cli, repo.root)]
    cli("validate", str(repo.root))
    printed += [cli.out, cli.err]
    cli("list")
    printed += [cli.out, cli.err]
    assert _long_lines(*printed) == []


async def _server_start_up(bucket: str, endpoint: str) -> str:
    """The stdio server's stderr from start-up to the first answers."""
    params = StdioServerParameters(
        command=sys.executable,
        args=server_args(bucket, endpoint, "--layout", "seeds", "--user", "ana"),
        env=child_env(),
    )
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_prompts()
        errlog.seek(0)
        return errlog.read()


def test_summarise_and_wrap_keep_every_item_countable() -> None:
    items = [f"skill-{i}" for i in range(25)]
    assert summarise(items) == ", ".join(items[:10]) + " … and 15 more"
    assert summarise(items[:3]) == "skill-0, skill-1, skill-2"
    lines = wrap("error: " + " ".join(items * 20))
    assert all(len(line) <= MAX_LINE for line in lines)
    assert " ".join(line.strip() for line in lines) == "error: " + " ".join(items * 20)


def test_a_long_error_line_is_wrapped_not_cut(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing: Any = tmp_path / ("x" * 150) / ("y" * 150)
    assert main(["validate", str(missing)]) != 0
    err = capsys.readouterr().err
    assert _long_lines(err) == []
    assert len(err.splitlines()) > 1  # wrapped, nothing cut
    assert "is not a local path, and without --bucket/--user" in " ".join(line.strip() for line in err.splitlines())


def _unspaced(text: str) -> str:
    return "".join(text.split())


def _every_word_of(message: str, printed: str) -> bool:
    """Every character of `message` (but spaces) is printed, in order: wrapping, not cutting."""
    return _unspaced(message) in _unspaced(printed)


def _long_named_library(root: Path) -> list[str]:
    """Skills whose messages are over 200 characters: 128-character folders in 70-character
    categories, a `name` unlike the folder (mcp --check names them), a 1,500-character
    description, and one folder too long to be an id (push leaves it out, saying why)."""
    ids = []
    for i in range(3):
        category = f"category-{i}-" + "finance-operations-" * 3
        folder = (f"acct-{i:02d}-" + "integration-automation-" * 6)[:128].rstrip("-")
        ids.append(f"{category.rstrip('-')}/{folder}")
        write_file(root, f"{ids[-1]}/SKILL.md", skill_md(f"Accounting Automation {i}", LONG))
    write_file(root, "x" * 140 + "/SKILL.md", skill_md("too-long", "An id over 128 characters."))
    return ids


def test_messages_over_200_characters_are_wrapped_with_every_word(
    cli: Cli, tmp_path: Path, bucket: str, moto_endpoint: str
) -> None:
    from s3skills.cli.push_output import by_skill, skill_lines
    from s3skills.skills import parse_skill_md
    from s3skills.skills.format.naming import unservable_reason
    from s3skills.storage import S3ObjectStore
    from s3skills.transfer import push_tree

    root = tmp_path / "lib"
    ids = _long_named_library(root)
    store = S3ObjectStore(bucket, endpoint_url=moto_endpoint)
    try:  # what push will say, from the library's own report (a dry run writes nothing)
        report = push_tree(store, root, "ana/skills/", dry_run=True)
    finally:
        asyncio.run(store.aclose())
    said = [f"{i.path}: {i.reason}" for i in report.refused] + skill_lines(by_skill(report, report.problems))
    assert report.refused
    assert any(len(m) > MAX_LINE for m in said)  # the messages that used to be cut with "…"
    pushed = _push(cli, root)
    assert [m for m in said if not _every_word_of(m, pushed)] == []
    assert cli("mcp", "--check") == 1
    checked = cli.out + cli.err
    for skill_id in ids:
        name = parse_skill_md((root / skill_id / "SKILL.md").read_bytes(), folder=skill_id).metadata.name
        reason = unservable_reason(skill_id, name)
        assert reason is not None
        assert len(f"{skill_id}: {reason}") > MAX_LINE
        assert _every_word_of(f"{skill_id}: {reason}", checked)
    assert _long_lines(pushed, checked) == []


def test_the_server_log_wraps_long_records_and_keeps_every_word() -> None:
    import io
    import logging

    from s3skills.lines import WrappingFormatter, fit, listing

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(WrappingFormatter("s3skills-mcp: %(message)s"))
    log = logging.getLogger("s3skills.test.readable")
    log.addHandler(handler)
    log.propagate = False
    try:
        entry = "finance/" + "acct-integration-automation-" * 4 + ": its name 'Accounting Automation' is not its folder"
        log.warning("%s", fit(f"not served as a skill: {entry}\nrename the folder or the name"))
        items = [f"{'x' * 120}-{i}: the name {'y' * 90!r} differs from the folder; rename one" for i in range(12)]
        log.warning("%s", "\n".join(listing("12 of 12 skills are not listed:", items, "`s3skills mcp --check`")))
    finally:
        log.removeHandler(handler)
    printed = stream.getvalue()
    assert _long_lines(printed) == []
    assert _every_word_of(f"not served as a skill: {entry} rename the folder or the name", printed)
    for item in items[:10]:
        assert _every_word_of(item, printed)
    assert "… and 2 more; `s3skills mcp --check` lists them all" in printed
