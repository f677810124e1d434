"""A worker process ends with the process manager that started it (`--workers N`).

uvicorn's process manager starts each worker and starts it again when it dies, but nothing
ties a worker to it the other way: a manager killed with SIGKILL (the OOM killer, an
operator's `kill -9`) would leave its workers serving on the shared port, with no one to
restart them, stop them or merge their metrics. `follow_parent` makes a worker end then:

- on Linux, the kernel sends the worker SIGTERM the moment its parent dies
  (`prctl(PR_SET_PDEATHSIG)`, set through ctypes): no polling, no thread. The worker then
  drains as on any SIGTERM (`s3skills.serve.probes.Drain`: unready, the calls in flight
  finished, exit 0 within the drain deadline) and the port is free once the last worker
  has gone;
- elsewhere (no `prctl`), a daemon thread compares `os.getppid()` with the parent's pid
  every `poll` seconds and sends this process SIGTERM when they differ;
- a parent that died before either was in place (the race at a worker's start) is caught
  by the same comparison, made once the mechanism is set: the worker exits at once.

`worker_factory` is the app factory uvicorn's manager is given: it follows the parent
named by `S3SKILLS_WORKER_PARENT`, then builds the app with the factory named by
`S3SKILLS_WORKER_FACTORY` (`module:function`); `s3skills.serve.http.serve_workers` sets both.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["FACTORY_ENV", "PARENT_ENV", "follow_parent", "worker_factory"]

logger = logging.getLogger(__name__)

PARENT_ENV = "S3SKILLS_WORKER_PARENT"
"""The process manager's pid, for its workers."""
FACTORY_ENV = "S3SKILLS_WORKER_FACTORY"
"""`module:function` that builds a worker's ASGI app."""

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _pdeathsig(sig: int) -> bool:
    """Ask the kernel for `sig` when the parent dies; False where that cannot be asked (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        logger.warning("prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno()))
        return False
    return True


def follow_parent(
    parent: int,
    *,
    poll: float = 1.0,
    exit: Callable[[int], Any] = os._exit,
    prefer_watchdog: bool = False,
) -> str:
    """End this process when `parent` (its parent process) ends (see the module).

    Args:
        parent: The pid this process was started by.
        poll: Seconds between two looks at the parent, for the watchdog.
        exit: How a worker whose parent is already gone ends (status 0; tests replace it).
        prefer_watchdog: Use the watchdog even where the kernel can signal.

    Returns:
        The mechanism in place: `pdeathsig` or `watchdog`, or `gone` when the parent had
        already ended (then `exit(0)` has been called).
    """
    mechanism = "pdeathsig" if not prefer_watchdog and _pdeathsig(signal.SIGTERM) else "watchdog"
    if os.getppid() != parent:  # it died before the mechanism was in place: nobody will signal
        logger.warning("the process manager (pid %d) is gone: this worker exits", parent)
        logging.shutdown()
        exit(0)
        return "gone"
    if mechanism == "watchdog":
        threading.Thread(target=_watch, args=(parent, poll), name="s3skills-parent-watch", daemon=True).start()
    return mechanism


def _watch(parent: int, poll: float) -> None:
    stop = threading.Event()
    while not stop.wait(poll):
        if os.getppid() != parent:
            logger.warning("the process manager (pid %d) is gone: this worker drains and exits", parent)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def worker_factory() -> Any:
    """The ASGI app of a worker: the parent followed, then the app of `S3SKILLS_WORKER_FACTORY`.

    Raises:
        RuntimeError: The variables are missing or malformed (this process was not started
            by `serve_workers`).
    """
    from uvicorn.importer import ImportFromStringError, import_from_string

    parent, factory = os.environ.get(PARENT_ENV, ""), os.environ.get(FACTORY_ENV, "")
    if not parent.isascii() or not parent.isdigit() or ":" not in factory:
        raise RuntimeError(f"a worker needs {PARENT_ENV} (a pid) and {FACTORY_ENV} (module:function)")
    follow_parent(int(parent))
    try:
        build = import_from_string(factory)
    except ImportFromStringError as exc:
        raise RuntimeError(f"{FACTORY_ENV}: {exc}") from None
    return build()
