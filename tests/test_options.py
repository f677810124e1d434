"""Every documented option and variable (`s3skills.options`) through every entry point, on moto.

One bucket holds four libraries that the options tell apart: ana's own (1 skill), the
organisation library `acme` under it (+1), ana's in the `seeds` layout (3 skills) and ana's
in a layout file's layout (4 skills). Each case gives one option one way (a flag, its
canonical variable, an AWS variable, a deprecated alias) and checks what each entry point
then sees: `s3skills list` (ids), `s3skills mcp --check` and `python -m s3skills.serve.mcp
--check` (the count the server lists, built exactly as when it serves), and the LangGraph
example's backend (ids). Two real stdio sessions with the MCP SDK's client check that
global options given before `mcp` reach the served library.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_harness import child_env

from s3skills.aio import run_sync
from s3skills.cli import main
from s3skills.options import OPTIONS
from s3skills.serve import mcp as serve_mcp
from s3skills.tenancy import Tenant
from s3skills.testing import MotoServer, make_bucket, skill_md, unique_bucket_name, write_file

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "langgraph-server" / "agent.py"

OWN = {"ana-own"}
ACME = {"acme-guide"}
SHARED = OWN | ACME
CLI_AND_MCP = ("cli", "cli-mcp", "serve-mcp")
SEEDS = {"seeds-one", "seeds-two", "seeds-three"}
CUSTOM = {"custom-one", "custom-two", "custom-three", "custom-four"}
LAYOUT_TOML = (
    '[layout]\nroot = "prod/"\nuser_skills = "people/{user_id}/skills/"\n'
    'workspace = "people/{user_id}/threads/{thread_id}/"\n'
)


def _tree(root: Path, names: set[str]) -> Path:
    for name in sorted(names):
        write_file(root, f"{name}/SKILL.md", skill_md(name, f"Handles {name} work. Use it for {name} tasks."))
    return root


@dataclass
class Library:
    """The seeded bucket and how to reach it."""

    bucket: str
    endpoint: str
    layout_file: Path


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    """The four libraries, seeded once for the module on a moto server of its own."""
    tmp_path = tmp_path_factory.mktemp("options")
    layout_file = tmp_path / "layout.toml"
    layout_file.write_text(LAYOUT_TOML)
    with MotoServer() as server:
        bucket = make_bucket(server.endpoint_url, unique_bucket_name(), region=os.environ["AWS_DEFAULT_REGION"])
        base = ["--bucket", bucket, "--endpoint-url", server.endpoint_url]
        pushes = [
            (["--user", "ana"], OWN),
            (["--shared", "acme"], {"acme-guide"}),
            (["--user", "ana", "--layout", "seeds"], SEEDS),
            (["--user", "ana", "--layout-file", str(layout_file)], CUSTOM),
        ]
        for i, (flags, names) in enumerate(pushes):
            assert main([*base, *flags, "push", str(_tree(tmp_path / f"lib{i}", names))]) == 0
        yield Library(bucket, server.endpoint_url, layout_file)


@dataclass
class Case:
    """One option given one way: flags and variables (`{file}`, `{endpoint}`, `{bucket}` filled in)."""

    id: str
    flags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    sees: set[str] | None = None  # the ids ana sees; None: `error` instead
    error: str = ""
    warns: str = ""
    entry_points: tuple[str, ...] = ("cli", "cli-mcp", "serve-mcp", "langgraph")
    user: bool = True  # add `--user ana` unless the case names the user itself


CASES = [
    Case("bucket-flag", ["--bucket", "{bucket}"], sees=OWN),
    Case("S3SKILLS_BUCKET", env={"S3SKILLS_BUCKET": "{bucket}"}, sees=OWN),
    Case("user-flag", ["--user", "ana"], sees=OWN, entry_points=("cli", "cli-mcp", "serve-mcp")),
    Case("S3SKILLS_USER", env={"S3SKILLS_USER": "ana"}, sees=OWN, entry_points=("cli", "cli-mcp", "serve-mcp")),
    Case("shared-flag", ["--shared", "acme"], sees=SHARED),
    Case("S3SKILLS_SHARED", env={"S3SKILLS_SHARED": "acme"}, sees=SHARED),
    # --shared NAME alone is the shared library itself, on every entry point with a command line.
    Case("shared-flag-alone", ["--shared", "acme"], sees=ACME, entry_points=CLI_AND_MCP, user=False),
    Case("S3SKILLS_SHARED-alone", env={"S3SKILLS_SHARED": "acme"}, sees=ACME, entry_points=CLI_AND_MCP, user=False),
    # A flag beats a variable: --shared without --user ignores S3SKILLS_USER; --user beats it too.
    Case("shared-flag-beats-S3SKILLS_USER", ["--shared", "acme"], env={"S3SKILLS_USER": "bob"}, sees=ACME),
    Case("user-flag-beats-S3SKILLS_USER", ["--user", "ana"], env={"S3SKILLS_USER": "bob"}, sees=OWN),
    Case(
        "user-flag-with-S3SKILLS_SHARED",
        ["--user", "ana"],
        env={"S3SKILLS_SHARED": "acme", "S3SKILLS_USER": "bob"},
        sees=SHARED,
        entry_points=CLI_AND_MCP,
    ),
    Case(
        "S3SKILLS_SHARED_PREFIX-deprecated",
        env={"S3SKILLS_SHARED_PREFIX": "acme"},
        sees=SHARED,
        warns="S3SKILLS_SHARED_PREFIX is deprecated; use S3SKILLS_SHARED",
    ),
    Case(
        "shared-prefix-flag-deprecated",
        ["--shared-prefix", "acme"],
        sees=SHARED,
        warns="--shared-prefix is deprecated; use --shared",
        entry_points=("cli-mcp", "serve-mcp"),
    ),
    Case("endpoint-flag", ["--endpoint-url", "{endpoint}"], sees=OWN),
    Case("S3SKILLS_ENDPOINT_URL", env={"S3SKILLS_ENDPOINT_URL": "{endpoint}"}, sees=OWN),
    Case("AWS_ENDPOINT_URL_S3", env={"AWS_ENDPOINT_URL_S3": "{endpoint}"}, sees=OWN),
    Case("AWS_ENDPOINT_URL", env={"AWS_ENDPOINT_URL": "{endpoint}"}, sees=OWN),
    Case(
        "S3SKILLS_ENDPOINT_URL-wins",
        env={"S3SKILLS_ENDPOINT_URL": "{endpoint}", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
        sees=OWN,
    ),
    Case("layout-flag", ["--layout", "seeds"], sees=SEEDS, entry_points=("cli", "cli-mcp", "serve-mcp")),
    Case("S3SKILLS_LAYOUT", env={"S3SKILLS_LAYOUT": "seeds"}, sees=SEEDS),
    Case("layout-file-flag", ["--layout-file", "{file}"], sees=CUSTOM, entry_points=("cli", "cli-mcp", "serve-mcp")),
    Case("S3SKILLS_LAYOUT_FILE", env={"S3SKILLS_LAYOUT_FILE": "{file}"}, sees=CUSTOM),
    Case("region-flag", ["--region", "eu-west-3"], sees=OWN, entry_points=("cli", "cli-mcp", "serve-mcp")),
    Case("S3SKILLS_REGION", env={"S3SKILLS_REGION": "eu-west-3"}, sees=OWN),
    Case("AWS_REGION", env={"AWS_REGION": "eu-west-3"}, sees=OWN),
    Case("AWS_DEFAULT_REGION", env={"AWS_DEFAULT_REGION": "eu-west-3"}, sees=OWN),
    Case("profile-flag", ["--profile", "nobody"], error="nobody", entry_points=("cli", "cli-mcp", "serve-mcp")),
    Case("AWS_PROFILE", env={"AWS_PROFILE": "nobody"}, error="nobody"),
    Case(
        "ranker-flag",
        ["--ranker", "lexical"],
        sees=OWN,
        entry_points=("cli-mcp", "serve-mcp"),
    ),
    Case(
        "S3SKILLS_RANKER",
        env={"S3SKILLS_RANKER": "lexical"},
        sees=OWN,
        entry_points=("cli-mcp", "serve-mcp", "langgraph"),
    ),
]
MCP = ("cli-mcp", "serve-mcp")
CASES += [  # the HTTP server's own options: checked (and refused when bad) whatever the transport
    Case("workers-flag", ["--workers", "0"], error="--workers must be between 1 and 256", entry_points=MCP),
    Case("S3SKILLS_WORKERS", env={"S3SKILLS_WORKERS": "auto"}, sees=OWN, entry_points=MCP),
    Case("metrics-flag", ["--metrics"], sees=OWN, entry_points=MCP),
    Case("S3SKILLS_METRICS", env={"S3SKILLS_METRICS": "maybe"}, error="invalid S3SKILLS_METRICS", entry_points=MCP),
    Case("drain-seconds-flag", ["--drain-seconds", "0"], error="--drain-seconds must be in", entry_points=MCP),
    Case("S3SKILLS_DRAIN_SECONDS", env={"S3SKILLS_DRAIN_SECONDS": "10"}, sees=OWN, entry_points=MCP),
    Case("unready-seconds-flag", ["--unready-seconds", "2"], sees=OWN, entry_points=MCP),
    Case(
        "S3SKILLS_UNREADY_SECONDS",
        env={"S3SKILLS_UNREADY_SECONDS": "lots"},
        error="--unready-seconds (S3SKILLS_UNREADY_SECONDS) takes a number",
        entry_points=MCP,
    ),
]
if importlib.util.find_spec("sentence_transformers") is None:  # hybrid must reach the server and say what it needs
    CASES += [
        Case("ranker-flag-hybrid", ["--ranker", "hybrid"], error="embeddings", entry_points=("cli-mcp", "serve-mcp")),
        Case(
            "S3SKILLS_RANKER-hybrid",
            env={"S3SKILLS_RANKER": "hybrid"},
            error="embeddings",
            entry_points=("cli-mcp", "serve-mcp", "langgraph"),
        ),
    ]


def _fill(value: str, lib: Library) -> str:
    return value.format(bucket=lib.bucket, endpoint=lib.endpoint, file=str(lib.layout_file))


def _base(case: Case, lib: Library) -> list[str]:
    """The flags the case does not give itself: bucket, endpoint and user."""
    given = {*case.flags, *case.env}
    base: list[str] = []
    if not given & {"--bucket", "S3SKILLS_BUCKET"}:
        base += ["--bucket", lib.bucket]
    if not given & {"--endpoint-url", "S3SKILLS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}:
        base += ["--endpoint-url", lib.endpoint]
    if case.user and not given & {"--user", "S3SKILLS_USER"}:
        base += ["--user", "ana"]
    return base


@dataclass
class Seen:
    status: int
    ids: set[str] | None  # the ids, where the entry point shows them
    count: int | None
    err: str


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str], command: list[str]) -> Seen:
    code = main([*argv, *command])
    out, err = capsys.readouterr()
    if code != 0 or command[0] != "--json":
        return Seen(code, None, _check_count(err), err)
    import json

    ids = {s["id"] for s in json.loads(out)["skills"]}
    return Seen(code, ids, len(ids), err)


def _check_count(err: str) -> int | None:
    match = re.search(r"(\d+) of (\d+) skills are not listed", err)
    return int(match.group(2)) if match else None


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("s3skills_example_agent_options", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _langgraph(capsys: pytest.CaptureFixture[str]) -> Seen:
    agent = _example()
    try:
        agent._ranker()
        backend = agent.backend()
        skills = run_sync(backend.skills.aindex(tenant=Tenant(user_id="ana")))
    except Exception as exc:
        return Seen(1, None, None, f"{capsys.readouterr().err}{type(exc).__name__}: {exc}")
    ids = {s.id for s in skills}
    return Seen(0, ids, len(ids), capsys.readouterr().err)


def _entry_point(name: str, argv: list[str], after: list[str], capsys: pytest.CaptureFixture[str]) -> Seen:
    if name == "cli":
        return _run_cli(argv, capsys, ["--json", "list"])
    if name == "cli-mcp":  # the global options before `mcp`, as a person types them; mcp's own after
        return _run_cli(argv, capsys, ["mcp", *after, "--check"])
    if name == "serve-mcp":
        code = serve_mcp.main([*argv, *after, "--check"])
        err = capsys.readouterr().err
        return Seen(code, None, _check_count(err), err)
    return _langgraph(capsys)


# The example has no command line: only the cases given by variables apply to it.
PAIRS = [
    pytest.param(c, e, id=f"{c.id}-{e}") for c in CASES for e in c.entry_points if not (c.flags and e == "langgraph")
]


@pytest.mark.parametrize(("case", "entry_point"), PAIRS)
def test_each_option_and_variable_works_through_each_entry_point(
    case: Case,
    entry_point: str,
    library: Library,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("s3skills.options._warned", set())
    for name in ("S3SKILLS_BUCKET", "S3SKILLS_USER", "S3SKILLS_SHARED", "S3SKILLS_SHARED_PREFIX", "S3SKILLS_LAYOUT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in case.env.items():
        monkeypatch.setenv(name, _fill(value, library))
    if entry_point == "langgraph":  # the example has no command line: everything is a variable
        monkeypatch.setenv("S3SKILLS_BUCKET", library.bucket)
        if not {"S3SKILLS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} & set(case.env):
            monkeypatch.setenv("S3SKILLS_ENDPOINT_URL", library.endpoint)
        argv: list[str] = []
    else:
        argv = _base(case, library)
    flags = [_fill(f, library) for f in case.flags]
    global_flag = "cli" in case.entry_points  # an option of the mcp command alone follows `mcp`
    seen = _entry_point(entry_point, [*argv, *flags] if global_flag else argv, [] if global_flag else flags, capsys)
    if case.sees is None:
        assert seen.status != 0
        assert case.error in seen.err, seen.err
        return
    assert seen.status == 0, seen.err
    if seen.ids is not None:
        assert seen.ids == case.sees
    assert seen.count == len(case.sees), seen.err
    if case.warns:
        assert case.warns in seen.err
        assert seen.err.count("is deprecated") == 1


def test_every_option_of_the_table_is_walked_by_a_case() -> None:
    walked = " ".join(f"{' '.join(c.flags)} {' '.join(c.env)}" for c in CASES)
    for spec in OPTIONS:
        for name in (spec.flag, *spec.env, *spec.deprecated_env, *spec.deprecated_flags):
            assert name in walked.split(), name


def test_mcp_help_shows_only_what_mcp_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "--help"]) == 0
    shown = capsys.readouterr().out
    for flag in ("--shared", "--layout-file", "--ranker", "--endpoint-url", "--region", "--profile"):
        assert flag in shown
    assert "--json" not in shown
    assert "--shared-prefix" not in shown


def _tools_session_ids(args: list[str], env: dict[str, str]) -> Callable[[], set[str]]:
    async def run() -> set[str]:
        params = StdioServerParameters(command=sys.executable, args=args, env={**child_env(), **env})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("list_skills", {})
            assert result.structured_content is not None
            rows: list[dict[str, Any]] = result.structured_content["skills"]
            return {row["id"] for row in rows}

    return lambda: asyncio.run(run())


# SLOW_SERVED: these two serve the library from a stdio server subprocess (~3 s each on 2 cores),
# so they run in .ci/run's slow step; the README's command checks the same options through
# `s3skills mcp --check` and the mcp module's `main` in-process (the `cli-mcp` and `serve-mcp`
# entry points of test_each_option_and_variable_works_through_each_entry_point).
@pytest.mark.slow  # a stdio server subprocess (~3 s): see SLOW_SERVED
def test_global_options_before_mcp_reach_the_served_library(library: Library) -> None:
    cli = [
        "-m",
        "s3skills.cli",
        "--bucket",
        library.bucket,
        "--endpoint-url",
        library.endpoint,
        "--shared",
        "acme",
        "--user",
        "ana",
        "mcp",
        "--ranker",
        "lexical",
    ]
    assert _tools_session_ids(cli, {})() == SHARED


@pytest.mark.slow  # a stdio server subprocess (~3 s): see SLOW_SERVED
def test_the_mcp_module_reads_the_same_variables(library: Library) -> None:
    args = ["-m", "s3skills.serve.mcp"]
    env = {
        "S3SKILLS_BUCKET": library.bucket,
        "S3SKILLS_ENDPOINT_URL": library.endpoint,
        "S3SKILLS_USER": "ana",
        "S3SKILLS_LAYOUT_FILE": str(library.layout_file),
    }
    assert _tools_session_ids(args, env)() == CUSTOM


def test_docs_options_names_every_option_and_variable() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "OPTIONS.md").read_text()
    for spec in OPTIONS:
        for name in (spec.flag, *spec.env, *spec.deprecated_env, *spec.deprecated_flags):
            assert f"`{name}" in text, name


def test_shared_alone_beats_s3skills_user_for_writes_and_says_which_library_it_wrote_to(
    library: Library,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    s3_keys: Callable[[], set[str]],
) -> None:
    monkeypatch.setenv("S3SKILLS_USER", "ana")
    base = ["--bucket", library.bucket, "--endpoint-url", library.endpoint]
    capsys.readouterr()
    assert main([*base, "--shared", "acme", "channel", "create", "beta", "--from", "latest"]) == 0
    out = capsys.readouterr().out
    assert f"Created channel beta with 1 skill(s) in shared library acme (s3://{library.bucket}/shared/acme/" in out
    stored = s3_keys()
    assert any(k.startswith("shared/acme/") and k.endswith("/channels/beta.json") for k in stored), stored
    assert not any(k.startswith("users/ana/") and "beta" in k for k in stored)
    # Creating it again says it exists, where, and how to change it (not "run the command again").
    assert main([*base, "--shared", "acme", "channel", "create", "beta", "--from", "latest"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "The channel 'beta' already exists in shared library acme" in err
    assert "s3skills channel promote SOURCE beta" in err
    assert "run the command again" not in err
    # `mcp --channel beta --check` serves the shared library's channel with --shared alone.
    assert main([*base, "--shared", "acme", "mcp", "--channel", "beta", "--check"]) == 0
    assert _check_count(capsys.readouterr().err) == len(ACME)
    # A write on the user's library names it too.
    assert main([*base, "--user", "ana", "disable", "ana-own"]) == 0
    assert f"ana-own disabled in ana's library (s3://{library.bucket}/users/ana/skills/)" in capsys.readouterr().out
    assert main([*base, "--user", "ana", "enable", "ana-own"]) == 0


@pytest.fixture
def s3_keys(library: Library) -> Callable[[], set[str]]:
    from s3skills.testing import make_client

    def keys() -> set[str]:
        client = make_client(library.endpoint)
        try:
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=library.bucket)
            return {o["Key"] for page in pages for o in page.get("Contents", [])}
        finally:
            client.close()

    return keys


@pytest.mark.slow  # a stdio server subprocess (~3 s): see SLOW_SERVED
def test_shared_alone_serves_the_shared_librarys_channel_over_stdio_whatever_s3skills_user_says(
    library: Library, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--bucket", library.bucket, "--endpoint-url", library.endpoint, "--shared", "acme"]
    assert main([*base, "channel", "create", "production", "--from", "latest"]) == 0
    capsys.readouterr()
    args = ["-m", "s3skills.cli", *base, "mcp", "--channel", "production"]
    assert _tools_session_ids(args, {"S3SKILLS_USER": "bob"})() == ACME
