"""The architecture as a test: imports go one way between layers, front ends use public names.

Every module of the package is parsed (not imported) and each `import` of a project
module is checked:

- a module may import only its own layer or layers below it, and the adapters (fs, runner,
  transfer) stay independent of each other;
- no module outside `s3skills.fs` reaches into `S3Backend` internals (`backend.store`,
  `backend.catalog`, `backend.mounts`, `.skills.catalog`, `.skills.store`);
- front ends import no private module (`s3skills._x`, `s3skills.x._y`);
- the package has no import cycle.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "s3skills"

# Lowest first. A module's layer is that of the longest matching name.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "s3skills._loop",
            "s3skills.errors",
            "s3skills.paths",
            "s3skills.ids",
            "s3skills.layout",
            "s3skills.tenancy",
            "s3skills.config",
            "s3skills.media",
        ),
    ),
    ("storage", ("s3skills.storage",)),
    ("skills", ("s3skills.skills",)),
    ("adapters", ("s3skills.fs", "s3skills.runner", "s3skills.transfer")),
    ("testing", ("s3skills.testing",)),
    (
        "front ends",
        (
            "s3skills.agent",
            "s3skills.middleware",
            "s3skills.tools",
            "s3skills.cli",
            "s3skills.serve",
            "s3skills.console",
            "s3skills.demo",
            "s3skills.seed",
            "s3skills.examples",
        ),
    ),
]
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}
FRONT_ENDS = LAYERS[-1][1]
# testing may be used only by front ends (the demo) and tests; it may use anything below them.


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> tuple[str, str] | None:
    """(layer, package) of a project module, or None for `s3skills` itself."""
    best: tuple[str, str] | None = None
    for layer, packages in LAYERS:
        for package in packages:
            if (module == package or module.startswith(package + ".")) and (
                best is None or len(package) > len(best[1])
            ):
                best = (layer, package)
    return best


def _python_files() -> list[Path]:
    # os.walk follows the links s3skills/middleware and s3skills/tools (rglob would not).
    found = []
    for folder, dirs, files in os.walk(PACKAGE, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.extend(Path(folder) / f for f in files if f.endswith(".py"))
    return sorted(found)


def project_modules() -> Iterator[tuple[str, Path]]:
    for path in _python_files():
        if "examples" in path.relative_to(PACKAGE).parts[:1] and path.name != "__init__.py":
            continue  # the example library's scripts are skill files, not package modules
        yield module_name(path), path


def imports_of(module: str, path: Path) -> Iterator[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:  # `from s3skills import fs` imports a module too
                yield f"{target}.{alias.name}", node.lineno


MODULES = dict(project_modules())


def test_the_package_is_found() -> None:
    assert "s3skills.fs.backend" in MODULES
    assert "s3skills.middleware.skills_prompt" in MODULES
    assert "s3skills.tools.skill_tools" in MODULES


def layer_violations(module: str, path: Path) -> list[str]:
    """What `module` (at `path`) imports against the layer rules."""
    own = layer_of(module)
    if own is None:
        return []  # the top-level package re-exports (lazily) from every layer
    layer, package = own
    bad = []
    for target, line in imports_of(module, path):
        theirs = layer_of(target) if target in MODULES else None
        if theirs is None:
            continue
        other_layer, other_package = theirs
        if other_layer == "testing" and layer not in ("front ends", "testing"):
            bad.append(f"line {line}: {target} (only front ends and tests may use s3skills.testing)")
        elif RANK[other_layer] > RANK[layer] and other_layer != "testing":
            bad.append(f"line {line}: {target} is in a higher layer ({other_layer})")
        elif other_layer == layer and other_package != package and layer == "adapters":
            bad.append(f"line {line}: {target} is a sibling package of the same layer")
    return bad


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module: str) -> None:
    bad = layer_violations(module, MODULES[module])
    assert not bad, f"{module} imports against the layers:\n" + "\n".join(bad)


def test_the_layer_check_catches_a_wrong_import(tmp_path: Path) -> None:
    """The contract can fail: a storage module importing the skills layer is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from s3skills.skills import SkillLibrary\nfrom s3skills.fs import S3Backend\n", encoding="utf-8")
    found = layer_violations("s3skills.storage.bad", bad)
    assert len(found) == 2
    assert "higher layer (skills)" in found[0]


_INTERNALS = re.compile(
    r"\bbackend\.(store|catalog|mounts|_\w+)\b|(?<!s3skills)\.skills\.(catalog|store)\b|\bcurrent_user\("
)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("s3skills.fs")))
def test_nothing_outside_fs_reaches_into_backend_internals(module: str) -> None:
    text = MODULES[module].read_text(encoding="utf-8")
    hits = [f"line {n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if _INTERNALS.search(line)]
    assert not hits, f"{module} uses S3Backend internals:\n" + "\n".join(hits)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) and layer_of(m)[0] == "front ends"))  # type: ignore[index]
def test_front_ends_import_no_private_module(module: str) -> None:
    bad = [
        f"line {line}: {target}"
        for target, line in imports_of(module, MODULES[module])
        if target.startswith("s3skills.")
        and target in MODULES
        and any(part.startswith("_") and part != "__init__" for part in target.split("."))
        and not target.startswith(module + ".")
    ]
    assert not bad, f"{module} imports private modules:\n" + "\n".join(bad)


def test_there_is_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, _ in imports_of(module, path):
            # A package's __init__ importing its own submodules is how packages export.
            own_child = path.name == "__init__.py" and target.startswith(module + ".")
            if target in MODULES and target != module and module != "s3skills" and not own_child:
                graph[module].add(target)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# -- the rooms of the skills layer --------------------------------------------------------------

# Lowest first. A module of `s3skills.skills` may import its own room, the rooms of lower ranks, and
# nothing of a room of its own rank (siblings stay independent). The top (`library`, `reads`,
# `results`, the package itself) is the seam every front end and adapter uses.
SKILL_ROOMS: list[tuple[str, ...]] = [
    ("s3skills.skills.format", "s3skills.skills.usage", "s3skills.skills.usage_store"),
    ("s3skills.skills.ranking", "s3skills.skills.versions"),
    ("s3skills.skills.index",),
    ("s3skills.skills.code",),
    ("s3skills.skills.library", "s3skills.skills.reads", "s3skills.skills.results", "s3skills.skills"),
]


def room_of(module: str) -> tuple[int, str] | None:
    """(rank, room) of a module of the skills layer (the longest matching room), else None."""
    best: tuple[int, str] | None = None
    for rank, rooms in enumerate(SKILL_ROOMS):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and (best is None or len(room) > len(best[1])):
                best = (rank, room)
    return best


def room_violations(module: str, path: Path) -> list[str]:
    """What a skills-layer `module` imports against the rooms' order."""
    own = room_of(module)
    if own is None or own[1] == "s3skills.skills":
        return []  # the package re-exports the public names of every room
    bad = []
    for target, line in imports_of(module, path):
        theirs = room_of(target) if target in MODULES else None
        if theirs is None or theirs[1] == own[1]:
            continue
        if theirs[0] > own[0]:
            bad.append(f"line {line}: {target} is in a higher room ({theirs[1]})")
        elif theirs[0] == own[0] and own[0] < len(SKILL_ROOMS) - 1:  # the seam's modules work together
            bad.append(f"line {line}: {target} is a sibling room ({theirs[1]})")
    return bad


SKILL_MODULES = sorted(m for m in MODULES if room_of(m) is not None)


def test_every_skills_module_has_a_room() -> None:
    homeless = [m for m in MODULES if m.startswith("s3skills.skills.") and room_of(m) in (None, (4, "s3skills.skills"))]
    assert not homeless, f"modules of s3skills.skills in no room: {homeless}"
    assert "s3skills.skills.format.parse" in SKILL_MODULES
    assert "s3skills.skills.index.catalog" in SKILL_MODULES


@pytest.mark.parametrize("module", SKILL_MODULES)
def test_skills_rooms_import_downwards(module: str) -> None:
    bad = room_violations(module, MODULES[module])
    assert not bad, f"{module} imports against the skills layer's rooms:\n" + "\n".join(bad)


def test_the_room_check_catches_a_wrong_import(tmp_path: Path) -> None:
    """The rooms' contract can fail: the format importing the index, ranking importing versions."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from s3skills.skills.index.catalog import SkillCatalog\nfrom s3skills.skills.library import SkillLibrary\n",
        encoding="utf-8",
    )
    assert len(room_violations("s3skills.skills.format.bad", bad)) == 2
    sibling = tmp_path / "sibling.py"
    sibling.write_text("from s3skills.skills.versions.history import SkillVersion\n", encoding="utf-8")
    assert "sibling room" in room_violations("s3skills.skills.ranking.bad", sibling)[0]


@pytest.mark.parametrize("room", ["s3skills.skills.ranking", "s3skills.skills.versions", "s3skills.skills.format"])
def test_ranking_versions_and_format_never_import_a_front_end_or_adapter(room: str) -> None:
    above = RANK["skills"]
    bad = [
        f"{module} line {line}: {target}"
        for module in SKILL_MODULES
        if module.startswith(room + ".")
        for target, line in imports_of(module, MODULES[module])
        if (theirs := layer_of(target)) is not None and RANK[theirs[0]] > above
    ]
    assert not bad, "\n".join(bad)


# -- scripts beside the package ------------------------------------------------------------------


def _script_graph(folder: Path) -> dict[str, set[str]]:
    """Which scripts of `folder` import which others (by bare name, anywhere in the file)."""
    names = {p.stem: p for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        for target, _ in imports_of(name, path):
            head = target.split(".")[0]
            if head in names and head != name:
                graph[name].add(head)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


SCRIPT_FOLDERS = sorted({p.parent for p in (*ROOT.glob("bench/*.py"), *ROOT.glob("examples/**/*.py"))})


@pytest.mark.parametrize("folder", SCRIPT_FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_beside_the_package_have_no_import_cycle(folder: Path) -> None:
    found = _cycle(_script_graph(folder))
    assert found is None, "import cycle: " + " -> ".join(found or [])


def test_the_script_cycle_check_catches_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import b\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def f():\n    import a\n", encoding="utf-8")
    assert _cycle(_script_graph(tmp_path)) == ["a", "b", "a"]
