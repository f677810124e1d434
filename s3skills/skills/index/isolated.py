"""Heads that could cost real CPU are parsed in a separate process.

A cold index parses the head of every `SKILL.md` in a library, and a library is written
by whoever can push to it. The frontmatter budget (`s3skills.skills.format.parse`) bounds
what one crafted frontmatter costs (a few milliseconds to refuse one of ~30,000 values),
but a library of hundreds of them still costs seconds of CPU, and CPU spent in this
interpreter holds the GIL that every tenant's calls on the shared I/O loop need.

So a *heavy* head, one whose frontmatter is over `HEAVY_FRONTMATTER_BYTES` or may hold
more than `HEAVY_FRONTMATTER_VALUES` YAML values (`node_bound`, counted at C speed), is
parsed by one worker process: `python -m s3skills.skills.index.parse_worker`, started on
first use with this interpreter (not `multiprocessing`, whose `spawn` and `forkserver`
methods run the application's main script again in the child, and whose `fork` is unsafe
in a threaded process). No real skill's head is heavy: the largest frontmatter of the
682-skill corpus is 2,007 bytes and may hold at most 267 values, so real libraries never
start the worker (`tests/test_heavy_heads.py` checks the whole corpus). The worker is
shared by the whole process and parses one batch at a time: a library of heavy heads waits
behind its own work, and other tenants' light heads never queue there.

The worker starts with an environment reduced to what an interpreter needs (`worker_env`):
it parses text written by others and needs no credentials, so no `AWS_*` key, model API key
or token of the parent reaches it.

When the worker cannot start (it never answers), heavy heads are parsed in a worker thread,
as light ones are, and that is logged once. A worker that dies after it has answered (a head
that crashes it, a kill) costs only its batch, parsed in a thread: the next batch starts a new
one, so no head can switch the isolation off for the rest of the process.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from s3skills.skills.format.parse import frontmatter_prefix, node_bound
from s3skills.skills.index.manifest import SkillEntry
from s3skills.storage import ObjectInfo

__all__ = ["HEAVY_FRONTMATTER_BYTES", "HEAVY_FRONTMATTER_VALUES", "aparse_isolated", "is_heavy", "worker_env"]

logger = logging.getLogger(__name__)

HEAVY_FRONTMATTER_BYTES = 8192
"""A frontmatter over this many bytes is parsed in the worker process (real: at most 2,007)."""

HEAVY_FRONTMATTER_VALUES = 512
"""A frontmatter whose `node_bound` is over this is parsed in the worker process (real: at most 267)."""

Head = tuple[bytes, str] | str  # `s3skills.skills.index.heads.Head`
Item = tuple[str, ObjectInfo, Head]
Parse = Callable[[str, list[Item]], list[SkillEntry]]

_FRAME = struct.Struct(">Q")

_WORKER_ENV = frozenset(
    {
        "PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONNOUSERSITE",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "SYSTEMROOT",
    }
)
"""What the worker keeps of the parent's environment: the interpreter's own settings, no secret."""


def worker_env(parent: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment: `_WORKER_ENV` of `parent`, with this s3skills first on the path."""
    env = {k: v for k, v in parent.items() if k in _WORKER_ENV}
    root = str(Path(__file__).resolve().parents[3])  # where this s3skills is imported from
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def is_heavy(head: Head) -> bool:
    """Whether a head's frontmatter is parsed in the worker process (see the module)."""
    if isinstance(head, str):
        return False
    data = head[0]
    frontmatter = frontmatter_prefix(data) or data
    if len(frontmatter) > HEAVY_FRONTMATTER_BYTES:
        return True
    return node_bound(frontmatter.decode("utf-8", "replace")) > HEAVY_FRONTMATTER_VALUES


async def aparse_isolated(parse: Parse, source: str, items: list[Item]) -> list[SkillEntry]:
    """`parse(source, items)` off the I/O loop: light heads in a worker thread, heavy ones in the worker process.

    `parse` is `s3skills.skills.index.heads.parse_heads` (what the worker process runs).
    Returns one entry per item, in the order of `items`.
    """
    heavy = [i for i, (_, _, head) in enumerate(items) if is_heavy(head)]
    if not heavy:
        return await asyncio.to_thread(parse, source, items) if items else []
    skip = set(heavy)
    light = [i for i in range(len(items)) if i not in skip]
    out: dict[int, SkillEntry] = {}
    if light:
        out.update(zip(light, await asyncio.to_thread(parse, source, [items[i] for i in light]), strict=True))
    batch = [items[i] for i in heavy]
    entries = await WORKER.aparse(source, batch) if WORKER.usable else None
    if entries is None:
        entries = await asyncio.to_thread(parse, source, batch)
    out.update(zip(heavy, entries, strict=True))
    return [out[i] for i in range(len(items))]


class ParseWorker:
    """The worker process heavy heads are parsed in (one per process: `WORKER`).

    Requests go one at a time through a thread of their own, which waits on the pipe
    without the GIL while the worker parses.
    """

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command or [sys.executable, "-m", "s3skills.skills.index.parse_worker"]
        self.usable = True
        self.requests = 0
        self.restarts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="s3skills-parse-worker")
        self._lock = threading.Lock()

    async def aparse(self, source: str, items: list[Item]) -> list[SkillEntry] | None:
        """The entries of `items`, parsed by the worker process; None when it is not usable."""
        try:
            return await asyncio.wrap_future(self._thread.submit(self._roundtrip, source, items))
        except RuntimeError:  # the thread was shut down (interpreter exit)
            return None

    def _roundtrip(self, source: str, items: list[Item]) -> list[SkillEntry] | None:
        with self._lock:
            if not self.usable:
                return None
            try:
                process = self._started()
                if process.stdin is None or process.stdout is None:
                    raise OSError("the worker process has no pipes")
                _send(process.stdin, (source, items))
                entries = _receive(process.stdout)
                if not isinstance(entries, list) or len(entries) != len(items):
                    raise ValueError("the worker answered something else than one entry per head")
                self.requests += 1
                return entries
            except (OSError, EOFError, ValueError, pickle.PickleError) as exc:
                if self.requests == 0:  # it never answered: it cannot run here
                    self._give_up(f"{type(exc).__name__}: {exc}")
                else:  # it died on this batch (which a thread parses now): the next batch starts a new one
                    self.restarts += 1
                    self.close()
                return None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self.close()  # a worker that exited between batches: its pipes go with it
            self._process = subprocess.Popen(  # this interpreter, a fixed module, no secret of ours
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_env(os.environ), close_fds=True
            )
        return self._process

    def _give_up(self, why: str) -> None:
        if self.usable:
            logger.warning("heavy SKILL.md frontmatters are parsed in this process: the worker failed (%s)", why)
        self.usable = False
        self.close()

    def close(self) -> None:
        """Stop the worker process (the next heavy head is parsed in a thread if not `usable`)."""
        process, self._process = self._process, None
        if process is not None:
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()
            process.kill()
            process.wait()


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_FRAME.size)
    if len(header) < _FRAME.size:
        raise EOFError("the worker process closed its pipe")
    (size,) = _FRAME.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the worker process closed its pipe")
    return pickle.loads(data)  # noqa: S301 - our own child's answer


def serve(stdin: IO[bytes], stdout: IO[bytes], parse: Parse) -> None:
    """The worker's loop: parse each request until the parent closes the pipe."""
    while True:
        try:
            source, items = _receive(stdin)
        except EOFError:
            return
        _send(stdout, parse(source, items))


WORKER = ParseWorker()
"""The process's worker (started on its first heavy head, stopped at exit)."""
atexit.register(lambda: WORKER.close())
