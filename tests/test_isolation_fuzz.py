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

The second half (issue 22) also generates the thread's state (`thread_states()`: random and
hostile `loaded_skills`, `current_skill`, `skill_versions`, with other tenants' real ETags and
VersionIds) on a versioned bucket, and adds the system prompt as an operation.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keylog import KeyLogStore
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from runs import ASYNC_RUN, SYNC_RUN

from s3skills import S3Backend
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.middleware.skills_prompt import merge_loaded_skills, merge_skill_versions
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


def sync_ops(backend: S3Backend) -> dict[str, SyncOp]:
    """Every sync protocol operation of `backend`, as `op(path, pattern)`."""
    return {
        "ls": lambda p, g: backend.ls(p),
        "read": lambda p, g: backend.read(p),
        "read_window": lambda p, g: backend.read(p, offset=1, limit=3),
        "grep": lambda p, g: backend.grep("alpha", path=p or None, glob=g or None),
        "grep_pattern": lambda p, g: backend.grep(g or "a", path="/"),
        "glob": lambda p, g: backend.glob(g, path=p or "/"),
        "write": lambda p, g: backend.write(p, "written"),
        "edit": lambda p, g: backend.edit(p, "alpha", "alpha", replace_all=True),
        "delete": lambda p, g: backend.delete(p),
        "upload": lambda p, g: backend.upload_files([(p, b"uploaded")]),
        "download": lambda p, g: backend.download_files([p]),
        "exists": lambda p, g: backend.exists(p),
    }


def async_ops(backend: S3Backend) -> dict[str, Callable[[str, str], Any]]:
    """Every async protocol operation of `backend`, as `op(path, pattern)` (a coroutine)."""
    return {
        "als": lambda p, g: backend.als(p),
        "aread": lambda p, g: backend.aread(p),
        "agrep": lambda p, g: backend.agrep("alpha", path=p or None, glob=g or None),
        "aglob": lambda p, g: backend.aglob(g, path=p or "/"),
        "awrite": lambda p, g: backend.awrite(p, "written"),
        "aedit": lambda p, g: backend.aedit(p, "alpha", "alpha"),
        "adelete": lambda p, g: backend.adelete(p),
        "aupload": lambda p, g: backend.aupload_files([(p, b"uploaded")]),
        "adownload": lambda p, g: backend.adownload_files([p]),
        "aexists": lambda p, g: backend.aexists(p),
    }


SYNC_OPS = sync_ops(BACKEND)
ASYNC_OPS = async_ops(BACKEND)
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


@pytest.mark.slow  # 2,000 examples through every operation: a long hypothesis run
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


# --- generated graph state (issue 22) ------------------------------------------------------------
#
# Graph state is client input. The same tenant and operations, now with GENERATED
# `loaded_skills`, `current_skill` and `skill_versions`: random and hostile values, written
# through the reducers or straight into the channels (`{"__overwrite__": ...}`, as
# `threads.update_state` can), with pins built from the real ETags and VersionIds of every
# object in a versioned bucket (bob's, the disabled skills', other threads', older versions).
# One more operation, `prompt`, builds `SkillsPromptMiddleware`'s system prompt from that state.
#
# Some files have an older version whose bytes carry an `OLD-*` marker: it may show only when
# the generated state holds that version's exact (ETag, VersionId) pair (a pin naming a real
# version of a skill ana may read). The state may load any of ana's own enabled skills (she
# could load them with cargar_habilidad), so `CANARY-A-UNLOADED` is not a canary here; bob's,
# other threads', other tickets' and disabled skills' bytes are. `thread_states()` is a plain
# strategy of state values, to compose with other generators (e.g. hostile derived files).

STATE_CANARIES = tuple(c for c in CANARIES if c != "CANARY-A-UNLOADED")
OLDER_VERSIONS: dict[str, bytes] = {  # written first, then overwritten by FILES
    "users/ana/skills/pdf/SKILL.md": _md("pdf", "PDF forms.", "OLD-ANA-PDF-BODY"),
    "users/ana/skills/pdf/forms.md": b"OLD-ANA-PDF-FORMS",
    "shared/org/skills/house/SKILL.md": _md("house", "House style.", "OLD-HOUSE-BODY"),
    "users/bob/skills/pdf/forms.md": b"CANARY-B-LIB old",
    "users/ana/skills/off/ref.md": b"CANARY-A-DISABLED old",
}
OLD_MARKERS = {"OLD-ANA-PDF-BODY": 0, "OLD-ANA-PDF-FORMS": 1, "OLD-HOUSE-BODY": 2}  # index in OLDER_VERSIONS


def _versioned_store() -> tuple[KeyLogStore, list[tuple[str, str, str]]]:
    """The fuzz bucket with versioning on and older versions; every (key, ETag, VersionId)."""
    store = KeyLogStore()
    asyncio.run(store.aput_versioning(True))
    for files in (OLDER_VERSIONS, FILES):
        for key, body in files.items():
            store.put_object(key, body)
    versions = asyncio.run(store.alist_versions(""))
    return store, [(v.key, v.etag, v.version_id) for v in versions if v.version_id]


STATE_STORE, ALL_VERSIONS = _versioned_store()
STATE_BACKEND = S3Backend("memory", store=STATE_STORE, shared_prefix="org")
STATE_PROMPT = SkillsPromptMiddleware(STATE_BACKEND)
STATE_SYNC_OPS = sync_ops(STATE_BACKEND)
STATE_ASYNC_OPS = async_ops(STATE_BACKEND)
STATE_OPERATIONS = [*STATE_SYNC_OPS, *STATE_ASYNC_OPS, *TOOL_OPS, "prompt"]


def _old_pair(marker: str) -> tuple[str, str]:
    """The (ETag, VersionId) of the older version holding `marker`."""
    key, body = list(OLDER_VERSIONS.items())[OLD_MARKERS[marker]]
    etag = hashlib.md5(body, usedforsecurity=False).hexdigest()
    return next((e, v) for k, e, v in ALL_VERSIONS if k == key and e == etag)


class FuzzState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    loaded_skills: Annotated[list[str], merge_loaded_skills]
    current_skill: Any
    skill_versions: Annotated[dict[str, Any], merge_skill_versions]
    op: Any
    result: Any


async def _run_op(state: FuzzState) -> dict[str, Any]:
    return {"result": await state["op"](state)}


def _state_graph() -> Any:
    graph = StateGraph(FuzzState)
    graph.add_node("op", _run_op)
    graph.add_node("tools", ToolNode(skill_tools(STATE_BACKEND)))
    graph.add_conditional_edges(START, lambda s: "tools" if s.get("messages") else "op", ["op", "tools"])
    graph.add_edge("op", END)
    graph.add_edge("tools", END)
    return graph.compile()


STATE_RUN = _state_graph()

STATE_IDS = [*HOSTILE_SKILLS, "escrituras/compraventa", "../../x", "a/b/c", "", "/pdf/", " pdf", "x\x00"]
PIN_PATHS = ["SKILL.md", "forms.md", "refs/a.md", "ref.md", "private.md", "../SKILL.md", "a//b", "", "scripts/go.py"]
ETAGS = [*sorted({e for _, e, _ in ALL_VERSIONS}), "", "x" * 300]
VERSION_IDS = [*sorted({v for _, _, v in ALL_VERSIONS}), "null", ""]
JUNK = st.one_of(st.none(), st.integers(), st.text(max_size=8), st.lists(st.integers(), max_size=2))


def pins() -> st.SearchStrategy[Any]:
    """A `skill_versions` entry: mostly well-formed from the bucket's real ETags/VersionIds, else junk."""
    pinned_file = st.fixed_dictionaries(
        {"etag": st.sampled_from(ETAGS)}, optional={"version_id": st.sampled_from(VERSION_IDS) | JUNK}
    )
    files = st.dictionaries(st.sampled_from(PIN_PATHS), pinned_file, max_size=4)
    return st.fixed_dictionaries({"version": st.text(min_size=1, max_size=12), "files": files}) | JUNK


def thread_states() -> st.SearchStrategy[dict[str, Any]]:
    """Values of the three skills keys (each may be absent), through the reducers or as `__overwrite__`."""
    ids = st.sampled_from(STATE_IDS) | SKILL_NAMES
    loaded = st.lists(ids, max_size=5) | st.sampled_from(["notalist", "pdf"]) | JUNK | st.dictionaries(ids, JUNK)
    versions = st.dictionaries(ids, pins(), max_size=4) | st.just("notadict") | JUNK

    def raw_or_overwrite(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return values | values.map(lambda v: {"__overwrite__": v})

    return st.fixed_dictionaries(
        {},
        optional={
            "loaded_skills": raw_or_overwrite(loaded),
            "current_skill": ids | JUNK,
            "skill_versions": raw_or_overwrite(versions),
        },
    )


def state_allowed(operation: str, key: str) -> bool:
    """`allowed`, except that the state may load any of ana's enabled skills (so read their files)."""
    if operation in ("GetObject", "HeadObject") and key.startswith(ENABLED_SKILL_FOLDERS):
        return key not in DISABLED_SKILL_MD
    return allowed(operation, key)


def _pairs(value: Any) -> set[tuple[str, str]]:
    """Every (etag, version_id) pair of strings anywhere in a generated state value."""
    found: set[tuple[str, str]] = set()
    if isinstance(value, dict):
        etag, version_id = value.get("etag"), value.get("version_id")
        if isinstance(etag, str) and isinstance(version_id, str):
            found.add((etag, version_id))
        for item in value.values():
            found |= _pairs(item)
    elif isinstance(value, list):
        for item in value:
            found |= _pairs(item)
    return found


def run_with_state(operation: str, path: str, pattern: str, skill: str, state: dict[str, Any]) -> Any:
    """One operation in a LangGraph run whose state starts as `state`."""
    if operation in TOOL_OPS:
        call = {"name": operation, "args": _tool_args(operation, skill, pattern), "id": "c1", "type": "tool_call"}
        start = {"messages": [AIMessage(content="", tool_calls=[call])], **state}
        out = STATE_RUN.invoke(start, context=CONTEXT, config=CONFIG)
        return [m.content for m in out["messages"] if isinstance(m, ToolMessage)]

    async def op(current: FuzzState) -> Any:
        if operation == "prompt":
            return await STATE_PROMPT.build_prompt(current)
        if operation in STATE_ASYNC_OPS:
            return await STATE_ASYNC_OPS[operation](path, pattern)
        return await asyncio.to_thread(STATE_SYNC_OPS[operation], path, pattern)

    return asyncio.run(STATE_RUN.ainvoke({"op": op, **state}, context=CONTEXT, config=CONFIG))["result"]


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    operation=st.sampled_from(STATE_OPERATIONS),
    path=PATHS,
    pattern=GLOBS,
    skill=SKILL_NAMES,
    state=thread_states(),
)
def test_generated_state_never_raises_nor_shows_another_tenant_or_a_hidden_skill(
    operation: str, path: str, pattern: str, skill: str, state: dict[str, Any]
) -> None:
    STATE_STORE.take()
    result = run_with_state(operation, path, pattern, skill, state)
    what = f"{operation}({path!r}, {pattern!r}, {skill!r}) with {state!r}"
    for op, key in STATE_STORE.take():
        assert op == "GetObject.bytes" or state_allowed(op, key), f"{what} sent {op} {key!r}"
    shown = repr(result)
    for canary in STATE_CANARIES:
        assert canary not in shown, f"{what} showed {canary}: {shown[:300]}"
    pairs = _pairs(state)
    for marker in OLD_MARKERS:
        if marker in shown:
            assert _old_pair(marker) in pairs, f"{what} showed {marker} without its version's own pin"


def test_a_generated_state_does_reach_pinned_versions_and_the_prompt() -> None:
    # Guards the property above against states that silently change nothing.
    etag, version_id = _old_pair("OLD-ANA-PDF-BODY")
    forms_etag, forms_version = _old_pair("OLD-ANA-PDF-FORMS")
    pin = {"version": "old", "files": {"SKILL.md": {"etag": etag, "version_id": version_id}}}
    pin["files"]["forms.md"] = {"etag": forms_etag, "version_id": forms_version}
    state = {"loaded_skills": ["pdf"], "current_skill": "pdf", "skill_versions": {"pdf": pin}}
    prompt = run_with_state("prompt", "", "", "", state)
    assert "OLD-ANA-PDF-BODY" in prompt
    assert "OLD-ANA-PDF-FORMS" in run_with_state("aread", "/skills/pdf/forms.md", "", "", state).file_data["content"]

    # The same VersionId under another real ETag (bob's SKILL.md) is refused.
    bobs = next(e for k, e, _ in ALL_VERSIONS if k == "users/bob/skills/pdf/SKILL.md")
    forged = {"pdf": {"version": "x", "files": {"SKILL.md": {"etag": bobs, "version_id": version_id}}}}
    shown = run_with_state("prompt", "", "", "", {**state, "skill_versions": {"__overwrite__": forged}})
    assert "OLD-ANA-PDF-BODY" not in shown
    assert "CANARY-B-LIB" not in shown
    assert "reload it with cargar_habilidad" in shown

    # Hostile values leave a working run: nothing loaded, no current skill, the index shown.
    for hostile in ({"loaded_skills": "notalist"}, {"loaded_skills": {"__overwrite__": ["../../x", "a/b/c", ""]}}):
        prompt = run_with_state("prompt", "", "", "", {**hostile, "current_skill": "pdf"})
        assert "### Loaded skills" not in prompt
        assert "### Current skill" not in prompt
        assert "pdf" in prompt


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
from s3skills.skills.index.digests import BOOK_SCHEMA, book_key  # noqa: E402
from s3skills.skills.index.manifest import MANIFEST_SCHEMA  # noqa: E402

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
