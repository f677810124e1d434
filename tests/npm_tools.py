"""What a test does when a package it needs cannot be had from npm.

A failed `npm install`/`npx` is a failure, not a skip, in CI (the `CI` variable) and wherever the
npm registry answers (a bad pin or a Node mismatch must show). Only outside CI, when `npm ping`
also fails (no route to the registry), is the test skipped; tests/allowed_skips.py allows exactly
that skip.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import NoReturn

import pytest
from allowed_skips import in_ci

__all__ = ["npm_failed"]


def _registry_unreachable() -> str | None:
    """`npm ping`'s complaint when the registry does not answer, else None."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    try:
        done = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "npm ping timed out after 60 s"
    return None if done.returncode == 0 else (done.stderr.strip()[-300:] or f"npm ping exited {done.returncode}")


def npm_failed(what: str, stderr: str) -> NoReturn:
    """Fail the test because `what` could not be had from npm, or skip it (outside CI, offline only)."""
    detail = stderr.strip()[-300:]
    if not in_ci():
        unreachable = _registry_unreachable()
        if unreachable is not None:
            pytest.skip(f"{what}: the npm registry cannot be reached ({unreachable}); npm said: {detail}")
    pytest.fail(f"{what} (the npm registry answers, or this is CI): {detail}")
