"""`skills/list` of the MCP server over a whole library: every page, through the latency proxy.

Run by `index.py` for each library size up to `--baseline-max`, on the same bucket as the
index contenders, with the official MCP client in process (`mcp.client.client.Client`):

- `first listing ever`: a new server, no digest book yet: every file is read once to hash it;
- `cold server, book present`: a new server (a restart, another replica) after that;
- `warm server`: the same server listing again (digests cached in memory);
- `per skill, no book (before)`: the same server code with a source that lists each skill's
  folder on its own and keeps no book, as `LibrarySkillSource` did before the digest book.

Each run lists every page (50 skills per page). Reported like the index contenders:
median seconds and the requests the proxy saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from s3skills._loop import run_sync
from s3skills.skills import SkillLibrary

CONTENDERS = (
    "first listing ever",
    "cold server, book present",
    "warm server",
    "per skill, no book (before)",
)


def measure(library: Callable[[], SkillLibrary], user: str, book_key: str, meter: Any) -> dict[str, Any]:
    """The four contenders on one library; `meter.run(fn, setup=..., repeat=...)` times them."""
    import mcp_types as types
    from mcp.client.client import Client
    from pydantic import TypeAdapter

    from s3skills.serve.entries import Fingerprint
    from s3skills.serve.library_source import LibrarySkillSource
    from s3skills.serve.server import SkillsServer
    from s3skills.serve.source import SkillFile

    class ListSkills(types.Request[types.PaginatedRequestParams | None, Literal["skills/list"]]):
        method: Literal["skills/list"] = "skills/list"

    answer = TypeAdapter(dict[str, Any])

    class PerSkillSource(LibrarySkillSource):
        """The source before the digest book: a LIST per skill, nothing remembered."""

        async def files_many(self, user_id: str, skill_ids: Sequence[str]) -> dict[str, list[SkillFile]]:
            return {sid: await self.files(user_id, sid) for sid in skill_ids}

        async def recall(self, user_id: str, files: Sequence[SkillFile]) -> dict[str, Fingerprint]:
            return {}

        async def remember(self, user_id: str, known: Sequence[tuple[SkillFile, Fingerprint]]) -> None:
            return None

    async def list_all(server: SkillsServer) -> int:
        entries, cursor = 0, None
        async with Client(server.server) as client:
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await client.session.send_request(ListSkills(params=params), answer)
                entries += len(page["skills"])
                cursor = page.get("nextCursor")
                if not cursor:
                    return entries

    def server(source_type: type[LibrarySkillSource] = LibrarySkillSource) -> SkillsServer:
        return SkillsServer(source_type(library()), user_id=user)

    def drop_book() -> None:
        run_sync(library().store.adelete_many([book_key]))

    rows: dict[str, Any] = {}
    rows["first listing ever"] = meter.run(lambda: run_sync(list_all(server())), setup=drop_book, repeat=1)
    rows["cold server, book present"] = meter.run(lambda: run_sync(list_all(server())))
    warm = server()
    run_sync(list_all(warm))
    rows["warm server"] = meter.run(lambda: run_sync(list_all(warm)))
    rows["per skill, no book (before)"] = meter.run(lambda: run_sync(list_all(server(PerSkillSource))), repeat=1)
    return rows


def measure_first_page(library: Callable[[], SkillLibrary], user: str, meter: Any) -> dict[str, Any]:
    """The first `skills/list` page of a new server (a new process), timed like the contenders."""
    import mcp_types as types
    from mcp.client.client import Client
    from pydantic import TypeAdapter

    from s3skills.serve.library_source import LibrarySkillSource
    from s3skills.serve.server import SkillsServer

    class ListSkills(types.Request[types.PaginatedRequestParams | None, Literal["skills/list"]]):
        method: Literal["skills/list"] = "skills/list"

    answer = TypeAdapter(dict[str, Any])

    async def first_page() -> int:
        server = SkillsServer(LibrarySkillSource(library()), user_id=user)
        async with Client(server.server) as client:
            page = await client.session.send_request(ListSkills(params=None), answer)
            return len(page["skills"])

    return dict(meter.run(lambda: run_sync(first_page())))
