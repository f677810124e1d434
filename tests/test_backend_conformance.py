"""One conformance suite for `S3Backend`, run in every tenancy mode and both APIs.

Each test takes the `h` fixture (a `Harness`) and runs four times:

- `explicit`: `S3Backend(bucket, user_id="alice", thread_id=..., ticket_id="k1")`, called
  directly; skills are loaded on the instance with `load_skill`.
- `runtime`: `S3Backend(bucket)` with no ids, called from inside a LangGraph run whose
  context holds `user_id`/`ticket_id`, whose config holds `thread_id`, and whose state holds
  `loaded_skills` (where an agent's skill middleware keeps them);

each with the sync methods (`ls`, `read`, ...) and with the async ones (`als`, `aread`, ...).

Every combination runs on three stores: a moto server, `MemoryObjectStore` (the object-store
contract in memory) and LocalStack (marked `slow`, so `-m slow` runs that third). The skill
libraries and the tickets are read-only and seeded once per module. Each test's workspace
starts empty: the runtime mode gives every test a thread id of its own, and the explicit
mode's shared backend has its workspace emptied after each test.
"""

from __future__ import annotations

import asyncio
import base64
import io
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import pytest
from deepagents.backends.protocol import GrepResult, LsResult
from runs import ASYNC_RUN, SYNC_RUN, RunContext, RunState

from s3skills import S3Backend, SkillError, TenantError
from s3skills.layout import KeyLayout
from s3skills.testing import MemoryObjectStore, make_bucket, make_client, skill_md

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

SESSION = aioboto3.Session()  # one botocore session for the module: cheap clients

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"


LIBRARY: dict[str, bytes] = {
    # alice's library
    "alice/skills/pdf/SKILL.md": skill_md("pdf", body="# pdf\nFill forms with the needle tool.\n").encode(),
    "alice/skills/pdf/forms.md": b"# Forms\nneedle in forms\n",
    "alice/skills/pdf/reference/guide.md": b"guide needle\n",
    "alice/skills/legal/pdf/SKILL.md": skill_md("pdf", body="# pdf\nLegal PDFs.\n").encode(),
    "alice/skills/escrituras/compraventa/SKILL.md": skill_md(
        "compraventa", body="# compraventa\nContrato de compraventa.\n"
    ).encode(),
    "alice/skills/escrituras/compraventa/modelo.md": b"clausula needle\n",
    "alice/skills/escrituras/venta/SKILL.md": skill_md("venta", body="# venta\nVENTA-MARKER needle\n").encode(),
    "alice/skills/secret/SKILL.md": skill_md("secret", body="# secret\nUNLOADED-MARKER needle\n").encode(),
    "alice/skills/secret/notes.md": b"UNLOADED-MARKER needle\n",
    # the organisation's library: `pdf` is overridden by alice's copy
    "org/skills/pdf/SKILL.md": skill_md("pdf", body="# pdf\nORG-PDF-MARKER\n").encode(),
    "org/skills/shared-only/SKILL.md": skill_md("shared-only", body="# shared-only\nSHARED-MARKER needle\n").encode(),
    "org/skills/shared-only/extra.md": b"shared extra needle\n",
    # other tenants
    "bob/skills/pdf/SKILL.md": skill_md("pdf", body="# pdf\nBOB-MARKER needle\n").encode(),
    "bob/skills/pdf/forms.md": b"BOB-MARKER needle\n",
    "threads/other-thread/notes.md": b"OTHER-THREAD-MARKER needle\n",
    "tickets/k1/ticket.md": b"# Ticket\nneedle from the ticket\n",
    "tickets/k1/attachments/photo.png": PNG,
    "tickets/k2/ticket.md": b"OTHER-TICKET-MARKER needle\n",
}


# --- the run harness --------------------------------------------------------------------------


async def _await(aw: Awaitable[Any]) -> Any:
    return await aw


@dataclass
class Harness:
    """Runs backend methods in one tenancy mode with one API flavour."""

    backend: S3Backend
    mode: str  # "explicit" | "runtime"
    flavour: str  # "sync" | "async"
    s3: Any
    bucket: str
    user_id: str | None
    thread_id: str | None
    ticket_id: str | None
    state_skills: list[str] = field(default_factory=list)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """`backend.<name>(...)`, or `await backend.a<name>(...)`, in this harness's mode."""
        method = getattr(self.backend, name if self.flavour == "sync" else "a" + name)
        return self._run(lambda: method(*args, **kwargs))

    def _run(self, op: Callable[[], Any]) -> Any:
        if self.mode == "explicit":
            return op() if self.flavour == "sync" else asyncio.run(_await(op()))
        context: RunContext = {}
        if self.user_id is not None:
            context["user_id"] = self.user_id
        if self.ticket_id is not None:
            context["ticket_id"] = self.ticket_id
        config = {"configurable": {"thread_id": self.thread_id}} if self.thread_id else {}
        state: RunState = {"op": op, "loaded_skills": list(self.state_skills)}
        if self.flavour == "sync":
            out = SYNC_RUN.invoke(state, context=context, config=config)
        else:
            out = asyncio.run(ASYNC_RUN.ainvoke(state, context=context, config=config))
        return out["result"]

    def load_skill(self, skill_id: str) -> str:
        """Load a skill the way this mode does: on the instance, or into the run's state.

        In the runtime mode `load_skill` runs inside the run (so it checks the skill exists
        for this user and does not clash with the skills already in the state), and the id
        then moves to the state key `loaded_skills`, where an agent's middleware keeps it.
        """
        loaded = self.call("load_skill", skill_id)
        if self.mode == "runtime":
            self.backend.unload_skill(loaded)
            self.state_skills.append(loaded)
        return str(loaded)

    # Raw storage, for arranging and asserting.
    def put_workspace(self, files: dict[str, bytes | str]) -> None:
        for rel, data in files.items():
            body = data.encode() if isinstance(data, str) else data
            self.s3.put_object(Bucket=self.bucket, Key=f"threads/{self.thread_id}/{rel}", Body=body)

    def raw(self, key: str) -> bytes | None:
        try:
            return bytes(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except self.s3.exceptions.NoSuchKey:
            return None

    def keys(self, prefix: str) -> set[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"] for page in pages for o in page.get("Contents", [])}

    @property
    def ws(self) -> str:
        """The raw key prefix of this test's workspace."""
        return f"threads/{self.thread_id}/"


class MemoryS3:
    """The few boto3 client calls the harness arranges and inspects with, over a MemoryObjectStore."""

    class exceptions:
        NoSuchKey = KeyError

    def __init__(self, store: MemoryObjectStore) -> None:
        self.store = store

    def put_object(self, Bucket: str, Key: str, Body: bytes) -> None:
        self.store.put_object(Key, Body)

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        if Key not in self.store.keys():
            raise KeyError(Key)
        return {"Body": io.BytesIO(asyncio.run(self.store.aget(Key)).data)}

    def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> None:
        asyncio.run(self.store.adelete_many([o["Key"] for o in Delete["Objects"]]))

    def get_paginator(self, name: str) -> Any:
        store = self.store

        class Pages:
            def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, Any]]:
                return [{"Contents": [{"Key": k} for k in store.keys() if k.startswith(Prefix)]}]

        return Pages()


@dataclass
class Library:
    kind: str  # "moto", "memory" or "localstack"
    endpoint_url: str | None
    bucket: str
    s3: Any
    store: MemoryObjectStore | None = None

    def backend_options(self) -> dict[str, Any]:
        """How a backend reaches this library: its own S3 client, or the shared memory store."""
        if self.store is not None:
            return {"store": self.store}
        return {"endpoint_url": self.endpoint_url, "session": SESSION}


@pytest.fixture(
    scope="module",
    params=["moto", "memory", pytest.param("localstack", marks=(pytest.mark.localstack, pytest.mark.slow))],
)
def library(request: pytest.FixtureRequest) -> Library:
    """A bucket holding the read-only libraries and tickets, seeded once for the module: on the
    moto server, in a `MemoryObjectStore`, and on LocalStack (the same suite, every test, every store)."""
    if request.param == "memory":
        store = MemoryObjectStore("conformance")
        for key, body in LIBRARY.items():
            store.put_object(key, body)
        return Library("memory", None, store.bucket, MemoryS3(store), store)
    server = request.getfixturevalue("moto_server" if request.param == "moto" else "localstack_server")
    s3 = make_client(server.endpoint_url)
    bucket = make_bucket(server.endpoint_url, f"conformance-{uuid.uuid4().hex[:12]}")
    for key, body in LIBRARY.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    return Library(request.param, server.endpoint_url, bucket, s3)


HarnessFactory = Callable[..., Harness]


def _fresh_thread_id() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


COMBINATIONS = [("explicit", "sync"), ("explicit", "async"), ("runtime", "sync"), ("runtime", "async")]


@pytest.fixture(scope="module")
def shared_backends(library: Library) -> Iterator[dict[str, S3Backend]]:
    """The default backend of each mode, shared by the module's tests as an app would share it.

    `explicit`: alice, thread `t-explicit`, ticket k1 (each test's workspace is emptied and its
    skills unloaded afterwards). `runtime`: no ids at all, so one instance serves every test.
    """
    common = library.backend_options()
    backends = {
        "explicit": S3Backend(
            library.bucket, user_id="alice", thread_id="t-explicit", ticket_id="k1", **common, layout=SEEDS
        ),
        "runtime": S3Backend(library.bucket, **common, layout=SEEDS),
    }
    yield backends
    for backend in backends.values():
        backend.close()


@pytest.fixture(params=COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def make_harness(
    request: pytest.FixtureRequest, library: Library, shared_backends: dict[str, S3Backend]
) -> Iterator[HarnessFactory]:
    mode, flavour = request.param
    made: list[Harness] = []
    owned: list[S3Backend] = []

    def make(
        *,
        user_id: str | None = "alice",
        ticket_id: str | None = "k1",
        thread: bool = True,
        own: bool = False,
        **kwargs: Any,
    ) -> Harness:
        """A harness; `own=True` (or any backend option) builds a backend just for the test."""
        default = (user_id, ticket_id, thread, own, kwargs) == ("alice", "k1", True, False, {})
        if mode == "explicit" and default:
            backend, thread_id = shared_backends["explicit"], "t-explicit"
        elif mode == "runtime" and not own and not kwargs:
            backend, thread_id = shared_backends["runtime"], _fresh_thread_id() if thread else None
        else:
            thread_id = _fresh_thread_id() if thread else None
            ids = {"user_id": user_id, "thread_id": thread_id, "ticket_id": ticket_id} if mode == "explicit" else {}
            backend = S3Backend(library.bucket, **library.backend_options(), **ids, **kwargs, layout=SEEDS)
            owned.append(backend)
        harness = Harness(backend, mode, flavour, library.s3, library.bucket, user_id, thread_id, ticket_id)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        for skill in harness.backend.loaded_skills:
            harness.backend.unload_skill(skill)
        if harness.thread_id == "t-explicit":  # the only thread id that is reused
            stale = [{"Key": key} for key in harness.keys(harness.ws)]
            if stale:
                library.s3.delete_objects(Bucket=library.bucket, Delete={"Objects": stale})
    for backend in owned:
        backend.close()


@pytest.fixture
def h(make_harness: HarnessFactory) -> Harness:
    """alice, ticket k1, an empty workspace of its own, no skill loaded."""
    return make_harness()


def paths(result: Any) -> list[str]:
    """The paths of an ls/glob result (asserting it succeeded)."""
    assert result.error is None, result.error
    items = result.entries if isinstance(result, LsResult) else result.matches
    return sorted(item["path"] for item in items)


def grep_hits(result: GrepResult) -> list[tuple[str, int, str]]:
    assert result.error is None, result.error
    return sorted((m["path"], m["line"], m["text"]) for m in result.matches)


# --- ls -----------------------------------------------------------------------------------------


def test_ls_root_shows_workspace_and_ticket_and_skills_only_once_loaded(h: Harness) -> None:
    assert paths(h.call("ls", "/")) == ["/ticket/", "/workspace/"]
    h.load_skill("pdf")
    root = h.call("ls", "/")
    assert paths(root) == ["/skills/", "/ticket/", "/workspace/"]
    assert all(entry["is_dir"] for entry in root.entries)


def test_ls_root_without_ticket_has_no_ticket_mount(make_harness: HarnessFactory) -> None:
    h = make_harness(ticket_id=None)
    assert paths(h.call("ls", "/")) == ["/workspace/"]
    assert h.call("ls", "/ticket").error == "File '/ticket' not found"


def test_ls_workspace_lists_files_and_folders_one_level(h: Harness) -> None:
    h.put_workspace({"notes.md": "hello\n", "docs/a.md": "a", "docs/sub/b.md": "b"})
    result = h.call("ls", "/workspace")
    assert paths(result) == ["/workspace/docs/", "/workspace/notes.md"]
    by_path = {e["path"]: e for e in result.entries}
    assert by_path["/workspace/notes.md"]["is_dir"] is False
    assert by_path["/workspace/notes.md"]["size"] == 6
    assert by_path["/workspace/notes.md"]["modified_at"]
    assert by_path["/workspace/docs/"]["is_dir"] is True


def test_ls_nested_folder_with_or_without_trailing_slash(h: Harness) -> None:
    h.put_workspace({"docs/a.md": "a", "docs/sub/b.md": "b", "docs2/c.md": "c", "docs.md": "d"})
    expected = ["/workspace/docs/a.md", "/workspace/docs/sub/"]
    assert paths(h.call("ls", "/workspace/docs")) == expected
    assert paths(h.call("ls", "/workspace/docs/")) == expected
    assert paths(h.call("ls", "/workspace/docs/sub")) == ["/workspace/docs/sub/b.md"]


def test_ls_missing_folder_is_empty_like_an_object_store(h: Harness) -> None:
    # S3 has no folders: a prefix with nothing under it lists as empty (as StoreBackend does).
    assert h.call("ls", "/workspace/nothing/here").entries == []
    assert h.call("ls", "/workspace").entries == []


def test_ls_outside_the_mounts_is_not_found(h: Harness) -> None:
    assert h.call("ls", "/etc").error == "File '/etc' not found"
    assert h.call("ls", "/threads").error == "File '/threads' not found"


def test_ls_ticket_is_readable(h: Harness) -> None:
    assert paths(h.call("ls", "/ticket")) == ["/ticket/attachments/", "/ticket/ticket.md"]


def test_ls_skills_before_and_after_loading(h: Harness) -> None:
    assert h.call("ls", "/skills").error == "File '/skills' not found"
    assert h.call("ls", "/skills/pdf").error == "File '/skills/pdf' not found"
    h.load_skill("pdf")
    assert paths(h.call("ls", "/skills")) == ["/skills/pdf/"]
    assert paths(h.call("ls", "/skills/pdf")) == [
        "/skills/pdf/SKILL.md",
        "/skills/pdf/forms.md",
        "/skills/pdf/reference/",
    ]
    h.load_skill("escrituras/compraventa")
    assert paths(h.call("ls", "/skills")) == ["/skills/compraventa/", "/skills/pdf/"]
    assert paths(h.call("ls", "/skills/compraventa")) == [
        "/skills/compraventa/SKILL.md",
        "/skills/compraventa/modelo.md",
    ]


def test_ls_rejects_invalid_paths_in_error(h: Harness) -> None:
    for bad in ["workspace", "/workspace/../threads", "/workspace//x", "/workspace\\x"]:
        result = h.call("ls", bad)
        assert result.entries is None
        assert result.error.startswith(f"Invalid path {bad!r}")


# --- read ---------------------------------------------------------------------------------------

TEN_LINES = "".join(f"line{i}\n" for i in range(1, 11))


def test_read_whole_text_file(h: Harness) -> None:
    h.put_workspace({"notes.md": TEN_LINES})
    result = h.call("read", "/workspace/notes.md")
    assert result.error is None
    assert result.file_data["content"] == TEN_LINES
    assert result.file_data["encoding"] == "utf-8"
    assert (result.start_line, result.end_line, result.total_lines, result.next_offset) == (1, 10, 10, None)


def test_read_window_with_offset_and_limit(h: Harness) -> None:
    h.put_workspace({"notes.md": TEN_LINES})
    result = h.call("read", "/workspace/notes.md", offset=2, limit=3)
    assert result.file_data["content"] == "line3\nline4\nline5\n"
    assert (result.start_line, result.end_line, result.total_lines, result.next_offset) == (3, 5, 10, 5)
    tail = h.call("read", "/workspace/notes.md", offset=8, limit=50)
    assert tail.file_data["content"] == "line9\nline10\n"
    assert tail.next_offset is None


def test_read_offset_past_the_end_is_an_error(h: Harness) -> None:
    h.put_workspace({"notes.md": TEN_LINES})
    result = h.call("read", "/workspace/notes.md", offset=10)
    assert result.error == "Line offset 10 exceeds file length (10 lines)"
    assert result.file_data is None


def test_read_missing_file_message(h: Harness) -> None:
    for missing in ["/workspace/nope.md", "/nope.md", "/ticket/nope.md", "/workspace/docs/nope"]:
        assert h.call("read", missing).error == f"File '{missing}' not found"


def test_read_without_extension_retries_with_md(h: Harness) -> None:
    h.put_workspace({"readme.md": "from readme.md\n", "plain": "no extension\n"})
    assert h.call("read", "/workspace/readme").file_data["content"] == "from readme.md\n"
    assert h.call("read", "/workspace/plain").file_data["content"] == "no extension\n"
    h.load_skill("pdf")
    assert h.call("read", "/skills/pdf/forms").file_data["content"] == "# Forms\nneedle in forms\n"
    # Only paths without an extension are retried.
    assert h.call("read", "/workspace/readme.txt").error == "File '/workspace/readme.txt' not found"


@pytest.mark.parametrize(("name", "data"), [("photo.png", PNG), ("doc.pdf", PDF), ("clip.mp3", b"ID3\x03\x00")])
def test_read_images_pdf_and_media_come_back_as_base64(h: Harness, name: str, data: bytes) -> None:
    h.put_workspace({name: data})
    result = h.call("read", f"/workspace/{name}")
    assert result.error is None
    assert result.file_data["encoding"] == "base64"
    assert base64.b64decode(result.file_data["content"]) == data


def test_read_image_in_the_ticket(h: Harness) -> None:
    result = h.call("read", "/ticket/attachments/photo.png")
    assert base64.b64decode(result.file_data["content"]) == PNG


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("font.ttf", b"\x00\x01\x00\x00\x00\x0f\x00\x80\x00\x03\x00pGDEF"),
        ("bundle.zip", b"PK\x03\x04\x14\x00\x00\x00\x08\x00"),
        ("dump.txt", b"text then \x00 a NUL"),
        ("latin1.md", "caf\u00e9".encode("latin-1")),
    ],
)
def test_read_other_binary_files_is_an_error(h: Harness, name: str, data: bytes) -> None:
    h.put_workspace({name: data})
    result = h.call("read", f"/workspace/{name}")
    assert result.error == f"File '/workspace/{name}' is a binary file and cannot be read as text"
    assert result.file_data is None


def test_read_empty_file(h: Harness) -> None:
    h.put_workspace({"empty.md": b""})
    result = h.call("read", "/workspace/empty.md")
    assert result.error is None
    assert result.file_data["content"] == ""


def test_read_utf8_with_bom_and_non_ascii(h: Harness) -> None:
    h.put_workspace({"ñandú.md": "\ufeffcafé ñandú\n".encode()})
    assert h.call("read", "/workspace/ñandú.md").file_data["content"] == "café ñandú\n"


# --- write --------------------------------------------------------------------------------------


def test_write_creates_a_file(h: Harness) -> None:
    result = h.call("write", "/workspace/new/notes.md", "first\n")
    assert result.error is None
    assert result.path == "/workspace/new/notes.md"
    assert h.raw(h.ws + "new/notes.md") == b"first\n"
    assert h.call("read", "/workspace/new/notes.md").file_data["content"] == "first\n"


def test_write_overwrites_an_existing_file(h: Harness) -> None:
    h.call("write", "/workspace/notes.md", "first\n")
    result = h.call("write", "/workspace/notes.md", "second\n")
    assert result.error is None
    assert h.raw(h.ws + "notes.md") == b"second\n"


def test_write_to_skills_is_refused_as_read_only(h: Harness) -> None:
    h.load_skill("pdf")
    for target in ["/skills/pdf/new.md", "/skills/pdf/SKILL.md", "/skills/secret/new.md"]:
        result = h.call("write", target, "x")
        assert result.error == f"Error: Permission denied: '{target}' is read-only. Write your files under /workspace."
    assert h.raw("alice/skills/pdf/new.md") is None
    assert h.raw("alice/skills/pdf/SKILL.md") == LIBRARY["alice/skills/pdf/SKILL.md"]


def test_write_to_ticket_is_refused_as_read_only(h: Harness) -> None:
    result = h.call("write", "/ticket/ticket.md", "overwritten")
    assert result.error is not None
    assert "read-only" in result.error
    assert h.raw("tickets/k1/ticket.md") == LIBRARY["tickets/k1/ticket.md"]


@pytest.mark.parametrize("target", ["/etc/passwd", "/notes.md", "/threads/other-thread/notes.md", "/alice/x"])
def test_write_outside_the_mounts_is_refused(h: Harness, target: str) -> None:
    result = h.call("write", target, "x")
    assert result.error == f"Error: Cannot write '{target}': files can only be written under /workspace."
    assert h.raw("threads/other-thread/notes.md") == LIBRARY["threads/other-thread/notes.md"]


def test_write_to_a_mount_root_is_refused(h: Harness) -> None:
    assert (
        h.call("write", "/workspace", "x").error
        == "Error: Cannot write '/workspace': it is a folder; give a file name."
    )
    assert h.keys(h.ws) == set()


def test_write_rejects_invalid_paths(h: Harness) -> None:
    result = h.call("write", "/workspace/../../alice/skills/pdf/SKILL.md", "x")
    assert result.error.startswith("Error: Invalid path")
    assert h.raw("alice/skills/pdf/SKILL.md") == LIBRARY["alice/skills/pdf/SKILL.md"]


@pytest.mark.parametrize("folder", ["large_tool_results", "conversation_history"])
def test_deepagents_artifact_folders_live_in_the_thread(h: Harness, folder: str) -> None:
    result = h.call("write", f"/{folder}/x", "big output")
    assert result.error is None
    assert h.keys(h.ws) == {f"{h.ws}{folder}/x"}
    assert h.call("read", f"/{folder}/x").file_data["content"] == "big output"
    assert h.call("read", f"/workspace/{folder}/x").file_data["content"] == "big output"
    assert paths(h.call("ls", "/")) == ["/ticket/", "/workspace/"]  # not listed at the root


# --- edit ---------------------------------------------------------------------------------------


def test_edit_replaces_a_unique_string(h: Harness) -> None:
    h.put_workspace({"notes.md": "alpha beta gamma\n"})
    result = h.call("edit", "/workspace/notes.md", "beta", "BETA")
    assert result.error is None
    assert (result.path, result.occurrences) == ("/workspace/notes.md", 1)
    assert h.raw(h.ws + "notes.md") == b"alpha BETA gamma\n"


def test_edit_replace_all(h: Harness) -> None:
    h.put_workspace({"notes.md": "x-x-x\n"})
    result = h.call("edit", "/workspace/notes.md", "x", "why", replace_all=True)
    assert result.occurrences == 3
    assert h.raw(h.ws + "notes.md") == b"why-why-why\n"


def test_edit_string_not_found(h: Harness) -> None:
    h.put_workspace({"notes.md": "alpha\n"})
    result = h.call("edit", "/workspace/notes.md", "omega", "x")
    assert result.error == "Error: String not found in file: 'omega'"
    assert h.raw(h.ws + "notes.md") == b"alpha\n"


def test_edit_multiple_occurrences_without_replace_all(h: Harness) -> None:
    h.put_workspace({"notes.md": "dup dup\n"})
    result = h.call("edit", "/workspace/notes.md", "dup", "x")
    assert result.error is not None
    assert "appears 2 times" in result.error
    assert "replace_all=True" in result.error
    assert h.raw(h.ws + "notes.md") == b"dup dup\n"


def test_edit_reports_a_concurrent_change_instead_of_losing_it(make_harness: HarnessFactory) -> None:
    h = make_harness(own=True)  # the hook below stays on this backend
    h.put_workspace({"notes.md": "alpha beta\n"})
    changed: list[str] = []

    def change_between_get_and_put(params: dict[str, Any], model: Any = None, **_: Any) -> None:
        if getattr(model, "name", None) == "PutObject" and not changed:
            changed.append(params["Key"])
            h.s3.put_object(Bucket=h.bucket, Key=params["Key"], Body=b"alpha beta, changed by someone else\n")

    if isinstance(h.backend.store, MemoryObjectStore):
        key = h.ws + "notes.md"

        def change_before_the_put(operation: str) -> None:
            if operation == "PutObject" and not changed:
                change_between_get_and_put({"Key": key}, model=type("Model", (), {"name": "PutObject"})())

        h.backend.store.add_request_hook(change_before_the_put)
    else:
        h.backend.store.register_event("before-parameter-build.s3", change_between_get_and_put)
    result = h.call("edit", "/workspace/notes.md", "beta", "gamma")
    assert changed == [h.ws + "notes.md"]
    assert result.error is not None
    assert "was changed by someone else" in result.error
    assert h.raw(h.ws + "notes.md") == b"alpha beta, changed by someone else\n"


def test_edit_missing_file(h: Harness) -> None:
    result = h.call("edit", "/workspace/nope.md", "a", "b")
    assert result.error == "Error: File '/workspace/nope.md' not found"
    assert h.raw(h.ws + "nope.md") is None


def test_edit_read_only_mounts_are_refused(h: Harness) -> None:
    h.load_skill("pdf")
    assert "read-only" in h.call("edit", "/skills/pdf/forms.md", "needle", "pin").error
    assert "read-only" in h.call("edit", "/ticket/ticket.md", "needle", "pin").error
    assert h.raw("alice/skills/pdf/forms.md") == LIBRARY["alice/skills/pdf/forms.md"]
    assert h.raw("tickets/k1/ticket.md") == LIBRARY["tickets/k1/ticket.md"]


# --- delete -------------------------------------------------------------------------------------


def test_delete_a_file(h: Harness) -> None:
    h.put_workspace({"notes.md": "x", "keep.md": "y", "notes.md.bak": "z"})
    result = h.call("delete", "/workspace/notes.md")
    assert result.error is None
    assert result.path == "/workspace/notes.md"
    assert h.keys(h.ws) == {h.ws + "keep.md", h.ws + "notes.md.bak"}


def test_delete_a_folder_and_only_that_folder(h: Harness) -> None:
    h.put_workspace({"docs/a.md": "a", "docs/sub/b.md": "b", "docs2/c.md": "c", "docs.md": "d"})
    result = h.call("delete", "/workspace/docs")
    assert result.error is None
    assert h.keys(h.ws) == {h.ws + "docs2/c.md", h.ws + "docs.md"}


def test_delete_missing_path(h: Harness) -> None:
    assert h.call("delete", "/workspace/nope.md").error == "Error: File '/workspace/nope.md' not found"


def test_delete_read_only_and_outside_paths_are_refused(h: Harness) -> None:
    h.load_skill("pdf")
    assert "read-only" in h.call("delete", "/skills/pdf").error
    assert "read-only" in h.call("delete", "/ticket/ticket.md").error
    assert h.call("delete", "/threads/other-thread").error is not None
    assert h.call("delete", "/workspace").error is not None  # the mount itself
    assert h.keys("alice/skills/pdf/") == {k for k in LIBRARY if k.startswith("alice/skills/pdf/")}
    assert h.raw("tickets/k1/ticket.md") is not None
    assert h.raw("threads/other-thread/notes.md") is not None


# --- upload / download --------------------------------------------------------------------------


def test_upload_files_reports_each_file(h: Harness) -> None:
    h.load_skill("pdf")
    files = [
        ("/workspace/a.bin", b"\x00\x01binary"),
        ("/skills/pdf/evil.md", b"x"),
        ("/ticket/evil.md", b"x"),
        ("relative.md", b"x"),
        ("/workspace/../x", b"x"),
        ("/elsewhere/x.md", b"x"),
        ("/workspace/b.md", b"text"),
    ]
    responses = h.call("upload_files", files)
    assert [(r.path, r.error) for r in responses] == [
        ("/workspace/a.bin", None),
        ("/skills/pdf/evil.md", "permission_denied"),
        ("/ticket/evil.md", "permission_denied"),
        ("relative.md", "invalid_path"),
        ("/workspace/../x", "invalid_path"),
        ("/elsewhere/x.md", "invalid_path"),
        ("/workspace/b.md", None),
    ]
    assert h.keys(h.ws) == {h.ws + "a.bin", h.ws + "b.md"}
    assert h.raw(h.ws + "a.bin") == b"\x00\x01binary"
    assert h.raw("alice/skills/pdf/evil.md") is None


def test_download_files_reports_each_file(h: Harness) -> None:
    h.put_workspace({"a.bin": b"\x00\xffbytes"})
    h.load_skill("pdf")
    requested = [
        "/workspace/a.bin",
        "/workspace/missing.md",
        "/skills/pdf/SKILL.md",
        "/ticket/attachments/photo.png",
        "../etc/passwd",
        "/workspace/a\x00b",
        "/workspace",
        "/skills",
        "/",
    ]
    responses = h.call("download_files", requested)
    assert [(r.path, r.content, r.error) for r in responses] == [
        ("/workspace/a.bin", b"\x00\xffbytes", None),
        ("/workspace/missing.md", None, "file_not_found"),
        ("/skills/pdf/SKILL.md", LIBRARY["alice/skills/pdf/SKILL.md"], None),
        ("/ticket/attachments/photo.png", PNG, None),
        ("../etc/passwd", None, "invalid_path"),
        ("/workspace/a\x00b", None, "invalid_path"),
        ("/workspace", None, "is_directory"),
        ("/skills", None, "is_directory"),
        ("/", None, "is_directory"),
    ]


# --- grep ---------------------------------------------------------------------------------------


def test_grep_is_literal_not_regex(h: Harness) -> None:
    h.put_workspace({"a.md": "a.c here\nabc there\n(x+ literal\n"})
    assert grep_hits(h.call("grep", "a.c", path="/workspace")) == [("/workspace/a.md", 1, "a.c here")]
    assert grep_hits(h.call("grep", "(x+", path="/workspace")) == [("/workspace/a.md", 3, "(x+ literal")]


def test_grep_glob_filter(h: Harness) -> None:
    h.put_workspace({"a.md": "needle\n", "b.txt": "needle\n", "docs/c.md": "needle\n", "docs/d.py": "needle\n"})
    hits = grep_hits(h.call("grep", "needle", path="/workspace", glob="*.md"))
    assert [p for p, _, _ in hits] == ["/workspace/a.md", "/workspace/docs/c.md"]
    hits = grep_hits(h.call("grep", "needle", path="/workspace", glob="docs/*"))
    assert [p for p, _, _ in hits] == ["/workspace/docs/c.md", "/workspace/docs/d.py"]


def test_grep_path_filter_matches_whole_folders(h: Harness) -> None:
    h.put_workspace({"docs/a.md": "needle\n", "docs2/b.md": "needle\n", "docs.md": "needle\n", "x.md": "needle\n"})
    hits = grep_hits(h.call("grep", "needle", path="/workspace/docs"))
    assert hits == [("/workspace/docs/a.md", 1, "needle")]
    hits = grep_hits(h.call("grep", "needle", path="/workspace/docs.md"))
    assert hits == [("/workspace/docs.md", 1, "needle")]


def test_grep_max_count_truncates(h: Harness) -> None:
    h.put_workspace({"a.md": "needle 1\nneedle 2\nneedle 3\n", "b.md": "needle 4\nneedle 5\n"})
    result = h.call("grep", "needle", path="/workspace", max_count=2)
    assert result.truncated is True
    assert len(result.matches) == 2
    full = h.call("grep", "needle", path="/workspace", max_count=10)
    assert len(full.matches) == 5
    assert not full.truncated


def test_grep_skips_binary_files(h: Harness) -> None:
    h.put_workspace(
        {
            "photo.png": PNG + b"needle",
            "doc.pdf": PDF + b"needle",
            "dump.txt": b"needle\x00binary",
            "font.ttf": b"\x00\x01needle",
            "text.md": "needle\n",
        }
    )
    result = h.call("grep", "needle", path="/workspace")
    assert grep_hits(result) == [("/workspace/text.md", 1, "needle")]


def test_grep_from_root_covers_only_the_visible_mounts(h: Harness) -> None:
    h.put_workspace({"mine.md": "needle mine\n"})
    h.load_skill("pdf")
    # Every seeded file holds "needle": other threads, tickets, users, unloaded skills and the
    # shared library too, so this set also shows that none of them was searched.
    files = {p for p, _, _ in grep_hits(h.call("grep", "needle", path="/"))}
    assert files == {
        "/workspace/mine.md",
        "/ticket/ticket.md",
        "/skills/pdf/SKILL.md",
        "/skills/pdf/forms.md",
        "/skills/pdf/reference/guide.md",
    }


def test_grep_default_path_is_the_root(h: Harness) -> None:
    h.put_workspace({"mine.md": "needle mine\n"})
    assert grep_hits(h.call("grep", "needle mine")) == [("/workspace/mine.md", 1, "needle mine")]


def test_grep_missing_path_and_invalid_path(h: Harness) -> None:
    assert h.call("grep", "x", path="/nowhere").error == "File '/nowhere' not found"
    assert h.call("grep", "x", path="/workspace/../x").error.startswith("Invalid path")


# --- glob ---------------------------------------------------------------------------------------


@pytest.fixture
def tree(h: Harness) -> Harness:
    h.put_workspace({"a.md": "a", "b.txt": "b", "docs/c.md": "c", "docs/sub/d.md": "d", ".hidden/e.md": "e"})
    return h


def test_glob_pattern_without_slash_matches_names_at_any_depth(tree: Harness) -> None:
    assert paths(tree.call("glob", "*.md", path="/workspace")) == [
        "/workspace/.hidden/e.md",
        "/workspace/a.md",
        "/workspace/docs/c.md",
        "/workspace/docs/sub/d.md",
    ]


def test_glob_pattern_with_slash_is_relative_to_the_path(tree: Harness) -> None:
    assert paths(tree.call("glob", "docs/*.md", path="/workspace")) == ["/workspace/docs/c.md"]
    assert paths(tree.call("glob", "*.md", path="/workspace/docs/sub")) == ["/workspace/docs/sub/d.md"]


def test_glob_double_star(tree: Harness) -> None:
    assert paths(tree.call("glob", "**/*.md", path="/workspace")) == [
        "/workspace/a.md",
        "/workspace/docs/c.md",
        "/workspace/docs/sub/d.md",
    ]
    assert paths(tree.call("glob", "docs/**", path="/workspace")) == [
        "/workspace/docs/c.md",
        "/workspace/docs/sub/d.md",
    ]


def test_glob_from_root_covers_only_the_visible_mounts(tree: Harness) -> None:
    tree.load_skill("pdf")
    assert paths(tree.call("glob", "*.md")) == [
        "/skills/pdf/SKILL.md",
        "/skills/pdf/forms.md",
        "/skills/pdf/reference/guide.md",
        "/ticket/ticket.md",
        "/workspace/.hidden/e.md",
        "/workspace/a.md",
        "/workspace/docs/c.md",
        "/workspace/docs/sub/d.md",
    ]
    assert paths(tree.call("glob", "workspace/*.txt", path="/")) == ["/workspace/b.txt"]


def test_glob_entries_are_files_with_sizes(tree: Harness) -> None:
    result = tree.call("glob", "a.md", path="/workspace")
    assert [(e["path"], e["is_dir"], e["size"]) for e in result.matches] == [("/workspace/a.md", False, 1)]


# --- skill gating -------------------------------------------------------------------------------


def _probe(h: Harness, leaf: str) -> list[str]:
    """What an agent sees when it looks at `/skills/<leaf>`, with the name taken out."""
    base = f"/skills/{leaf}"
    results: list[Any] = [
        h.call("ls", base),
        h.call("read", f"{base}/SKILL.md"),
        h.call("read", f"{base}/notes"),
        h.call("grep", "needle", path=base),
        h.call("glob", "*", path=base),
        h.call("download_files", [f"{base}/SKILL.md"]),
        h.call("exists", base),
    ]
    return [repr(r).replace(leaf, "<leaf>") for r in results]


def test_an_unloaded_skill_is_indistinguishable_from_a_missing_one(h: Harness) -> None:
    # `secret` exists in alice's library; `no-such-skill` does not exist anywhere.
    assert _probe(h, "secret") == _probe(h, "no-such-skill")
    h.load_skill("pdf")
    assert _probe(h, "secret") == _probe(h, "no-such-skill")
    assert h.call("read", "/skills/secret/SKILL.md").error == "File '/skills/secret/SKILL.md' not found"
    assert h.call("download_files", ["/skills/secret/SKILL.md"])[0].error == "file_not_found"
    # Searches from the root do not reach it either.
    assert h.call("grep", "UNLOADED-MARKER", path="/").matches == []
    assert paths(h.call("glob", "**/SKILL.md", path="/")) == ["/skills/pdf/SKILL.md"]


def test_skill_leaf_matches_whole_segments_only(h: Harness) -> None:
    h.load_skill("escrituras/compraventa")
    assert "compraventa" in h.call("read", "/skills/compraventa/SKILL.md").file_data["content"]
    for near in ["/skills/venta", "/skills/compra", "/skills/compraventa2", "/skills/escrituras"]:
        assert h.call("read", f"{near}/SKILL.md").error == f"File '{near}/SKILL.md' not found"
        assert h.call("ls", near).error == f"File '{near}' not found"
    assert h.call("grep", "VENTA-MARKER", path="/").matches == []


def test_loading_a_second_skill_with_the_same_leaf_fails_clearly(h: Harness) -> None:
    assert h.load_skill("pdf") == "pdf"
    with pytest.raises(SkillError, match=r"'legal/pdf'.*'pdf' already appears as /skills/pdf"):
        h.load_skill("legal/pdf")
    assert "Fill forms" in h.call("read", "/skills/pdf/SKILL.md").file_data["content"]


def test_loading_an_unknown_skill_fails(h: Harness) -> None:
    with pytest.raises(SkillError, match="no-such-skill"):
        h.load_skill("no-such-skill")
    assert h.call("ls", "/skills").error == "File '/skills' not found"


def test_shared_library_with_user_override(make_harness: HarnessFactory) -> None:
    h = make_harness(shared_prefix="org")
    h.load_skill("shared-only")
    h.load_skill("pdf")
    assert "SHARED-MARKER" in h.call("read", "/skills/shared-only/SKILL.md").file_data["content"]
    assert paths(h.call("ls", "/skills/shared-only")) == [
        "/skills/shared-only/SKILL.md",
        "/skills/shared-only/extra.md",
    ]
    pdf = h.call("read", "/skills/pdf/SKILL.md").file_data["content"]
    assert "Fill forms" in pdf  # alice's copy wins over org's
    assert "ORG-PDF-MARKER" not in pdf
    assert h.call("grep", "ORG-PDF-MARKER", path="/").matches == []


def test_without_a_shared_library_its_skills_do_not_exist(h: Harness) -> None:
    with pytest.raises(SkillError):
        h.load_skill("shared-only")


def test_missing_user_id_is_reported_not_raised(make_harness: HarnessFactory) -> None:
    h = make_harness(user_id=None)
    with pytest.raises(TenantError, match="No user id"):
        h.load_skill("pdf")
    # The workspace still works, and /skills operations answer with an error value.
    assert h.call("write", "/workspace/a.md", "a").error is None
    assert h.call("ls", "/skills").error is not None
    assert h.call("read", "/skills/pdf/SKILL.md").error is not None
    assert h.call("download_files", ["/skills/pdf/SKILL.md"])[0].error is not None


def test_missing_user_id_with_skills_in_the_run_state_is_a_clear_error(library: Library) -> None:
    # Inside an agent the loaded skills come from the state; the user id may still be missing.
    backend = S3Backend(library.bucket, **library.backend_options(), layout=SEEDS)
    try:
        h = Harness(backend, "runtime", "sync", library.s3, library.bucket, None, "t-no-user", "k1", ["pdf"])
        for result in [
            h.call("ls", "/skills/pdf"),
            h.call("read", "/skills/pdf/SKILL.md"),
            h.call("grep", "needle", path="/skills/pdf"),
            h.call("glob", "*", path="/skills/pdf"),
        ]:
            assert result.error is not None
            assert "No user id" in result.error
        download = h.call("download_files", ["/skills/pdf/SKILL.md"])[0]
        assert download.content is None
        assert download.error is not None
    finally:
        backend.close()


# --- seed aliases -------------------------------------------------------------------------------


def test_seed_aliases(h: Harness) -> None:
    h.put_workspace({"notes.md": "needle\n", "docs/a.md": "x"})
    assert sorted(e["path"] for e in h.call("ls_info", "/workspace")) == ["/workspace/docs/", "/workspace/notes.md"]
    assert h.call("ls_info", "/nowhere") == []
    raw = h.call("grep_raw", "needle", "/workspace")
    assert [(m["path"], m["line"]) for m in raw] == [("/workspace/notes.md", 1)]
    assert h.call("grep_raw", "needle", "/workspace/../x").startswith("Invalid path")
    assert [e["path"] for e in h.call("glob_info", "*.md", "/workspace/docs")] == ["/workspace/docs/a.md"]
    assert h.call("glob_info", "*.md", "/nowhere") == []


def test_exists(h: Harness) -> None:
    h.put_workspace({"notes.md": "x", "docs/a.md": "y"})
    h.load_skill("pdf")
    for path, expected in [
        ("/", True),
        ("/workspace", True),
        ("/workspace/notes.md", True),
        ("/workspace/docs", True),
        ("/workspace/docs/", True),
        ("/workspace/nope.md", False),
        ("/workspace/doc", False),  # a string prefix of a folder is not a folder
        ("/ticket/ticket.md", True),
        ("/skills/pdf", True),
        ("/skills/pdf/SKILL.md", True),
        ("/skills/secret/SKILL.md", False),
        ("/threads/other-thread/notes.md", False),
        ("../etc/passwd", False),
    ]:
        assert h.call("exists", path) is expected, path
