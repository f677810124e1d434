"""Every import the documentation shows works: import paths are part of the contract.

Each Markdown file of the repository (README, docs/, bench/, examples/) is read for
- `from X import a, b` and `import X` lines in its code blocks, and
- dotted names in backticks that start with `s3skills.` (`s3skills.skills.format.severity.SEVERITIES`):
the module part is imported and the rest is looked up on it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    p
    for pattern in ("*.md", "docs/*.md", "bench/*.md", "examples/**/*.md")
    for p in ROOT.glob(pattern)
    if ".venv" not in p.parts
)

_BLOCK = re.compile(r"```(?:python|py|pycon)?\n(.*?)```", re.S)
_FROM = re.compile(r"^\s*(?:>>> )?from\s+([\w.]+)\s+import\s+\(?([\w\s,]+)\)?", re.M)
_IMPORT = re.compile(r"^\s*(?:>>> )?import\s+([\w.]+)(?:\s+as\s+\w+)?\s*$", re.M)
_DOTTED = re.compile(r"`(s3skills(?:\.\w+)+)(?:\(\))?`")
# Names a doc shows for a third party or the user's own code, not ours.
_OURS = ("s3skills", "middleware", "tools")
# Dotted names in backticks that are not import paths (with what they are).
_NOT_IMPORTS = {
    "s3skills.usage": "the usage logger's name",
    "s3skills.skill_load": "a usage event's name",
    "s3skills.script_run": "a usage event's name",
}


def _documented() -> list[tuple[str, str, str]]:
    """(doc, module, attribute or '') of every import and dotted name the docs show."""
    found: set[tuple[str, str, str]] = set()
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        rel = str(doc.relative_to(ROOT))
        for block in _BLOCK.findall(text):
            for module, names in _FROM.findall(block):
                if module.split(".")[0] in _OURS:
                    for name in names.replace("\n", " ").split(","):
                        if name.strip():
                            found.add((rel, module, name.strip().split()[0]))
            for module in _IMPORT.findall(block):
                if module.split(".")[0] in _OURS:
                    found.add((rel, module, ""))
        for dotted in _DOTTED.findall(text):
            if dotted not in _NOT_IMPORTS:
                found.add((rel, dotted, ""))
    return sorted(found)


def _resolve(dotted: str) -> object:
    """Import the longest module prefix of `dotted` and look the rest up on it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as exc:
            if exc.name is not None and not ".".join(parts[:cut]).startswith(exc.name):
                raise  # a module that exists but imports something missing
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise ModuleNotFoundError(dotted)


DOCUMENTED = _documented()


def test_the_docs_show_imports_to_check() -> None:
    modules = {module for _, module, _ in DOCUMENTED}
    assert "s3skills" in modules
    assert "s3skills.middleware" in modules
    assert len(DOCUMENTED) >= 20


@pytest.mark.parametrize(("doc", "module", "name"), DOCUMENTED, ids=lambda v: str(v))
def test_every_documented_import_works(doc: str, module: str, name: str) -> None:
    if name:
        value = getattr(importlib.import_module(module), name, None)
        if value is None:  # `from package import submodule`
            value = importlib.import_module(f"{module}.{name}")
        assert value is not None, f"{doc}: from {module} import {name}"
    else:
        try:
            resolved = _resolve(module)
        except (ImportError, AttributeError) as exc:
            pytest.fail(f"{doc}: `{module}` does not resolve ({exc})")
        assert isinstance(resolved, ModuleType) or resolved is not None
