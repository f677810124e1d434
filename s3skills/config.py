"""`Config`: the settings the backend, the skill library and the mounts share.

One frozen object instead of the same keyword arguments repeated through every
constructor. `Limits` is the one size policy: the same numbers bound what an agent
may write, what `push` uploads and what a read returns, and how much request-sized
input (a query, a name, a path, a script's arguments) one call may hand to CPU-bound
work. `bounded_query` and `check_length` apply those input caps where input enters
(the MCP server, the agent's tools, the prompt middleware), so no front end picks its
own number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from s3skills.layout import KeyLayout
from s3skills.paths import check_identity
from s3skills.tenancy import Tenant

__all__ = ["SHARED_CATALOG_TTL", "Config", "Limits", "SkillsMode", "VerifyMode", "bounded_query", "check_length"]

SkillsMode = Literal["gated", "library"]

VerifyMode = Literal["always", "interval", "never"]
"""When a library's manifest is checked against a LIST (see `s3skills.skills.index.catalog`)."""

MiB = 1024 * 1024

SHARED_CATALOG_TTL = 5.0
"""Default `Config.shared_catalog_ttl` (seconds), chosen from `bench/tenants.py` (bench/README.md)."""


@dataclass(frozen=True)
class Limits:
    """How much work one call may do.

    Attributes:
        max_file_bytes: Largest file an agent may read or write, and `push` may upload.
        max_grep_file_bytes: Larger files are skipped by `grep` (and said to be).
        max_grep_scan_bytes: Bytes `grep` reads per call before it stops and says so.
        max_grep_matches: Matches `grep` returns per call before it stops and says so.
        max_glob_results: Paths `glob` returns per call.
        max_ls_entries: Entries `ls` returns per call.
        max_frontmatter_bytes: Largest SKILL.md frontmatter indexed (larger: a problem).
        max_skill_md_bytes: Largest SKILL.md read.
        max_skills_per_library: Skills indexed per library (the rest: a problem).
        body_cache_bytes: Bytes of SKILL.md bodies kept in memory, all tenants together.
        concurrency: Requests in flight for one call (grep, indexing, transfers).
        max_query_chars: Longest search query ranked (`list_skills(query=...)` of the MCP
            tools face and of the agent's tools): a longer one is cut to its first
            `max_query_chars` characters and the answer says so. Ranking costs CPU per
            character (~6 us), so this bounds one call's ranking to a few tens of ms.
        max_prompt_query_chars: Characters of the conversation the prompt middleware
            ranks the index with: the last ones of the latest user turns (a request of a
            few thousand characters is kept whole; the start of a longer one is left out).
        max_name_chars: Longest skill name (an id or a folder name) a tool, prompt or
            script call may give; longer is refused with an error naming the cap (a
            valid id is at most two 255-byte segments).
        max_path_chars: Longest path of a file inside a skill a call may give (S3's key
            limit); longer is refused.
        max_args_chars: Largest input of `use_skill` and `run_skill_script`, as JSON
            characters; larger is refused.
        tenant_cpu_calls: CPU-bound calls (ranking) of one tenant that run at once on an
            MCP server; the tenant's others wait in its own queue, never in front of
            another tenant's.
        tenant_cpu_queue: Calls of one tenant that may wait for those; more are refused
            at once ("busy: try again").
    """

    max_file_bytes: int = 10 * MiB
    max_grep_file_bytes: int = 2 * MiB
    max_grep_scan_bytes: int = 16 * MiB
    max_grep_matches: int = 1000
    max_glob_results: int = 2000
    max_ls_entries: int = 5000
    max_frontmatter_bytes: int = 64 * 1024
    max_skill_md_bytes: int = 10 * MiB
    max_skills_per_library: int = 20_000
    body_cache_bytes: int = 64 * MiB
    concurrency: int = 32
    max_query_chars: int = 4_000
    max_prompt_query_chars: int = 8_000
    max_name_chars: int = 512
    max_path_chars: int = 1024
    max_args_chars: int = 256 * 1024
    tenant_cpu_calls: int = 1
    tenant_cpu_queue: int = 16

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive integer")


def bounded_query(text: str, limit: int) -> tuple[str, str | None]:
    """A search query cut to `limit` characters (its start, at a word boundary when one is
    near), and the note to show the caller when it was cut (None when it was not)."""
    if len(text) <= limit:
        return text, None
    cut = text[:limit]
    space = cut.rfind(" ", max(0, limit - 64))
    kept = cut[:space] if space > 0 else cut
    return kept, f"the query was cut to its first {len(kept)} characters (the limit is {limit}; it had {len(text)})"


def check_length(value: str, limit: int, what: str) -> str:
    """`value` when it is at most `limit` characters long.

    Raises:
        ValueError: Longer; the message names `what` and the cap.
    """
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters long; the limit is {limit}")
    return value


@dataclass(frozen=True)
class Config:
    """Settings shared by `S3Backend`, `SkillLibrary` and the mounts.

    Attributes:
        layout: Where each namespace lives (`KeyLayout()`, or `KeyLayout.seeds()`).
        shared_library: The organisation library's name (`shared/{name}/skills/`),
            below the user's library in precedence; None for none.
        catalog_ttl: Seconds an index is trusted without asking the store again (None:
            every query asks, 1 conditional GET of the manifest, so an edit made outside
            this process shows at once).
        shared_catalog_ttl: Seconds the shared (organisation) library's index is trusted
            without asking, when longer than `catalog_ttl` (None: as `catalog_ttl`). Every
            tenant reads that one library, so by default it costs one conditional GET per
            window whatever the load, while each user's own library stays fresh on every
            query. Writes through this process invalidate the cached index at once; only
            edits made elsewhere (another process, `aws s3 sync`) wait at most this long.
        skills_mode: `gated` (only loaded skills under /skills) or `library`.
        ticket_writable: Whether agents may write under /ticket.
        limits: The size and work limits.
        manifest: Index each library from its manifest (1 conditional GET) and keep
            the manifest current on every write through s3skills; False: LIST only.
        verify: When the manifest is checked against a LIST of the library: `always`
            (every refresh), `interval` (at most every `verify_interval` seconds, so
            writes made outside s3skills show within it) or `never` (libraries
            written only through s3skills).
        verify_interval: Seconds between checks with `verify="interval"`.
        actor: Who the version records of writes through this library name
            (`s3skills.skills.versions.records`); None: the OS user.
        channel: Serve this channel of the libraries (`s3skills.skills.channels`): each skill
            at the version the channel names, and no skill it does not name. None: `latest`.
        require_approval: `run_skill_script` runs a script of the shared library only when
            an approval record matches its current content (`s3skills approve`).
        approvals_prefix: Where approval records live (a prefix outside every library that
            IAM can restrict to approvers); None: the library's `.s3skills/approvals/`.
        usage_store: Count skill loads, failed loads and script runs per library and day in
            memory and write them to the library's `.s3skills/usage/` (counts per skill only,
            no user id), for the console (`s3skills.skills.usage_store`). False: nothing
            is counted or written.
        usage_flush_interval: Seconds between two writes of those counts (one PUT per
            library with new counts); they are also written by `SkillLibrary.aflush`.
    """

    layout: KeyLayout = field(default_factory=KeyLayout)
    shared_library: str | None = None
    catalog_ttl: float | None = None
    shared_catalog_ttl: float | None = SHARED_CATALOG_TTL
    skills_mode: SkillsMode = "gated"
    ticket_writable: bool = False
    limits: Limits = field(default_factory=Limits)
    manifest: bool = True
    verify: VerifyMode = "interval"
    verify_interval: float = 300.0
    actor: str | None = None
    channel: str | None = None
    require_approval: bool = True
    approvals_prefix: str | None = None
    usage_store: bool = True
    usage_flush_interval: float = 60.0

    def __post_init__(self) -> None:
        if self.channel is not None and self.channel != "latest":
            check_identity(self.channel, "channel name")
        if self.approvals_prefix is not None and (
            not self.approvals_prefix.endswith("/") or any(not p for p in self.approvals_prefix[:-1].split("/"))
        ):
            raise ValueError("approvals_prefix must be a key prefix ending with '/', without empty segments")
        if self.shared_library is not None:
            name = self.shared_library.strip("/")
            check_identity(name, "shared library name")
            object.__setattr__(self, "shared_library", name)
            self.layout.check_ids(library=name)
        if self.skills_mode not in ("gated", "library"):
            raise ValueError("skills_mode must be 'gated' or 'library'")
        if self.verify not in ("always", "interval", "never"):
            raise ValueError("verify must be 'always', 'interval' or 'never'")
        if self.verify_interval < 0:
            raise ValueError("verify_interval must be >= 0")
        if self.catalog_ttl is not None and self.catalog_ttl < 0:
            raise ValueError("catalog_ttl must be None or >= 0")
        if self.shared_catalog_ttl is not None and self.shared_catalog_ttl < 0:
            raise ValueError("shared_catalog_ttl must be None or >= 0")
        if not self.usage_flush_interval > 0:
            raise ValueError("usage_flush_interval must be > 0")

    def check_tenant(self, tenant: Tenant) -> Tenant:
        """Refuse the ids of a call that would reach into another namespace.

        Raises:
            TenantError: See `KeyLayout.check_ids`.
        """
        self.layout.check_ids(
            user_id=tenant.user_id, thread_id=tenant.thread_id, ticket_id=tenant.ticket_id, library=self.shared_library
        )
        return tenant
