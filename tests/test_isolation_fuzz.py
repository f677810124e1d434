"""Isolation fuzzing (issue 9, item 13): tenant A, hostile input, every operation, one request log.

Tenant `ana` (thread `t1`, ticket `k1`, skills `pdf` and `escrituras/compraventa`
loaded, and the disabled `off` and shared `orgoff` forged into her state) calls every
protocol operation, sync and async, and the skill tools (`cargar_habilidad`,
`list_skills`, `read_skill`, through a LangGraph `ToolNode`), with random and adversarial
paths, glob patterns and skill names. Canary strings are planted in `bob`'s library and
workspace (same thread id), another ticket, another of ana's threads, the shared
library's disabled skill, ana's disabled skill and the files of her unloaded skills.

Every key or prefix the store is asked for is checked against what ana may touch, and no
canary may appear in any result. A `KeyLogStore` (in memory) records the requests, so
thousands of examples run in seconds: `S3SKILLS_FUZZ_EXAMPLES` sets how many (2,000 by
default; see the README for a run with far more).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keylog import KeyLogStore
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from runs import ASYNC_RUN, SYNC_RUN

from s3skills import S3Backend
from s3skills.tools import skill_tools

EXAMPLES = int(os.environ.get("S3SKILLS_FUZZ_EXAMPLES", "2000"))

CANARIES = (
    "CANARY-B-LIB",
    "CANARY-B-WS",
    "CANARY-TICKET-B",
    "CANARY-A-OTHER-THREAD",
    "CANARY-SHARED-DISABLED",
    "CANARY-A-DISABLED",
    "CANARY-A-UNLOADED",
)


def _md(name: str, description: str, body: str, *, enabled: bool = True) -> bytes:
    flag = "" if enabled else "enabled: false\n"
    return f"---\nname: {name}\ndescription: {description}\n{flag}---\n{body}\n".encode()


FILES: dict[str, bytes] = {
    # What ana may see.
    "users/ana/skills/pdf/SKILL.md": _md("pdf", "PDF forms.", "alpha pdf body"),
    "users/ana/skills/pdf/forms.md": b"alpha forms",
    "users/ana/skills/escrituras/compraventa/SKILL.md": _md("compraventa", "Deeds.", "alpha deeds"),
    "users/ana/skills/escrituras/compraventa/refs/a.md": b"alpha ref",
    "users/ana/skills/notes/SKILL.md": _md("notes", "Notes, not loaded.", "alpha notes body"),
    "users/ana/threads/t1/notes.md": b"alpha workspace",
    "users/ana/threads/t1/sub/deep.md": b"alpha deep",
    "tickets/k1/ticket.md": b"alpha ticket",
    "shared/org/skills/house/SKILL.md": _md("house", "House style.", "alpha house"),
    # Canaries.
    "users/ana/skills/notes/private.md": b"CANARY-A-UNLOADED",
    "users/ana/skills/escrituras/venta/SKILL.md": _md("venta", "Sales.", "alpha venta"),
    "users/ana/skills/escrituras/venta/ref.md": b"CANARY-A-UNLOADED",
    "users/ana/skills/off/SKILL.md": _md("off", "CANARY-A-DISABLED", "CANARY-A-DISABLED", enabled=False),
    "users/ana/skills/off/ref.md": b"CANARY-A-DISABLED",
    "users/ana/skills/off/scripts/go.py": b"print('CANARY-A-DISABLED')",
    "shared/org/skills/orgoff/SKILL.md": _md(
        "orgoff", "CANARY-SHARED-DISABLED", "CANARY-SHARED-DISABLED", enabled=False
    ),
    "shared/org/skills/orgoff/ref.md": b"CANARY-SHARED-DISABLED",
    "users/bob/skills/pdf/SKILL.md": _md("pdf", "CANARY-B-LIB", "CANARY-B-LIB"),
    "users/bob/skills/pdf/forms.md": b"CANARY-B-LIB",
    "users/bob/skills/secret/SKILL.md": _md("secret", "CANARY-B-LIB", "CANARY-B-LIB"),
    "users/bob/threads/t1/notes.md": b"CANARY-B-WS",
    "users/ana/threads/t2/notes.md": b"CANARY-A-OTHER-THREAD",
    "tickets/k2/ticket.md": b"CANARY-TICKET-B",
    "tickets/k10/ticket.md": b"CANARY-TICKET-B",
}

LOADED = ["pdf", "escrituras/compraventa", "off", "orgoff"]  # the last two are forged and disabled
ENABLED_SKILL_FOLDERS = (
    "users/ana/skills/pdf/",
    "users/ana/skills/escrituras/compraventa/",
    "users/ana/skills/notes/",
    "users/ana/skills/escrituras/venta/",
    "shared/org/skills/house/",
)
LOADED_FOLDERS = ("users/ana/skills/pdf/", "users/ana/skills/escrituras/compraventa/")
LIBRARIES = ("users/ana/skills/", "shared/org/skills/")
OWN = ("users/ana/threads/t1/", "tickets/k1/")
DISABLED_SKILL_MD = ("users/ana/skills/off/SKILL.md", "shared/org/skills/orgoff/SKILL.md")
# The index of each of her libraries (derived data: it names SKILL.md files and their metadata;
# a reader may build it, and a forged one exposes nothing: tests/test_manifest.py).
MANIFESTS = ("users/ana/.s3skills/manifest.json", "shared/org/.s3skills/manifest.json")


def allowed(operation: str, key: str) -> bool:
    """Whether ana's call may ask the store for `key` (or list `key` as a prefix)."""
    if key.startswith(OWN):
        return True
    if key in MANIFESTS:
        return operation in ("GetObject", "PutObject")
    if operation == "ListObjectsV2":  # key names of her libraries (by category), never bodies
        return key.startswith(LIBRARIES)
    if operation == "ListObjectVersions":  # an enabled skill's files, when it is being loaded
        return key.startswith(ENABLED_SKILL_FOLDERS)
    if operation == "GetRange":  # the index reads the head of every SKILL.md of her libraries
        return key.startswith(LIBRARIES) and key.endswith("/SKILL.md")
    if operation in ("GetObject", "HeadObject"):
        if key in DISABLED_SKILL_MD:
            return False
        is_skill_md = key.endswith("/SKILL.md") and key.startswith(ENABLED_SKILL_FOLDERS)
        return is_skill_md or key.startswith(LOADED_FOLDERS)
    return False  # PutObject, DeleteObjects: only under her own thread


STORE = KeyLogStore()
for _key, _body in FILES.items():
    STORE.put_object(_key, _body)
BACKEND = S3Backend("memory", store=STORE, shared_prefix="org")
TOOLS = skill_tools(BACKEND)


class ToolState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    loaded_skills: list[str]
    current_skill: str


def _tool_graph() -> Any:
    graph = StateGraph(ToolState)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


TOOL_RUN = _tool_graph()
CONTEXT = {"user_id": "ana", "ticket_id": "k1"}
CONFIG = {"configurable": {"thread_id": "t1"}}

# --- strategies --------------------------------------------------------------------------------

ATOMS = [
    "workspace", "ticket", "skills", "large_tool_results", "conversation_history", "users", "shared",
    "threads", "tickets", "ana", "bob", "org", "t1", "t2", "k1", "k2", "k10", "pdf", "forms.md",
    "escrituras", "compraventa", "venta", "notes", "notes.md", "off", "orgoff", "house", "secret",
    "SKILL.md", "ref.md", "private.md", "refs", "scripts", "sub", "..", ".", "", "...", "%2e%2e",
    "a\\b", "x\x00", "\u2028", "\ud800", "*", "**", "?", "[a]", "{a,b}", "ñ",
]  # fmt: skip
SEGMENT = st.sampled_from(ATOMS) | st.text(max_size=5)
PATHS = st.one_of(
    st.builds(
        lambda lead, parts, trail: lead + "/".join(parts) + trail,
        st.sampled_from(["/", "", "//", "\\", "./", "../", "/workspace/", "/skills/", "/ticket/"]),
        st.lists(SEGMENT, max_size=5),
        st.sampled_from(["", "/", "//"]),
    ),
    st.text(max_size=30),
)
GLOB_ATOMS = ["*", "**", "?", "*.md", "SKILL.md", "..", "bob", "[!a]", "{off,orgoff}", "t2"]
GLOBS = st.one_of(
    st.builds(
        "/".join,
        st.lists(
            st.sampled_from(["*", "**", "?", "*.md", "SKILL.md", "..", "bob", "[!a]", "{off,orgoff}", "t2"]), max_size=4
        ),
    ),
    st.text(max_size=12),
)
HOSTILE_SKILLS = [
    "off", "orgoff", "notes", "venta", "escrituras/venta", "secret", "bob/pdf", "../bob/skills/pdf",
    "users/bob/skills/pdf", "pdf", "house", "compraventa", "escrituras", "org/orgoff", "shared/org/orgoff",
]  # fmt: skip
SKILL_NAMES = st.one_of(
    st.sampled_from(HOSTILE_SKILLS),
    st.builds("/".join, st.lists(SEGMENT, min_size=1, max_size=3)),
    st.text(max_size=15),
)

SyncOp = Callable[[str, str], Any]

SYNC_OPS: dict[str, SyncOp] = {
    "ls": lambda p, g: BACKEND.ls(p),
    "read": lambda p, g: BACKEND.read(p),
    "read_window": lambda p, g: BACKEND.read(p, offset=1, limit=3),
    "grep": lambda p, g: BACKEND.grep("alpha", path=p or None, glob=g or None),
    "grep_pattern": lambda p, g: BACKEND.grep(g or "a", path="/"),
    "glob": lambda p, g: BACKEND.glob(g, path=p or "/"),
    "write": lambda p, g: BACKEND.write(p, "written"),
    "edit": lambda p, g: BACKEND.edit(p, "alpha", "alpha", replace_all=True),
    "delete": lambda p, g: BACKEND.delete(p),
    "upload": lambda p, g: BACKEND.upload_files([(p, b"uploaded")]),
    "download": lambda p, g: BACKEND.download_files([p]),
    "exists": lambda p, g: BACKEND.exists(p),
}
ASYNC_OPS: dict[str, Callable[[str, str], Any]] = {
    "als": lambda p, g: BACKEND.als(p),
    "aread": lambda p, g: BACKEND.aread(p),
    "agrep": lambda p, g: BACKEND.agrep("alpha", path=p or None, glob=g or None),
    "aglob": lambda p, g: BACKEND.aglob(g, path=p or "/"),
    "awrite": lambda p, g: BACKEND.awrite(p, "written"),
    "aedit": lambda p, g: BACKEND.aedit(p, "alpha", "alpha"),
    "adelete": lambda p, g: BACKEND.adelete(p),
    "aupload": lambda p, g: BACKEND.aupload_files([(p, b"uploaded")]),
    "adownload": lambda p, g: BACKEND.adownload_files([p]),
    "aexists": lambda p, g: BACKEND.aexists(p),
}
TOOL_OPS = ("cargar_habilidad", "read_skill", "list_skills")
OPERATIONS = [*SYNC_OPS, *ASYNC_OPS, *TOOL_OPS]


def _tool_args(name: str, skill: str, text: str) -> dict[str, Any]:
    if name == "cargar_habilidad":
        return {"skill_path": skill}
    if name == "read_skill":
        return {"name": skill}
    return {"query": text, "category": skill or None}


def run_operation(operation: str, path: str, pattern: str, skill: str) -> Any:
    if operation in SYNC_OPS:
        op = SYNC_OPS[operation]
        return SYNC_RUN.invoke(
            {"op": lambda: op(path, pattern), "loaded_skills": LOADED}, context=CONTEXT, config=CONFIG
        )["result"]
    if operation in ASYNC_OPS:
        aop = ASYNC_OPS[operation]

        async def call() -> Any:
            return await aop(path, pattern)

        state = {"op": call, "loaded_skills": LOADED}
        return asyncio.run(ASYNC_RUN.ainvoke(state, context=CONTEXT, config=CONFIG))["result"]
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": operation, "args": _tool_args(operation, skill, pattern), "id": "c1", "type": "tool_call"}
        ],
    )
    out = TOOL_RUN.invoke({"messages": [message], "loaded_skills": LOADED}, context=CONTEXT, config=CONFIG)
    return [m.content for m in out["messages"] if isinstance(m, ToolMessage)]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(operation=st.sampled_from(OPERATIONS), path=PATHS, pattern=GLOBS, skill=SKILL_NAMES)
def test_tenant_a_never_reaches_another_namespace_or_a_hidden_skill(
    operation: str, path: str, pattern: str, skill: str
) -> None:
    STORE.take()
    result = run_operation(operation, path, pattern, skill)
    requests = [(op, key) for op, key in STORE.take() if op != "GetObject.bytes"]
    for op, key in requests:
        assert allowed(op, key), f"{operation}({path!r}, {pattern!r}, {skill!r}) sent {op} {key!r}"
    shown = repr(result)
    for canary in CANARIES:
        assert canary not in shown, f"{operation}({path!r}, {pattern!r}, {skill!r}) showed {canary}: {shown[:300]}"


def test_the_fuzzed_calls_do_reach_the_store_and_see_allowed_data() -> None:
    # Guards the property above against calls that silently do nothing.
    STORE.take()
    read = run_operation("read", "/workspace/notes.md", "", "")
    loaded = run_operation("cargar_habilidad", "", "", "notes")
    listed = run_operation("list_skills", "", "", "")
    grep = run_operation("agrep", "/", "", "")
    log = STORE.take()
    assert read.file_data["content"] == "alpha workspace"
    assert "Skill 'notes' loaded" in loaded[0]
    assert "house" in listed[0]
    assert "pdf" in listed[0]
    assert {m["path"] for m in grep.matches} >= {"/workspace/notes.md", "/skills/pdf/forms.md", "/ticket/ticket.md"}
    assert ("GetObject", "users/ana/threads/t1/notes.md") in log
    assert all(allowed(op, key) for op, key in log if op != "GetObject.bytes")
    assert not allowed("GetObject", "users/bob/threads/t1/notes.md")
    assert not allowed("GetObject", "users/ana/skills/notes/private.md")


# --- derived files (issue 22, items 3 and 5): hostile manifests and digest books -----------------
#
# Each example gives ana's and the shared library's `.s3skills/manifest.json` and ana's digest
# book random or hostile bytes (damaged JSON, deep nesting, forged entries that enable disabled
# skills, drop a nested skill, name bob's keys or carry fields and sizes an entry has not), then
# a fresh backend (nothing cached: the bytes are read) runs one operation. No run raises, and no
# byte of another tenant, of a disabled skill or of a folder nested in a loaded skill shows.

import json  # noqa: E402

import pytest  # noqa: E402

from s3skills.errors import S3SkillsError  # noqa: E402
from s3skills.layout import KeyLayout  # noqa: E402
from s3skills.serve.library_source import LibrarySkillSource  # noqa: E402
from s3skills.skills.digests import BOOK_SCHEMA, book_key  # noqa: E402
from s3skills.skills.manifest import MANIFEST_SCHEMA  # noqa: E402

DERIVED_CANARIES = (*CANARIES, "CANARY-NESTED")
DERIVED_FILES: dict[str, bytes] = {
    **FILES,
    "users/ana/skills/pdf/hidden/SKILL.md": b"no frontmatter: CANARY-NESTED",
    "users/ana/skills/pdf/hidden/secret.md": b"CANARY-NESTED",
    "users/ana/skills/pdf/deep/er/SKILL.md": _md("er", "Deeper than an id.", "CANARY-NESTED"),
    "users/ana/skills/pdf/deep/er/x.md": b"CANARY-NESTED",
}
ANA_BOOK = book_key(KeyLayout(), "users/ana/skills/")
DERIVED_KEYS = (*MANIFESTS, ANA_BOOK, book_key(KeyLayout(), "shared/org/skills/"))

_IDS = ["pdf", "off", "orgoff", "notes", "pdf/hidden", "escrituras/venta", "secret", "../bob/skills/pdf", "house"]
_KEYS = st.sampled_from(
    [
        "users/ana/skills/{id}/SKILL.md",
        "shared/org/skills/{id}/SKILL.md",
        "users/bob/skills/{id}/SKILL.md",
        "users/bob/skills/secret/SKILL.md",
        "users/ana/skills/off/SKILL.md",
    ]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_METADATA = st.fixed_dictionaries(
    {"name": st.sampled_from(["pdf", "off", "x"]), "description": st.sampled_from(["forged", "d" * 2000])},
    optional={"enabled": st.booleans(), "tags": st.lists(st.text(max_size=3), max_size=4), "extra": _JSON},
)
_ENTRY = st.fixed_dictionaries(
    {"key": _KEYS, "etag": st.sampled_from(["x", "e" * 2000, ""]), "size": st.integers(-1, 10**6)},
    optional={
        "metadata": _METADATA,
        "problem": st.text(max_size=10),
        "warnings": st.lists(st.text(max_size=5), max_size=3),
        "sketch": st.sampled_from(["short", "s" * 1025]),
        "owner": _JSON,
    },
)


def _manifest_doc(prefix: str, entries: dict[str, dict[str, Any]], verified: bool) -> bytes:
    skills = {
        sid: {**item, "key": str(item["key"]).format(id=sid)} if isinstance(item.get("key"), str) else item
        for sid, item in entries.items()
    }
    doc = {"schema": MANIFEST_SCHEMA, "prefix": prefix, "built_at": 1.0, "verified_at": 4e9 if verified else None}
    return json.dumps({**doc, "skills": skills}).encode()


def _nested(depth: int) -> bytes:
    return b'{"schema":"' + MANIFEST_SCHEMA.encode() + b'","skills":' + b"[" * depth + b"]" * depth + b"}"


DERIVED_BYTES = st.one_of(
    st.none(),  # no such object
    st.binary(max_size=64),
    st.sampled_from([b"{}", b"[]", b"null", b"[" * 50_000, b'{"schema":' * 5_000]),
    st.integers(100, 5_000).map(_nested),
    st.builds(
        lambda prefix, entries, verified: _manifest_doc(prefix, entries, verified),
        st.sampled_from(["users/ana/skills/", "shared/org/skills/", "users/bob/skills/"]),
        st.dictionaries(st.sampled_from(_IDS), _ENTRY, max_size=4),
        st.booleans(),
    ),
    st.builds(
        lambda files: json.dumps({"schema": BOOK_SCHEMA, "files": files}).encode(),
        st.dictionaries(st.sampled_from(["pdf/SKILL.md", "pdf/forms.md", "off/ref.md", "x"]), _JSON, max_size=3),
    ),
)
DERIVED_OPS = (
    "read", "ls", "grep", "glob", "cargar_habilidad", "read_skill", "list_skills",
    "mcp_list", "mcp_files", "mcp_read", "mcp_recall",
)  # fmt: skip
HIDDEN_PATHS = st.sampled_from(
    [
        "/skills/pdf/hidden/secret.md",
        "/skills/pdf/hidden/SKILL.md",
        "/skills/pdf/deep/er/x.md",
        "/skills/pdf",
        "/skills/off/ref.md",
        "/skills/orgoff/ref.md",
        "/skills/secret/SKILL.md",
        "/skills/pdf/forms.md",
        "/",
    ]
)


NESTED_FOLDERS = ("users/ana/skills/pdf/hidden/", "users/ana/skills/pdf/deep/er/")


def _derived_allowed(operation: str, key: str, *, mcp: bool) -> bool:
    """`allowed`, plus the derived files; an MCP client may read any enabled skill (none is "loaded")."""
    if key in DERIVED_KEYS:
        return operation in ("GetObject", "PutObject", "HeadObject", "DeleteObjects")
    if key.startswith(NESTED_FOLDERS) and operation in ("GetObject", "HeadObject"):
        return False
    if mcp and operation in ("GetObject", "HeadObject") and key not in DISABLED_SKILL_MD:
        return key.startswith(ENABLED_SKILL_FOLDERS)
    return allowed(operation, key)


def _run_derived(backend: S3Backend, operation: str, path: str, skill: str) -> Any:
    if operation in ("read", "ls", "grep", "glob"):
        calls: dict[str, Callable[[], Any]] = {
            "read": lambda: backend.read(path),
            "ls": lambda: backend.ls(path),
            "grep": lambda: backend.grep("CANARY", path=path),
            "glob": lambda: backend.glob("**", path=path),
        }
        op = calls[operation]
        return SYNC_RUN.invoke({"op": op, "loaded_skills": LOADED}, context=CONTEXT, config=CONFIG)["result"]
    if operation.startswith("mcp_"):
        source = LibrarySkillSource(backend.skills)

        async def mcp() -> Any:
            try:
                if operation == "mcp_list":
                    return await source.list_skills("ana")
                files = await source.files("ana", skill)
                if operation == "mcp_files":
                    return files
                if operation == "mcp_recall":
                    return await source.recall("ana", files)
                return await source.read("ana", skill, path.removeprefix("/skills/pdf/") or "SKILL.md")
            except S3SkillsError as exc:  # a clear error for bad input (-32602 on the wire)
                return f"error: {exc}"

        return asyncio.run(mcp())
    tools = skill_tools(backend)
    graph = StateGraph(ToolState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    message = AIMessage(
        content="",
        tool_calls=[{"name": operation, "args": _tool_args(operation, skill, ""), "id": "c1", "type": "tool_call"}],
    )
    out = graph.compile().invoke({"messages": [message], "loaded_skills": LOADED}, context=CONTEXT, config=CONFIG)
    return [m.content for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.slow  # 2,000 examples: ~25 s on an idle 2-core machine; `.ci/run` runs it after the README command
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ana_manifest=DERIVED_BYTES,
    shared_manifest=DERIVED_BYTES,
    book=DERIVED_BYTES,
    operation=st.sampled_from(DERIVED_OPS),
    path=HIDDEN_PATHS,
    skill=st.sampled_from([*HOSTILE_SKILLS, "pdf/hidden", "hidden"]),
)
def test_hostile_derived_files_never_fail_a_run_nor_show_a_hidden_byte(
    ana_manifest: bytes | None, shared_manifest: bytes | None, book: bytes | None, operation: str, path: str, skill: str
) -> None:
    store = KeyLogStore()
    for key, body in DERIVED_FILES.items():
        store.put_object(key, body)
    for key, data in zip(DERIVED_KEYS, (ana_manifest, shared_manifest, book, book), strict=True):
        if data is not None:
            store.put_object(key, data)
    backend = S3Backend("memory", store=store, shared_prefix="org")  # nothing cached: the bytes are read
    store.take()
    result = _run_derived(backend, operation, path, skill)
    shown = repr(result)
    case = f"{operation}({path!r}, {skill!r}) with manifest {ana_manifest[:80]!r}" if ana_manifest else operation
    mcp = operation.startswith("mcp_")
    for canary in DERIVED_CANARIES:
        if not (mcp and canary == "CANARY-A-UNLOADED"):  # MCP serves every enabled skill
            assert canary not in shown, f"{case} showed {canary}: {shown[:300]}"
    for op, key in store.take():
        if op != "GetObject.bytes":
            assert _derived_allowed(op, key, mcp=mcp), f"{case} sent {op} {key!r}"
