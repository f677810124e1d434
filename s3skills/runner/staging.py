"""Staging: a skill's `scripts/` folder fetched into a private temporary directory.

Script paths are parsed, never resolved: `..`, `.`, empty segments, backslashes and
control characters are refused, and so is any key below `scripts/` that would land
outside the staging folder. The directory is created by `tempfile.mkdtemp` (mode
0700) and removed whatever happens.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from s3skills._loop import gather_limited
from s3skills.errors import InvalidPath, S3SkillsError, SkillError, TenantError

if TYPE_CHECKING:
    from s3skills.skills import SkillLibrary

__all__ = [
    "ARGS_FILE",
    "SUFFIXES",
    "Refused",
    "human",
    "key_parts",
    "private_dir",
    "script_parts",
    "stage",
    "write_args",
]

logger = logging.getLogger(__name__)

SUFFIXES = (".py", ".sh")
"""The scripts that can be run: Python and shell."""

ARGS_FILE = "args.json"
"""The name of the arguments file in the staging directory (mode 0600)."""

_MIB = 1024 * 1024


class Refused(Exception):
    """A run that does not happen; the message is for the model, `outcome` for the usage log."""

    def __init__(self, message: str, outcome: str = "refused") -> None:
        super().__init__(message)
        self.outcome = outcome


def human(size: int) -> str:
    """`size` bytes as `N MiB` or `N KiB`."""
    return f"{size // _MIB} MiB" if size >= _MIB and size % _MIB == 0 else f"{size // 1024} KiB"


def _bad_segment(segment: str) -> bool:
    return (
        segment in ("", ".", "..")
        or "\\" in segment
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in segment)
        or len(segment.encode("utf-8")) > 255
    )


def script_parts(script: object) -> tuple[str, ...]:
    """Parse a `script` argument into its segments below `scripts/`.

    Accepts `main.py`, `lib/tool.py`, `scripts/main.py`. Rejects (never resolves)
    absolute paths, `..`, `.`, empty segments, backslashes, control characters and
    extensions other than `.py`/`.sh`.

    Raises:
        InvalidPath: Saying why, in words for the model.
    """
    if not isinstance(script, str) or not script.strip():
        raise InvalidPath("Give the script as a path inside the skill's scripts/ folder, e.g. 'main.py'.")
    text = script.strip()
    if text.startswith("/"):
        raise InvalidPath(f"Invalid script {text!r}: give its path relative to the skill's scripts/ folder.")
    parts = tuple(text.split("/"))
    parts = parts[1:] if parts[0] == "scripts" else parts
    if not parts or any(_bad_segment(p) for p in parts):
        raise InvalidPath(f"Invalid script {text!r}: only files under the skill's scripts/ folder can be run.")
    if not parts[-1].endswith(SUFFIXES) or parts[-1] in SUFFIXES:
        raise InvalidPath(f"Cannot run {text!r}: only Python (.py) and shell (.sh) scripts can be run.")
    return parts


def key_parts(rel: str) -> tuple[str, ...] | None:
    """The local path segments of a key relative to `scripts/`, or None when unsafe."""
    parts = tuple(rel.split("/"))
    return None if not rel or any(_bad_segment(p) for p in parts) else parts


@contextlib.contextmanager
def private_dir() -> Iterator[Path]:
    """A fresh directory only this uid can enter (0700), with a `tmp/` inside; removed on exit."""
    workdir = Path(tempfile.mkdtemp(prefix="s3skills-run-"))
    try:
        (workdir / "tmp").mkdir(mode=0o700)
        yield workdir
    finally:
        try:
            shutil.rmtree(workdir)
        except OSError as exc:  # e.g. a process that left the group still writes there
            logger.warning("could not remove the work directory of a script run: %s", exc)
            shutil.rmtree(workdir, ignore_errors=True)


def write_args(workdir: Path, payload: bytes) -> Path:
    """Write `payload` to `workdir/args.json`, created with mode 0600 (never an existing file)."""
    path = workdir / ARGS_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(payload)
    return path


async def stage(
    library: SkillLibrary, skill_id: str, parts: tuple[str, ...], workdir: Path, *, max_files: int, max_bytes: int
) -> Path:
    """Download the skill's `scripts/` folder into `workdir/scripts/`; return the script's path.

    One LIST, then bounded concurrent GETs. Keys that would land outside the
    folder are skipped (and logged).

    Raises:
        Refused: The skill or the script is not there, the folder is over
            `max_files` / `max_bytes`, or the store failed (`fetch_error`).
    """
    base = "scripts/"
    try:
        # Only an enabled skill's own files (a nested skill's folder is not part of it).
        files = [f for f in await library.afiles(skill_id) if f.path.startswith(base)]
    except (SkillError, TenantError) as exc:
        raise Refused(str(exc)) from None
    except S3SkillsError as exc:
        raise Refused(f"Could not list the scripts of '{skill_id}': {exc}", "fetch_error") from None
    rel = "/".join(parts)
    if not any(f.path == base + rel for f in files):
        runnable = sorted(f.path[len(base) :] for f in files if f.path.endswith(SUFFIXES))
        raise Refused(
            f"Script '{rel}' not found in the scripts/ folder of '{skill_id}' (only scripts/ can be run). "
            f"Available: {', '.join(runnable[:20]) or 'none'}."
        )
    if len(files) > max_files or sum(f.size for f in files) > max_bytes:
        raise Refused(
            f"The scripts/ folder of '{skill_id}' is too large to run ({len(files)} files; the limits are "
            f"{max_files} files and {human(max_bytes)})."
        )
    root = (workdir / "scripts").resolve()

    async def fetch(rel_path: str) -> None:
        local = key_parts(rel_path[len(base) :])
        path = root.joinpath(*local).resolve() if local else None
        if path is None or not path.is_relative_to(root):
            logger.warning("skipping an unsafe key in the scripts of skill %s", skill_id)
            return
        body = await library.aopen(skill_id, rel_path, max_bytes=max_bytes)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body.data)

    # gather_limited lets every started fetch end first, so none writes after the cleanup.
    try:
        jobs = [partial(fetch, f.path) for f in files]
        await gather_limited(jobs, min(library.config.limits.concurrency, 16))
    except (S3SkillsError, OSError) as exc:
        raise Refused(f"Could not fetch the scripts of '{skill_id}': {exc}", "fetch_error") from exc
    return root.joinpath(*parts)
