"""A generated skills tree shaped like a public skills repository pushed as it is.

Deterministic, no network: hundreds of skills in category folders, with what such
repositories hold in practice: folder names that break the Agent Skills naming rules
(`capsule_crm-automation`, `-21risk-automation`, `PDF-Tools`, `a--b`), a `name` that
differs from its folder, nested skills (a skill folder inside another), frontmatter that
YAML 1.1 and 1.2 read differently (`yes`, `0755`, dates, times), reference folders,
scripts, binary assets and a disabled skill.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mcp_harness import put

CATEGORIES = ("automation", "data", "docs", "engineering", "marketing", "ops")
PER_CATEGORY = 50
BAD_FOLDERS = ("capsule_crm-automation", "-21risk-automation", "PDF-Tools", "a--b", "trailing-")
RENAMED = {"automation/pdf-tools": "pdf"}  # name != folder
NESTED = {"monorepo": ("frontend", "backend")}  # a top-level skill -> its nested skills
DISABLED = "ops/retired-runbook"


def _skill_md(name: str, description: str, extra: str = "") -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n# {name}\n\nSteps for {name}.\n".encode()


def public_repo_tree() -> dict[str, bytes]:
    """Relative path below the library's `skills/` -> bytes, for the whole generated repository."""
    tree: dict[str, bytes] = {}
    for c, category in enumerate(CATEGORIES):
        for i in range(PER_CATEGORY):
            folder = f"{category}/{category[:3]}-skill-{i:03d}"
            leaf = folder.rsplit("/", 1)[1]
            traps = "license: yes\nversion: 0755\nreleased: 2024-01-02\nat: 12:30\n" if i % 7 == 0 else ""
            tree[f"{folder}/SKILL.md"] = _skill_md(leaf, f"Does task {i} of {category}", traps)
            tree[f"{folder}/references/guide.md"] = f"Guide {c}-{i}\n".encode()
            if i % 5 == 0:
                tree[f"{folder}/scripts/run.py"] = b"print('{}')\n"
            if i % 11 == 0:
                tree[f"{folder}/assets/logo.png"] = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2
    for bad in BAD_FOLDERS:
        tree[f"automation/{bad}/SKILL.md"] = _skill_md(bad, "A skill whose folder breaks the naming rules")
        tree[f"automation/{bad}/references/notes.md"] = b"notes\n"
    for folder, name in RENAMED.items():
        tree[f"{folder}/SKILL.md"] = _skill_md(name, "Named differently from its folder")
    for outer, inners in NESTED.items():
        leaf = outer.rsplit("/", 1)[-1]
        tree[f"{outer}/SKILL.md"] = _skill_md(leaf, "A skill holding other skills")
        tree[f"{outer}/references/layout.md"] = b"layout\n"
        for inner in inners:
            inner_leaf = inner.rsplit("/", 1)[-1]
            tree[f"{outer}/{inner}/SKILL.md"] = _skill_md(inner_leaf, f"Nested skill {inner_leaf}")
            tree[f"{outer}/{inner}/references/howto.md"] = f"how to {inner_leaf}\n".encode()
    leaf = DISABLED.rsplit("/", 1)[1]
    tree[f"{DISABLED}/SKILL.md"] = _skill_md(leaf, "Withdrawn", "enabled: false\n")
    return tree


def skill_folders(tree: dict[str, bytes]) -> Iterator[str]:
    """The folders of the tree that hold a SKILL.md, sorted."""
    yield from sorted(path.rsplit("/", 1)[0] for path in tree if path.endswith("/SKILL.md"))


def put_tree(client: Any, bucket: str, prefix: str, tree: dict[str, bytes]) -> None:
    """Write the tree below `prefix` (`users/ana/skills/`), one PUT per file."""
    for path, data in tree.items():
        put(client, bucket, prefix + path, data)
