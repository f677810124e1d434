"""`s3skills create`: a new skill from a template (a spec-valid SKILL.md, optionally a script).

The script follows the script runner's contract: its arguments arrive as ONE JSON
value on stdin (or in `argv[1]` when the runner is set to pass them there); it prints
exactly one JSON value on stdout and exits 0 on success.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from s3skills.cli.context import CliError, Context, global_options, pass_context
from s3skills.cli.shared import edit_hint
from s3skills.errors import Conflict, S3SkillsError
from s3skills.ids import SkillId
from s3skills.paths import check_identity
from s3skills.skills import SkillMetadata, render_skill_md, validate_skill_md

if TYPE_CHECKING:
    from s3skills.storage import S3ObjectStore as ObjectStore

__all__ = ["SCRIPT_PATH", "create_command", "scaffold_files", "skill_md", "write_local", "write_remote"]

SCRIPT_PATH = "scripts/main.py"

_SCRIPT = '''#!/usr/bin/env python3
"""__NAME__: summarise a list of numbers (an example for the s3skills script runner).

Contract: the arguments arrive as ONE JSON value on stdin (or, when given, in argv[1]);
the script prints exactly one JSON value on stdout and exits 0 on success (1, with
{"ok": false, ...}, on bad input).

    echo '{"numbers": [3, 1, 2]}' | python3 scripts/main.py
    python3 scripts/main.py '{"numbers": [3, 1, 2]}'
"""

import json
import math
import statistics
import sys


def summarise(args):
    """The statistics of args["numbers"]; ValueError says what is wrong with the input."""
    if not isinstance(args, dict):
        raise ValueError('expected a JSON object such as {"numbers": [1, 2, 3]}')
    numbers = args.get("numbers")
    if not isinstance(numbers, list) or not numbers:
        raise ValueError("'numbers' must be a non-empty list")
    for n in numbers:
        if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n):
            raise ValueError(f"not a finite number: {n!r}")
    return {
        "count": len(numbers),
        "sum": sum(numbers),
        "mean": statistics.fmean(numbers),
        "median": statistics.median(numbers),
        "min": min(numbers),
        "max": max(numbers),
    }


def main(argv):
    try:
        if len(argv) > 1:
            text = argv[1]
        elif sys.stdin is not None and not sys.stdin.isatty():
            text = sys.stdin.read()
        else:
            text = ""
        args = json.loads(text) if text.strip() else {}
        result = summarise(args)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        print(json.dumps({"ok": False, "error": str(exc)}))
        return 1
    print(json.dumps({"ok": True, "result": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''

_BODY = """# __TITLE__

## When to use this skill

- TODO: the requests this skill is for, in the words users write them.

## Instructions

1. TODO: what the agent should do, step by step.
2. Keep this file short; put long material in `references/` and link to it.
"""

_CODE_SECTION = """
## Scripts

`scripts/main.py` summarises a list of numbers. Run it with one JSON argument:

    python3 scripts/main.py '{"numbers": [3, 1, 2]}'

It prints one JSON value: `{"ok": true, "result": {"count": 3, "sum": 6, ...}}`.
"""


def skill_md(name: str, description: str | None, *, code: bool = False, enabled: bool = True) -> str:
    """The SKILL.md of a new skill; `validate_skill_md` finds no error in it.

    Without a description it holds a `TODO:` placeholder (which `validate` warns about).
    """
    desc = description or f"TODO: say what {name} does and when an agent should use it."
    body = _BODY.replace("__TITLE__", name.replace("-", " ").capitalize()) + (_CODE_SECTION if code else "")
    meta = SkillMetadata(name=name, description=desc, version="0.1.0", enabled=enabled)
    text = render_skill_md(meta, body)
    errors = [p.message for p in validate_skill_md(text, folder=name) if p.level == "error"]
    if errors:
        raise S3SkillsError(f"cannot create skill '{name}': {'; '.join(errors)}")
    return text


def scaffold_files(name: str, description: str | None, *, code: bool = False, enabled: bool = True) -> dict[str, bytes]:
    """Relative path -> content of a new skill's files (`SKILL.md` first)."""
    files = {"SKILL.md": skill_md(name, description, code=code, enabled=enabled).encode("utf-8")}
    if code:
        files[SCRIPT_PATH] = _SCRIPT.replace("__NAME__", name).encode("utf-8")
    return files


def write_local(root: Path, name: str, category: str | None, description: str | None, *, code: bool) -> Path:
    """Write a new skill below `root` (`root/[category/]name/`); never overwrite a file.

    Raises:
        FileExistsError: The skill folder already holds one of the files.
    """
    folder = root.expanduser() / category / name if category else root.expanduser() / name
    files = scaffold_files(name, description, code=code)
    for rel in files:
        if (folder / rel).exists():
            raise FileExistsError(f"{folder / rel} already exists")
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as handle:  # exclusive: fail rather than overwrite
            handle.write(data)
        if rel.endswith(".py"):
            os.chmod(target, 0o755)  # noqa: S103 - a script meant to be run
    return folder


async def write_remote(
    store: ObjectStore, folder: str, name: str, description: str | None, *, code: bool, enabled: bool = True
) -> None:
    """Create a new skill under the key prefix `folder`, each object only if absent.

    Raises:
        Conflict: An object already exists (`SKILL.md` is written first, so a
            concurrent create of the same skill loses before writing anything).
    """
    for rel, data in scaffold_files(name, description, code=code, enabled=enabled).items():
        content_type = "text/markdown; charset=utf-8" if rel.endswith(".md") else "text/x-python; charset=utf-8"
        await store.aput(folder + rel, data, if_none_match=True, content_type=content_type)


# -- the command ----------------------------------------------------------------------------------

_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _skill_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """An Agent Skills name: lowercase letters, digits and single hyphens, 1-64 characters."""
    if len(value) > 64 or not _NAME_RE.match(value):
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise click.BadParameter(
            f"invalid skill name {shown!r}: use 1-64 of a-z, 0-9 and single hyphens, not at either end"
        )
    return value


def _category_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A category folder name (the allow-list of key segments)."""
    if value is None:
        return None
    try:
        return check_identity(value, "category")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.command("create")
@global_options
@click.argument("name", callback=_skill_name)
@click.option("--category", metavar="C", callback=_category_name, help="Put it in this category folder.")
@click.option("-d", "--description", metavar="DESC", help="What the skill does and when to use it.")
@click.option("--code", is_flag=True, help="Also create scripts/main.py (JSON in, JSON out).")
@click.option("--local", metavar="DIR", help="Write into a local folder instead of the bucket.")
@pass_context
def create_command(
    ctx: Context, name: str, category: str | None, description: str | None, code: bool, local: str | None
) -> int:
    """Create a new skill from a template; never overwrite one.

    NAME is the skill's name: lowercase letters, digits and single hyphens. Without
    -d, the description is a TODO placeholder, and a skill created in the bucket is
    disabled until you edit it and run 's3skills enable NAME'. A name already used by a
    skill of another category is refused: an agent sees skills by folder name.
    """
    enabled = description is not None or bool(local)
    if local:
        where = str(write_local(Path(local), name, category, description, code=code))
    else:
        skill_id = f"{category}/{name}" if category else name
        folder = ctx.prefix + skill_id + "/"
        existing, _ = ctx.run(ctx.store.alist(folder))
        if existing:
            raise CliError(f"skill '{skill_id}' already exists in {ctx.location(folder)}")
        _refuse_leaf_clash(ctx, skill_id)
        try:
            ctx.library.create(skill_id, scaffold_files(name, description, code=code, enabled=enabled))
        except Conflict as exc:
            raise CliError(f"skill '{skill_id}' already exists in {ctx.location(folder)}") from exc
        where = ctx.location(folder)
    if ctx.json:
        ctx.emit({"created": where, "name": name, "category": category, "code": code, "enabled": enabled})
        return 0
    ctx.print(f"Created skill '{name}' in {where}" + ("" if enabled else " (disabled)"))
    skill_md_at = f"{where}/SKILL.md" if local else None
    how = f"edit {skill_md_at}" if skill_md_at else edit_hint(f"{category}/{name}" if category else name)
    if not enabled:
        ctx.print(
            f"Its description is a TODO placeholder, so it is disabled until you edit it and run "
            f"'s3skills enable {name}' (or create it with -d DESC)."
        )
    ctx.print(f"{how[0].upper()}{how[1:]}.")
    return 0


def _refuse_leaf_clash(ctx: Context, skill_id: str) -> None:
    """Refuse a new skill whose folder name another skill of the library already has."""
    leaf = skill_id.rsplit("/", 1)[-1]
    objects, _ = ctx.run(ctx.store.alist(ctx.prefix))
    same = sorted(
        str(sid)
        for o in objects
        if (sid := SkillId.from_key(o.key, ctx.prefix)) is not None and sid.leaf == leaf and str(sid) != skill_id
    )
    if same:
        raise CliError(
            f"a skill named '{leaf}' already exists: {', '.join(same)}; an agent sees skills by folder name "
            f"(/skills/{leaf}/), so choose another name"
        )
