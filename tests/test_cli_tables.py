"""Tables for big libraries (issue 36): `list`, `audit`, `history`, `approvals` and `find` fit the
terminal, keep ids whole and cut descriptions at the end; push shows a progress bar on a terminal.

The CLI runs in process on an in-memory store (`Context` with its store given), so a library of
1,700 skills is listed in about a second. The width comes from `COLUMNS` or from a real
pseudo-terminal (`os.openpty` with its window size set); the progress bar is looked for in what
a pseudo-terminal received, and not found when stderr is a pipe or with `--json`.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import termios
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import pytest
from cli_harness import table_column

from s3skills.cli.app import cli as cli_group
from s3skills.cli.context import Context, Settings
from s3skills.cli.tables import Column, fit_widths, terminal_width
from s3skills.testing import MemoryObjectStore, skill_md, write_file

VENDORS = ["composio", "awesome-copilot", "anthropic-skills", "microsoft-azure-devops", "getsentry", "trailofbits"]
APPS = ["activecampaign", "google-cloud-storage", "salesforce-marketing-cloud", "pull-request-review", "yara"]
KINDS = ["automation", "integration-best-practices", "rule-authoring", "troubleshooting-and-remediation"]
LONG_DESCRIPTION = (
    "Help address review and issue comments on the open GitHub pull request for the current branch "
    "using the gh CLI; verify gh auth first and ask before pushing anything."
)
ARN = "arn:aws:iam::123456789012:assumed-role/SkillsPlatformAdministrators/alice.martinez@example.com"


def _ids(count: int) -> list[str]:
    """Real-looking ids, 10 to 94 characters: vendor-app-kind folders, some in categories."""
    ids = []
    for i in range(count):
        vendor, app, kind = VENDORS[i % 6], APPS[(i // 6) % 5], KINDS[(i // 30) % 4]
        leaf = f"{vendor}-{app}-{kind}"[:60].rstrip("-") + f"-{i}"
        ids.append(f"{vendor}/{leaf}" if i % 3 == 0 else leaf if i % 7 else f"s{i}")
    return ids


def _seed(store: MemoryObjectStore, ids: list[str]) -> None:
    for i, skill_id in enumerate(ids):
        description = LONG_DESCRIPTION if i % 2 else f"Short one {i}."
        store.put_object(f"ana/skills/{skill_id}/SKILL.md", skill_md(skill_id.rsplit("/", 1)[-1], description))


def run(store: MemoryObjectStore, *argv: str, stderr: TextIO | None = None) -> tuple[int, str, str]:
    """`s3skills ARGV` in process on `store` (seeds' layout, user ana): status, stdout, stderr
    (empty when `stderr` is given: it went there)."""
    out, err = io.StringIO(), io.StringIO()
    ctx = Context(Settings(), stdout=out, stderr=stderr or err, _store=store)  # type: ignore[arg-type]
    args = ["--bucket", "library", "--user", "ana", "--layout", "seeds", *argv]
    status = cli_group.main(args, prog_name="s3skills", obj=ctx, standalone_mode=False)
    return (status if isinstance(status, int) else 0), out.getvalue(), err.getvalue()


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.fixture(scope="module")
def big_library() -> tuple[MemoryObjectStore, list[str]]:
    store, ids = MemoryObjectStore(), _ids(1700)
    _seed(store, ids)
    return store, ids


@pytest.mark.parametrize(("columns", "count"), [(80, 1700), (120, 300)])
def test_list_fits_the_width_keeps_every_id_whole_and_cuts_descriptions_at_the_end(
    big_library: tuple[MemoryObjectStore, list[str]], monkeypatch: pytest.MonkeyPatch, columns: int, count: int
) -> None:
    # 1,700 skills at 80 columns (issue 36's acceptance); 300 at 120 (rich takes ~1 s per 1,700 rows).
    store, ids = big_library if count == len(big_library[1]) else (MemoryObjectStore(), _ids(count))
    if store is not big_library[0]:
        _seed(store, ids)
    monkeypatch.setenv("COLUMNS", str(columns))
    status, out, _ = run(store, "list")
    assert status == 0
    assert _widest(out) <= columns
    assert max(len(i) for i in ids) > 80 - 20  # some ids cannot have a line of their own width at 80
    listed = table_column(out, "ID", "ON")
    assert sorted(listed) == sorted(ids)  # every id, whole (wrapped within its cell when long)
    on_one_line = {line.split("  ", 1)[0] for line in out.splitlines()}
    assert {i for i in ids if len(i) <= columns // 2} <= on_one_line  # shorter ids are not wrapped
    described = dict(zip(listed, table_column(out, "DESCRIPTION", "ON"), strict=True))
    long_ones = [described[i] for n, i in enumerate(ids) if n % 2]
    assert all(d.endswith("…") and LONG_DESCRIPTION.startswith(d[:-1].rstrip()) for d in long_ones)
    assert all(len(d) >= 12 for d in long_ones)  # a readable start of each
    assert len(out.splitlines()) < count * 2  # one line a skill, two for the longest ids


def _actions(store: MemoryObjectStore, tmp_path: Path) -> str:
    """Two pushes of a long-named skill by a role ARN (history and audit have rows)."""
    skill_id = "microsoft-azure-devops-salesforce-marketing-cloud-troubleshooting"
    for round_ in range(2):
        write_file(tmp_path / "lib", f"{skill_id}/SKILL.md", skill_md(skill_id, f"Version {round_}."))
        write_file(tmp_path / "lib", f"{skill_id}/scripts/run_{round_}.py", "print('hola')\n")
        status, _, err = run(store, "--actor", ARN, "push", str(tmp_path / "lib"))
        assert status == 0, err
    return skill_id


def test_audit_at_80_columns_keeps_the_time_whole_and_wraps_the_actor_within_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryObjectStore()
    skill_id = _actions(store, tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = run(store, "audit")
    assert status == 0
    assert _widest(out) <= 80
    times = table_column(out, "TIME (UTC)", "ACTION")
    assert len(times) >= 2
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", t) for t in times)  # the full timestamp
    assert set(table_column(out, "ACTOR", "ACTION")) == {ARN}  # the whole ARN, wrapped
    assert set(table_column(out, "SKILL", "ACTION")) == {skill_id}


def test_history_and_approvals_at_80_columns_fit_and_keep_ids_and_actors_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryObjectStore(versioning=True)
    skill_id = _actions(store, tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = run(store, "history", skill_id)
    assert status == 0
    assert _widest(out) <= 80
    assert len(table_column(out, "VERSION", "TIME (UTC)")) == 2
    assert {by.split("(")[0] for by in table_column(out, "BY", "TIME (UTC)")} == {ARN}
    status, out, _ = run(store, "approvals")
    assert status == 0
    assert _widest(out) <= 80
    assert table_column(out, "SKILL", "SCRIPTS DIGEST") == [skill_id]
    assert table_column(out, "SCRIPTS", "SCRIPTS DIGEST") == ["run_0.py, run_1.py"]


def test_find_at_80_columns_cuts_descriptions_to_the_width_and_gives_each_id_its_line(
    big_library: tuple[MemoryObjectStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = big_library
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = run(store, "find", "review", "pull", "request", "comments", "--limit", "20")
    assert status == 0
    found = [m.group(1) for m in re.finditer(r"^ *\d+\. (\S+)$", out, re.M)]
    assert len(found) == 20
    assert set(found) <= set(ids)
    assert all(len(line) <= 80 for line in out.splitlines() if line.strip() not in found and "skill(s)" not in line)


@pytest.mark.parametrize(
    ("widths", "total", "expected"),
    [
        ([10, 3, 40], 80, [10, 3, 40]),  # room for all: each its widest value
        ([70, 3, 40], 80, [61, 3, 12]),  # the cut column gives up room first, then the id wraps
        ([70, 3, 40], 20, [12, 3, 11]),  # a narrow terminal: whole columns down to 12, cut to its header
    ],
)
def test_fit_widths_shrinks_cut_columns_first_then_whole_ones_never_fixed_ones(
    widths: list[int], total: int, expected: list[int]
) -> None:
    columns = [Column("ID"), Column("ON", "fixed"), Column("DESCRIPTION", "cut")]
    row = ["i" * widths[0], "y" * widths[1], "d" * widths[2]]
    assert fit_widths(columns, [row], total) == expected


def test_a_description_holding_escape_sequences_reaches_the_terminal_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryObjectStore()
    # YAML's double-quoted escapes put a real ESC and BEL in the parsed description.
    text = '---\nname: trap\ndescription: "Clears \\e[2J the screen \\a and [bold]more[/bold]"\n---\n'
    store.put_object("ana/skills/trap/SKILL.md", text)
    monkeypatch.setenv("COLUMNS", "120")
    status, out, _ = run(store, "list")
    assert status == 0
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "Clears ?[2J the screen ? and [bold]more[/bold]" in out  # shown, never interpreted


def test_fit_widths_of_no_rows_gives_the_headers_their_width() -> None:
    assert fit_widths([Column("ID"), Column("DESCRIPTION", "cut")], [], 80) == [2, 11]


@pytest.mark.parametrize(
    ("value", "expected"), [("80", 80), ("120", 120), ("500", 200), ("0", 80), ("abc", 80), ("-5", 80)]
)
def test_terminal_width_honours_columns_up_to_200_and_ignores_nonsense(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int
) -> None:
    monkeypatch.setenv("COLUMNS", value)
    # Under a terminal the nonsense values fall back to its width; captured, as here, to 80.
    monkeypatch.setattr("sys.stdin", io.StringIO())
    monkeypatch.setattr("sys.stdout", io.StringIO())
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert terminal_width(io.StringIO()) == expected


@contextmanager
def pseudo_terminal(columns: int) -> Iterator[tuple[TextIO, list[bytes]]]:
    """A text stream on a pseudo-terminal `columns` wide, and what its other end received."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    received: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the slave end closed
                return
            if not chunk:
                return
            received.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    stream = open(slave, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - closed below
    try:
        yield stream, received
    finally:
        stream.close()
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)


def test_a_real_terminals_width_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    with pseudo_terminal(120) as (tty, _):
        assert terminal_width(tty) == 120


def _tree(root: Path, count: int) -> Path:
    for i in range(count):
        write_file(root, f"skill-{i:03d}/SKILL.md", skill_md(f"skill-{i:03d}", f"Skill {i}."))
        write_file(root, f"skill-{i:03d}/references/notes.md", f"notes {i}\n")
    return root


def _push_on(stderr: TextIO | None, *flags: str, tmp_path: Path) -> tuple[int, str]:
    status, out, err = run(MemoryObjectStore(), *flags, "push", str(_tree(tmp_path / "lib", 60)), stderr=stderr)
    return status, out + err


BAR = re.compile(r"push.*━.*\d+/\d+")


def test_push_shows_a_progress_bar_when_stderr_is_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    with pseudo_terminal(100) as (tty, received):
        status, out = _push_on(tty, tmp_path=tmp_path)
        tty.flush()
    assert status == 0
    shown = b"".join(received).decode("utf-8", "replace")
    assert BAR.search(shown), shown[:500]
    assert "Uploaded 120 files" in out  # the report is on stdout, apart from the bar


@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_push_shows_no_progress_bar_when_piped_or_with_json(
    tmp_path: Path, flags: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    if flags:  # --json on a terminal: still no bar
        with pseudo_terminal(100) as (tty, received):
            status, _ = _push_on(tty, *flags, tmp_path=tmp_path)
            tty.flush()
        shown: Any = b"".join(received).decode("utf-8", "replace")
    else:  # piped, even where FORCE_COLOR asks rich for colours (as some CI services set it)
        monkeypatch.setenv("FORCE_COLOR", "1")
        status, shown = _push_on(None, tmp_path=tmp_path)
    assert status == 0
    assert not BAR.search(shown)
    assert "━" not in shown


@pytest.mark.slow  # pushes the whole real-skills corpus (in memory, ~20 s)
def test_list_of_the_real_corpus_at_80_columns_fits_and_keeps_every_id_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from s3skills.testing.corpus import CorpusNotFound, real_repositories
    from s3skills.transfer import push_tree

    try:
        repositories = real_repositories()
    except CorpusNotFound as exc:
        pytest.skip(f"needs the real-skills corpus: {exc}")
    store = MemoryObjectStore()
    for repo in repositories:  # each repository under a category of its name: no clash between them
        push_tree(store, repo.root, "ana/skills/", category=repo.name.replace("/", "-").lower())
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = run(store, "list", "--all")
    assert status == 0
    assert _widest(out) <= 80
    listed = table_column(out, "ID", "ON")
    stored = {key.split("/", 2)[2].rsplit("/", 1)[0] for key in store.keys() if key.endswith("/SKILL.md")}
    assert len(listed) > 600
    assert len(set(listed)) == len(listed)
    assert set(listed) <= stored  # each listed id is a stored skill's, whole
