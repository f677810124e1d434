"""What the CLI imports, seen from a fresh interpreter: no agent framework unless a command needs it.

`python -X importtime` lists every module a process imported, so the tests read the
truth from the interpreter rather than from `sys.modules` of the test process (which
has long imported everything). The last tests run the demo where `moto` cannot be
imported, the way an install without the `demo` extra looks.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("langchain", "langgraph", "deepagents")  # also catches langchain_core, langgraph_sdk, ...
USER = "alice"


def _python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=full_env, timeout=120, check=False
    )


def _imported(importtime_stderr: str) -> set[str]:
    """The modules named in `-X importtime` output (`import time: self | cumulative | name`)."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the header line
                names.add(name)
    return names


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0].startswith(HEAVY))


def _run_cli(*argv: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    code = "import sys; from s3skills.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = _python("-X", "importtime", "-c", code, *argv, env=env)
    return proc, _imported(proc.stderr)


def test_importing_the_cli_imports_no_agent_framework() -> None:
    proc = _python("-X", "importtime", "-c", "import s3skills.cli")
    assert proc.returncode == 0, proc.stderr
    modules = _imported(proc.stderr)
    assert {"s3skills.cli", "s3skills.cli.app", "click"} <= modules  # the parse sees the imports
    assert _heavy(modules) == []


# Each case is a fresh interpreter (~1 s, the demo ones 3-4 s, on 2 cores): the README's command
# keeps `s3skills --help`, and runs the other commands' help and the demo without moto in
# .ci/run's slow step.
_SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        pytest.param(["demo", "--help"], marks=_SLOW),
        pytest.param(["push", "--help"], marks=_SLOW),
        pytest.param(["mcp", "--help"], marks=_SLOW),
    ],
)
def test_help_imports_no_agent_framework(argv: list[str]) -> None:
    proc, modules = _run_cli(*argv)
    assert proc.returncode == 0, proc.stderr
    assert "Usage: s3skills" in proc.stdout
    assert _heavy(modules) == []
    # Nor the S3 client stack: only commands that connect pay for it.
    assert not [m for m in modules if m.split(".")[0] in ("aioboto3", "aiobotocore", "boto3", "botocore", "mcp")]


# Everything `s3skills --help` and `--version` may import beyond the standard library: the
# command-line toolkit and what parses a SKILL.md. Nothing that talks to S3, serves MCP or runs
# an agent (issue 21: these answer within 0.5 s; bench/README.md has the figure).
STARTUP_PACKAGES = frozenset(
    {"s3skills", "click", "rich", "pydantic", "pydantic_core", "annotated_types", "typing_inspection"}
    | {"typing_extensions", "yaml"}
)
# Not imports of ours: site hooks, and `copy` probing Jython's `org.python.core`.
_ENVIRONMENT = frozenset({"sitecustomize", "usercustomize", "org"})


@pytest.mark.parametrize("argv", [["--help"], ["--version"]], ids=["help", "version"])
def test_help_and_version_import_only_the_cli_toolkit_and_the_skill_model(argv: list[str]) -> None:
    proc, modules = _run_cli(*argv)
    assert proc.returncode == 0, proc.stderr
    if argv == ["--version"]:
        assert proc.stdout.startswith("s3skills ")
    top = {m.split(".")[0] for m in modules}
    outside = {m for m in top if m not in sys.stdlib_module_names and not m.startswith("_")} - _ENVIRONMENT
    assert {"s3skills", "click"} <= outside
    assert sorted(outside - STARTUP_PACKAGES) == []


def test_list_imports_no_agent_framework(moto_endpoint: str, bucket: str, s3_client: Any) -> None:
    body = b"---\nname: pdf\ndescription: Fills PDF forms. Use it for forms.\n---\n\n# pdf\n"
    s3_client.put_object(Bucket=bucket, Key=f"{USER}/skills/pdf/SKILL.md", Body=body)
    proc, modules = _run_cli(
        "--bucket", bucket, "--user", USER, "--endpoint-url", moto_endpoint, "--layout", "seeds", "list", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert [s["id"] for s in json.loads(proc.stdout)["skills"]] == ["pdf"]
    assert "s3skills.skills.index.catalog" in modules
    assert _heavy(modules) == []


def test_importing_the_package_defers_the_backend() -> None:
    """`import s3skills` is cheap; a public name still resolves, importing what it needs then."""
    code = textwrap.dedent(
        """
        import sys
        import s3skills
        before = sorted(m for m in sys.modules if m.split(".")[0] in ("deepagents", "langchain", "langgraph"))
        backend = s3skills.S3Backend
        after = "deepagents" in sys.modules
        print(before, backend.__module__, after)
        """
    )
    proc = _python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "s3skills.fs.backend", "True"]


# -- the demo without the `demo` extra --------------------------------------------------------------

# Runs `s3skills` in a process where `import moto` fails, as it does without the extra.
_WITHOUT_MOTO = textwrap.dedent(
    """
    import sys

    class NoMoto:
        def find_spec(self, name, path=None, target=None):
            if name == "moto" or name.startswith("moto."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoMoto())
    from s3skills.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _clean_env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "100"}


@_SLOW  # a fresh interpreter running the demo (3-4 s)
def test_demo_without_moto_names_the_extra_to_install(tmp_path: Path) -> None:
    proc = _python("-c", _WITHOUT_MOTO, "demo", env=_clean_env(tmp_path))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        's3skills: error: the embedded S3 server needs moto, which is not installed: pip install "s3skills[demo]"'
    ]


@_SLOW  # a fresh interpreter running the demo (3-4 s)
def test_demo_on_an_endpoint_does_not_need_moto(moto_endpoint: str, bucket: str, tmp_path: Path) -> None:
    """Only the embedded server needs the extra: an S3 endpoint (here a moto server of the tests) does not."""
    argv = ["--endpoint-url", moto_endpoint, "demo", "--bucket", bucket, "--user", "lucia", "--quiet"]
    proc = _python("-c", _WITHOUT_MOTO, *argv, env=_clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("demo ok: 4 skills seeded for lucia; compraventa loaded; ")


# -- the shape of the packages ----------------------------------------------------------------------


def _internal_imports(package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (anywhere in its body), from the source."""
    folder = REPO / package.replace(".", "/")
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        name = package if path.stem == "__init__" else f"{package}.{path.stem}"
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m for m in found if m.startswith(package + ".")} - {name}
    return {name: {m for m in deps if m in graph} for name, deps in graph.items()}


@pytest.mark.parametrize("package", ["s3skills.cli", "s3skills.demo"])
def test_package_modules_import_each_other_without_cycles(package: str) -> None:
    graph = _internal_imports(package)
    assert len(graph) >= 4
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        if name in done:
            return
        for dep in graph.get(name, ()):
            visit(dep, (*path, name))
        done.add(name)

    for module in graph:
        visit(module, ())


def test_the_demo_package_never_imports_the_cli() -> None:
    """The CLI drives the demo, not the other way round (one direction between front ends)."""
    for path in (REPO / "s3skills" / "demo").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in modules if m.startswith("s3skills.cli")], path.name
