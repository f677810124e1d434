"""The console's one library, read and written through the CLI's own paths.

Every change the console makes is a CLI command run in-process (`COMMANDS`) with
`--actor` set to the console user, so its records, channel changes, approvals and audit
events are the ones `s3skills approve`, `channel set|promote`, `enable` and `disable` leave:
one writer, one audit. Most pages are the JSON of a CLI command too (`history`, `diff`,
`approvals`, `audit`, `channel show`, `find`, `eval`), so a page costs what the command
costs. The library page reads `SkillLibrary` directly (its index: 1 GET when the manifest
is fresh, a conditional GET answered 304 when nothing changed).

Reads share one store and one `SkillLibrary` (its cached index); a write runs with a
`SkillLibrary` of its own whose `Config.actor` is the user, on the same store.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from dataclasses import replace
from datetime import date
from typing import Any

import click

from s3skills.cli.channels import channel_group
from s3skills.cli.context import CliError, Context, Settings, UsageError
from s3skills.cli.evals import eval_command
from s3skills.cli.find import find_command
from s3skills.cli.governance import approvals_command, approve_command, audit_command
from s3skills.cli.library import disable_command, enable_command
from s3skills.cli.versions import _versions, diff_command, history_command
from s3skills.errors import S3SkillsError
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.usage_store import StoredUsage, UsageReader
from s3skills.skills.versions.channels import Channel, aread_channel
from s3skills.skills.versions.history import SkillVersion
from s3skills.storage import S3ObjectStore

__all__ = ["ConsoleError", "ConsoleSource"]

COMMANDS: dict[str, click.Command] = {
    c.name or "": c
    for c in (
        channel_group,
        eval_command,
        find_command,
        approvals_command,
        approve_command,
        audit_command,
        disable_command,
        enable_command,
        diff_command,
        history_command,
    )
}
"""The CLI commands the console runs (their objects, not `s3skills.cli.cli`: the CLI's group
imports the `console` command, which imports this package)."""

USAGE_TTL = 30.0
"""Seconds the library's stored usage is shown without asking again (agents write theirs every 60 s)."""

MAX_CHANNELS = 50
"""Channels read for the library page (a library has a handful: staging, production...)."""


class ConsoleError(Exception):
    """A command the console ran failed; the message is the CLI's one line."""


class ConsoleSource:
    """One library (a user's, or a shared one) as the console sees it.

    Args:
        settings: The CLI's global options naming the bucket and library (`Settings`);
            `json` and `actor` are set per call.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = replace(settings, json=True, actor=None)
        self._reader = Context(self.settings, stdout=io.StringIO(), stderr=io.StringIO())
        self._lock = threading.Lock()
        self._channels: dict[str, tuple[str, Channel]] = {}
        self.usage_reader: UsageReader | None = None
        self.usage_ttl = USAGE_TTL
        self._usage: tuple[float, date, StoredUsage] | None = None

    @property
    def store(self) -> S3ObjectStore:
        """The store every read and write uses (built on first use)."""
        return self._reader.store

    @property
    def library(self) -> SkillLibrary:
        """The shared reading `SkillLibrary` (its index is cached between requests)."""
        return self._reader.library

    @property
    def owner(self) -> str:
        """Whose library, for titles (`shared library org`)."""
        return self._reader.owner

    @property
    def layout(self) -> KeyLayout:
        """The key layout (the CLI's: `--layout`, `--layout-file`)."""
        return self._reader.layout

    @property
    def prefix(self) -> str:
        """The library's key prefix."""
        return self._reader.prefix

    def command(self, *args: str, actor: str | None = None) -> dict[str, Any]:
        """Run `s3skills --json ARGS` on this library and return its JSON document.

        Args:
            args: The command and its arguments (no global options).
            actor: Who a write is recorded as (`--actor`); None for reads.

        Raises:
            ConsoleError: The command failed (its one-line message).
        """
        out, err = io.StringIO(), io.StringIO()
        settings = replace(self.settings, actor=actor)
        ctx = Context(settings, stdout=out, stderr=err, _store=self.store)
        if actor is None:
            ctx = Context(settings, stdout=out, stderr=err, _store=self.store, _library=self.library)
        command = COMMANDS[args[0]]
        try:
            status = command.main(list(args[1:]), prog_name=f"s3skills {args[0]}", obj=ctx, standalone_mode=False)
        except click.ClickException as exc:
            raise ConsoleError(" ".join(exc.format_message().split())) from exc
        except (CliError, UsageError, S3SkillsError, OSError, ValueError) as exc:
            raise ConsoleError(" ".join(str(exc).split()) or type(exc).__name__) from exc
        finally:
            if actor is not None:
                ctx.library.flush()
                self.library.invalidate()
        if status not in (0, None):
            raise ConsoleError(err.getvalue().strip() or f"{args[0]} failed")
        text = out.getvalue()
        return json.loads(text) if text.strip() else {}

    def stored_usage(self, today: date) -> StoredUsage:
        """What the agents counted in the library's `.s3skills/usage/` over the 30 days to `today`.

        Kept `usage_ttl` seconds. A read costs 1 LIST per day (a final day, older than
        yesterday, is listed once) and 1 GET per document not read before at its ETag
        (`s3skills.skills.usage_store.UsageReader`).

        Raises:
            S3SkillsError: A listing failed.
            ValueError: The layout has no usage folder for this library.
        """
        prefix = self.layout.usage_prefix(self.prefix)
        with self._lock:
            kept = self._usage
            reader = self.usage_reader = self.usage_reader or UsageReader(self.store)
        if kept is not None and kept[1] == today and time.monotonic() - kept[0] < self.usage_ttl:
            return kept[2]
        usage = self._reader.run(reader.aread(prefix, today))
        with self._lock:
            self._usage = (time.monotonic(), today, usage)
        return usage

    def versions(self, sid: str) -> list[SkillVersion]:
        """The versions of skill `sid`, newest first, each file with its S3 VersionId (what
        `s3skills history` lists: 1 ListObjectVersions, and the skill's version records).

        Raises:
            ConsoleError: The skill or its history cannot be read.
        """
        ctx = Context(self.settings, stdout=io.StringIO(), stderr=io.StringIO(), _store=self.store,
                      _library=self.library)  # fmt: skip
        try:
            return _versions(ctx, sid)[3]
        except (CliError, UsageError, S3SkillsError, OSError, ValueError) as exc:
            raise ConsoleError(" ".join(str(exc).split()) or type(exc).__name__) from exc

    def channels(self) -> tuple[list[Channel], list[str]]:
        """The stored channels (at most `MAX_CHANNELS`, by name), and what could not be read.

        Costs 1 LIST, and 1 GET per channel whose ETag changed since this console last read
        it: a decoded channel is kept by ETag (decoding checks every skill's pins, which at
        10,000 skills costs more than the page's requests).
        """
        try:
            prefix = self.layout.channels_prefix(self.prefix)
        except ValueError:
            return [], []

        async def read() -> tuple[list[Channel], list[str]]:
            objects, _ = await self.store.alist(prefix)
            listed = sorted(
                (o.key[len(prefix) :].removesuffix(".json"), o.etag)
                for o in objects
                if o.key.endswith(".json") and "/" not in o.key[len(prefix) :]
            )[:MAX_CHANNELS]
            etags = dict(listed)
            with self._lock:
                kept = {n: hit for n, hit in self._channels.items() if etags.get(n) == hit[0]}
            stale = [n for n in etags if n not in kept]
            got = await asyncio.gather(*(aread_channel(self.store, prefix, n) for n in stale), return_exceptions=True)
            bad = []
            for name, result in zip(stale, got, strict=True):
                if isinstance(result, Channel):
                    kept[name] = (etags[name], result)
                else:
                    bad.append(f"channel {name}: {result}")
            with self._lock:
                self._channels = kept
            return [kept[n][1] for n in etags if n in kept], bad

        return self._reader.run(read())
