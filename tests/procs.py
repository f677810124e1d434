"""Watching processes from tests: is a pid alive, and waiting (bounded) for a condition."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie left for PID 1 to reap counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone while /proc was read (ESRCH)
        return False
    return state not in ("Z", "X")


def eventually(condition: Callable[[], bool], within: float = 10.0) -> bool:
    """Poll `condition` until it holds (SIGKILL and cleanup after a cancel are asynchronous)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
