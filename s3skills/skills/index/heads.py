"""From a `SKILL.md` object to a `SkillEntry`: read the head that holds its frontmatter, parse it.

The catalog (`s3skills.skills.index.catalog`) decides which `SKILL.md` files to read; this
module reads each with as little as it can and turns it into an entry:

- `HeadReader.aread`: one ranged GET of the first `head_bytes`, which usually holds the
  whole frontmatter and the start of the body (for the sketch); a frontmatter longer
  than that is read up to `Limits.max_frontmatter_bytes`, never more. A file over
  `Limits.max_skill_md_bytes`, or one that disappears, gives a reason instead of bytes.
- `HeadReader.of_bytes`: the same head from bytes a writer just stored (no request), so
  a writer's entry equals the one a reader would build.
- `parse_heads`: the CPU part (frontmatter, body sketch, the entry's weight). Callers run
  it in a worker thread, or on the loop a few heads at a time (`s3skills.skills.index.streaming`);
  a heavy head (a frontmatter bigger than any real one) is parsed in a worker process
  (`s3skills.skills.index.isolated`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from s3skills._loop import gather_limited
from s3skills.config import Limits
from s3skills.errors import FileTooLarge, NotFound
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.skills.format.model import InvalidSkill, SkillInfo
from s3skills.skills.format.parse import frontmatter_prefix, parse_skill_md
from s3skills.skills.index.derived import weigh
from s3skills.skills.index.isolated import aparse_isolated, is_heavy
from s3skills.skills.index.manifest import SkillEntry
from s3skills.skills.ranking.sketch import make_sketch
from s3skills.storage import ObjectBody, ObjectInfo, ObjectStore

__all__ = ["DEFAULT_ENTRY_WEIGHT", "Head", "HeadReader", "Parsed", "head_weight", "parse_heads", "parse_read"]

Head = tuple[bytes, str] | str
"""The bytes of a `SKILL.md` needed to parse it and the ETag they were read with, or why
it was skipped (the reason becomes the entry's problem)."""

Parsed = Head | SkillEntry
"""What a cold index's reader hands its parser: a head, or a heavy head's entry parsed already
in the worker process (`HeadReader.aread_parsed`, `s3skills.skills.index.isolated`)."""

DEFAULT_ENTRY_WEIGHT = 1024
"""Estimated bytes of an entry's own fields (id, key, ETag, `SkillInfo`), beyond its metadata."""


class HeadReader:
    """Reads the heads of `SKILL.md` objects and parses them into entries.

    Args:
        store: The object store holding the libraries.
        limits: `max_skill_md_bytes`, `max_frontmatter_bytes` and `concurrency` apply.
        head_bytes: How much of a `SKILL.md` the first ranged GET reads.
    """

    def __init__(self, store: ObjectStore, limits: Limits, head_bytes: int) -> None:
        self.store = store
        self.limits = limits
        self.head_bytes = head_bytes

    async def aread(self, obj: ObjectInfo, probe: ObjectBody | None = None) -> Head:
        """The head of `obj` (1 ranged GET, 2 for a frontmatter longer than `head_bytes`).

        `probe` is the first `head_bytes` already read, if the caller has them.
        """
        if obj.size > self.limits.max_skill_md_bytes:
            return f"SKILL.md is {obj.size} bytes; the limit is {self.limits.max_skill_md_bytes}"
        try:
            head = probe or await self.store.aget_range(obj.key, 0, self.head_bytes)
            if head.size <= len(head.data):
                return head.data, head.etag
            if (whole := _holding_frontmatter(head.data)) is not None:
                return whole, head.etag
            # The frontmatter is longer than the head: read up to its limit, no more.
            limit = self.limits.max_frontmatter_bytes + self.head_bytes
            more = await self.store.aget_range(obj.key, 0, limit)
            if more.size > len(more.data) and frontmatter_prefix(more.data) is None:
                return f"the frontmatter is over {self.limits.max_frontmatter_bytes} bytes"
            return (frontmatter_prefix(more.data) or more.data), more.etag
        except NotFound:
            return "SKILL.md disappeared while the index was built"
        except FileTooLarge as exc:
            return str(exc)

    async def aread_parsed(self, source: str, skill_id: str, obj: ObjectInfo) -> Parsed:
        """`aread` for a cold index's parser: a heavy head comes back parsed (in the worker process)."""
        head = await self.aread(obj)
        if not is_heavy(head):
            return head
        (entry,) = await aparse_isolated(parse_heads, source, [(skill_id, obj, head)])
        return entry

    def of_bytes(self, data: bytes, etag: str) -> Head:
        """What `aread` would read of an object holding `data` (no request)."""
        if len(data) > self.limits.max_skill_md_bytes:
            return f"SKILL.md is {len(data)} bytes; the limit is {self.limits.max_skill_md_bytes}"
        head = data[: self.head_bytes]
        if len(data) <= len(head):
            return data, etag
        if (whole := _holding_frontmatter(head)) is not None:
            return whole, etag
        more = data[: self.limits.max_frontmatter_bytes + self.head_bytes]
        if len(data) > len(more) and frontmatter_prefix(more) is None:
            return f"the frontmatter is over {self.limits.max_frontmatter_bytes} bytes"
        return (frontmatter_prefix(more) or more), etag

    async def aparse(self, source: str, objects: list[tuple[str, ObjectInfo]]) -> list[SkillEntry]:
        """The entries of listed `SKILL.md` objects: their heads read concurrently, parsed in a thread."""
        jobs = [partial(self.aread, obj) for _, obj in objects]
        heads = await gather_limited(jobs, self.limits.concurrency)
        items = [(sid, obj, head) for (sid, obj), head in zip(objects, heads, strict=True)]
        return await aparse_isolated(parse_heads, source, items)

    async def aentries(self, source: str, prefix: str, skill_ids: list[str]) -> dict[str, SkillEntry | None]:
        """The current entries of some skills by id (1 ranged GET each; None: the SKILL.md is gone)."""

        async def head(sid: str) -> tuple[str, ObjectInfo, Head] | None:
            key = prefix + sid + "/" + SKILL_FILE
            try:
                probe = await self.store.aget_range(key, 0, self.head_bytes)
            except NotFound:
                return None
            obj = ObjectInfo(key, probe.size, probe.etag)
            whole = probe.size <= len(probe.data) and probe.size <= self.limits.max_skill_md_bytes
            return sid, obj, (probe.data, probe.etag) if whole else await self.aread(obj, probe)

        found = await gather_limited([partial(head, sid) for sid in skill_ids], self.limits.concurrency)
        items = [item for item in found if item is not None]
        out: dict[str, SkillEntry | None] = dict.fromkeys(skill_ids)
        if items:
            out.update((e.skill_id, e) for e in await aparse_isolated(parse_heads, source, items))
        return out

    async def aentries_of(
        self, source: str, prefix: str, bodies: Mapping[str, tuple[bytes, str]]
    ) -> dict[str, SkillEntry]:
        """The entries of `SKILL.md` files a writer just stored, from their bytes (no request).

        `bodies`: skill id -> (the bytes written, the ETag the PUT returned). Each entry is
        the one a reader would build from a ranged GET of the object (`aread`).
        """
        items = []
        for sid, (data, etag) in bodies.items():
            obj = ObjectInfo(prefix + sid + "/" + SKILL_FILE, len(data), etag)
            items.append((sid, obj, self.of_bytes(data, etag)))
        return {e.skill_id: e for e in await aparse_isolated(parse_heads, source, items)}


def _holding_frontmatter(head: bytes) -> bytes | None:
    """A head that holds the whole frontmatter, cut to whole lines (the body it holds feeds
    the sketch); None when the frontmatter goes on past it."""
    prefix = frontmatter_prefix(head)
    if prefix is None:
        return None
    cut = head.rfind(b"\n") + 1
    return head[:cut] if cut >= len(prefix) else prefix


def head_weight(head: Parsed) -> int:
    """The bytes a read head gives the parser (a skipped object's reason, a parsed entry: nothing)."""
    return len(head[0]) if isinstance(head, tuple) else 0


def parse_read(source: str, items: list[tuple[str, ObjectInfo, Parsed]]) -> list[SkillEntry]:
    """`parse_heads` for a cold index's reads (`HeadReader.aread_parsed`): parsed entries pass through."""
    done = [parsed for _, _, parsed in items if isinstance(parsed, SkillEntry)]
    rest = [(sid, obj, parsed) for sid, obj, parsed in items if not isinstance(parsed, SkillEntry)]
    return done + (parse_heads(source, rest) if rest else [])


def parse_heads(source: str, items: list[tuple[str, ObjectInfo, Head]]) -> list[SkillEntry]:
    """Parse read heads into entries (CPU work: in a worker thread, or on the loop a few at a time).

    A skipped object or a `SKILL.md` that does not parse gives an entry with its problem.
    """
    out = []
    for skill_id, obj, head in items:
        if isinstance(head, str):
            out.append(SkillEntry(skill_id, obj.key, obj.etag, obj.size, None, head))
            continue
        data, etag = head
        try:
            parsed = parse_skill_md(data, folder=SkillId.parse(skill_id).leaf)
        except InvalidSkill as exc:
            out.append(SkillEntry(skill_id, obj.key, etag, obj.size, None, str(exc)))
            continue
        info = SkillInfo(
            id=skill_id,
            metadata=parsed.metadata,
            source=source,
            etag=etag,
            warnings=parsed.warnings,
            sketch=make_sketch(parsed.body),
        )
        weight = weigh(parsed.metadata.model_dump(mode="json"), max_depth=1 << 16, limit=1 << 40)
        weight = (weight or 0) + DEFAULT_ENTRY_WEIGHT + len(info.sketch)
        out.append(SkillEntry(skill_id, obj.key, etag, obj.size, info, None, weight=weight, checked=True))
    return out
