"""Content types of stored files (pure; shared by the backend and push)."""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath

__all__ = ["content_type_for"]


def content_type_for(path: str) -> str:
    """A Content-Type for a stored file: text as UTF-8 (Markdown/plain when unknown),
    other known types as guessed, unknown binary as `application/octet-stream` only
    when `path` has a suffix that is not text-like."""
    guessed, _ = mimetypes.guess_type(PurePosixPath(path).name)
    if guessed is None:
        return "text/markdown; charset=utf-8" if path.endswith(".md") else "text/plain; charset=utf-8"
    if guessed.startswith("text/"):
        return guessed + "; charset=utf-8"
    return guessed
