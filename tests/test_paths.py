"""The path boundary: `VPath.parse`, `check_identity`, and tenant confinement of every key.

Table tests pin what the parser accepts and rejects. Hypothesis properties then drive the
whole backend with arbitrary strings against a real moto server and record every key and
prefix the S3 client is asked for: each one must lie inside the tenant's prefixes, and a
path the parser rejects must touch nothing and come back as an error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

import aioboto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph

from s3skills import InvalidPath, S3Backend, VPath
from s3skills.layout import KeyLayout
from s3skills.paths import MAX_SEGMENT_BYTES, check_identity
from s3skills.storage import S3ObjectStore as ObjectStore

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

# One botocore session for every backend of this module: building one per backend
# reloads the service model and costs more than the tests themselves.
SESSION = aioboto3.Session()

# --- VPath.parse: table tests ---------------------------------------------------------------

ACCEPTED = [
    ("/", ()),
    ("/workspace", ("workspace",)),
    ("/workspace/notes/a.md", ("workspace", "notes", "a.md")),
    ("/skills/pdf/forms", ("skills", "pdf", "forms")),
    ("/workspace/.hidden", ("workspace", ".hidden")),
    ("/workspace/...", ("workspace", "...")),
    ("/workspace/a..b", ("workspace", "a..b")),
    ("/workspace/%2e%2e", ("workspace", "%2e%2e")),  # a literal name, never decoded
    ("/workspace/with space.md", ("workspace", "with space.md")),
    ("/workspace/ñandú/café.md", ("workspace", "ñandú", "café.md")),
    ("/workspace/日本語.txt", ("workspace", "日本語.txt")),
    ("/workspace/emoji-🎉.md", ("workspace", "emoji-🎉.md")),
    ("/workspace/" + "a" * MAX_SEGMENT_BYTES, ("workspace", "a" * MAX_SEGMENT_BYTES)),
]

TRAILING_SLASH = [
    ("/workspace/", "/workspace"),
    ("/workspace/notes/", "/workspace/notes"),
    ("/skills/pdf/", "/skills/pdf"),
]

REJECTED = [
    ("", "empty"),
    ("workspace/a.md", "absolute"),
    ("a.md", "absolute"),
    ("./a.md", "absolute"),
    ("../a.md", "absolute"),
    ("/..", "'..'"),
    ("/.", "'.'"),
    ("/workspace/..", "'..'"),
    ("/workspace/../alice/skills/x", "'..'"),
    ("/workspace/./a.md", "'.'"),
    ("/workspace/a/../../b", "'..'"),
    ("/workspace//a.md", "empty path segments"),
    ("//workspace", "empty path segments"),
    ("///", "empty path segments"),
    ("/workspace/a//", "empty path segments"),
    ("/workspace\\a.md", "backslashes"),
    ("\\workspace\\a.md", "backslashes"),
    ("/workspace/..\\..\\x", "backslashes"),
    ("/workspace/a\x00b", "control characters"),
    ("/workspace/a\x01", "control characters"),
    ("/workspace/a\tb", "control characters"),
    ("/workspace/a\nb", "control characters"),
    ("/workspace/a\rb", "control characters"),
    ("/workspace/\x1b[31m", "control characters"),
    ("/workspace/a\x7f", "control characters"),  # DEL
    ("/workspace/a\x85", "control characters"),  # NEL (C1)
    ("/workspace/a\u2028b", "control characters"),  # line separator
    ("/workspace/a\u2029b", "control characters"),  # paragraph separator
    ("/workspace/a\u202eb", "control characters"),  # right-to-left override
    ("/workspace/a\u200bb", "control characters"),  # zero-width space
    ("/workspace/\ufeffa", "control characters"),  # byte-order mark
    ("/workspace/" + "a" * (MAX_SEGMENT_BYTES + 1), "longer than"),
    ("/workspace/" + "é" * 128, "longer than"),  # 256 UTF-8 bytes, 128 characters
    ("/workspace" + "/abcdefgh" * 120, "longer than"),  # short segments, too long a key
]


@pytest.mark.parametrize(("raw", "parts"), ACCEPTED)
def test_parse_accepts_clean_absolute_paths(raw: str, parts: tuple[str, ...]) -> None:
    path = VPath.parse(raw)
    assert path.parts == parts
    assert str(path) == raw


@pytest.mark.parametrize(("raw", "normalised"), TRAILING_SLASH)
def test_parse_drops_one_trailing_slash(raw: str, normalised: str) -> None:
    assert str(VPath.parse(raw)) == normalised
    assert VPath.parse(raw) == VPath.parse(normalised)


@pytest.mark.parametrize(("raw", "why"), REJECTED)
def test_parse_rejects_unsafe_or_malformed_paths(raw: str, why: str) -> None:
    with pytest.raises(InvalidPath, match=why):
        VPath.parse(raw)


@pytest.mark.parametrize("raw", [None, b"/workspace", 7, ["/workspace"], VPath(("workspace",))])
def test_parse_rejects_non_strings(raw: object) -> None:
    with pytest.raises(InvalidPath, match="expected a string"):
        VPath.parse(raw)


def test_parse_error_message_shortens_huge_inputs() -> None:
    with pytest.raises(InvalidPath) as info:
        VPath.parse("relative" * 500)
    assert len(str(info.value)) < 200


def test_parse_rejects_double_slash_root() -> None:
    with pytest.raises(InvalidPath, match="empty path segments"):
        VPath.parse("//")


def test_path_accessors() -> None:
    path = VPath.parse("/workspace/notes/a.tar.gz")
    assert path.name == "a.tar.gz"
    assert path.suffix == ".gz"
    assert not path.is_root
    assert path.as_dir() == "/workspace/notes/a.tar.gz/"
    assert VPath.parse("/").is_root
    assert VPath.parse("/").name == ""
    assert VPath.parse("/").as_dir() == "/"
    assert VPath.parse("/workspace/.bashrc").suffix == ""  # a dot-file has no extension
    assert VPath.parse("/workspace/Makefile").suffix == ""


def test_relative_to_matches_whole_segments_only() -> None:
    base = VPath.parse("/skills/venta")
    assert VPath.parse("/skills/venta/SKILL.md").relative_to(base) == ("SKILL.md",)
    assert VPath.parse("/skills/venta").relative_to(base) == ()
    assert VPath.parse("/skills/compraventa/SKILL.md").relative_to(base) is None
    assert VPath.parse("/skills/ventas/SKILL.md").relative_to(base) is None


@pytest.mark.parametrize("segment", ["..", ".", "a/..", "a//b", "a\\b", "a\x00"])
def test_child_checks_its_segments_again(segment: str) -> None:
    with pytest.raises(InvalidPath):
        VPath.parse("/workspace").child(segment)


def test_child_rejects_an_empty_segment() -> None:
    with pytest.raises(InvalidPath):
        VPath.parse("/workspace").child("")


@given(st.text())
def test_parse_output_is_canonical_or_rejected(raw: str) -> None:
    try:
        path = VPath.parse(raw)
    except InvalidPath:
        return
    for part in path.parts:
        assert part not in ("", ".", "..")
        assert "/" not in part
        assert "\\" not in part
        assert all(ord(ch) >= 0x20 and ch != "\x7f" for ch in part)
    assert VPath.parse(str(path)) == path
    assert raw.rstrip("/") == str(path).rstrip("/") or (raw, str(path)) == ("//", "/")


# --- check_identity ---------------------------------------------------------------------------

GOOD_IDS = ["alice", "Alice-01", "a.b", "a_b", "user@example.com", "a+tag", "urn:thread:42", "~x", "-", "a" * 128]
BAD_IDS = [
    "",
    ".",
    "..",
    "a/b",
    "../bob",
    "a b",
    "a\\b",
    "a\x00b",
    "a\nb",
    "ñandú",
    "a*",
    "a%2Fb",
    "a" * 129,
    None,
    42,
    ["alice"],
]


@pytest.mark.parametrize("value", GOOD_IDS)
def test_check_identity_accepts_allow_listed_ids(value: str) -> None:
    assert check_identity(value, "user id") == value


@pytest.mark.parametrize("value", BAD_IDS)
def test_check_identity_rejects_everything_else(value: object) -> None:
    with pytest.raises(InvalidPath, match="Invalid user id"):
        check_identity(value, "user id")


_ALLOWED_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@+:~-")

BAD_ID_STRINGS = st.one_of(
    st.sampled_from([".", ".."]),
    st.text(min_size=1).filter(lambda s: any(ch not in _ALLOWED_ID_CHARS for ch in s)),
)
GOOD_ID_STRINGS = st.text(alphabet=sorted(_ALLOWED_ID_CHARS), min_size=1, max_size=128).filter(
    lambda s: s not in (".", "..")
)


@given(GOOD_ID_STRINGS)
def test_check_identity_accepts_any_allow_listed_id(value: str) -> None:
    assert check_identity(value, "thread id") == value


@given(BAD_ID_STRINGS)
def test_check_identity_rejects_any_id_outside_the_allow_list(value: str) -> None:
    with pytest.raises(InvalidPath):
        check_identity(value, "thread id")


# --- tenant confinement of every S3 request (moto) ------------------------------------------

ALLOWED_PREFIXES = (
    "alice/skills/pdf/",
    "alice/skills/escrituras/compraventa/",
    "threads/t1/",
    "tickets/k1/",
)

SEED_KEYS = [
    # Visible to the tenant.
    "alice/skills/pdf/SKILL.md",
    "alice/skills/pdf/forms.md",
    "alice/skills/escrituras/compraventa/SKILL.md",
    "alice/skills/escrituras/compraventa/references/a.md",
    "threads/t1/notes.md",
    "threads/t1/sub/deep.md",
    "threads/t1/large_tool_results/r1",
    "tickets/k1/ticket.md",
    # Neighbours that share a string prefix or a leaf name, and other tenants.
    "alice/skills/escrituras/venta/SKILL.md",
    "alice/skills/pdf-extra/SKILL.md",
    "alice/skills/pdf.md",
    "alice/secret.md",
    "bob/skills/pdf/SKILL.md",
    "threads/t10/notes.md",
    "threads/t1x",
    "threads/other/notes.md",
    "tickets/k10/ticket.md",
    "org/skills/pdf/SKILL.md",
]


def _body(key: str) -> bytes:
    if key.endswith("/SKILL.md"):
        name = key.split("/")[-2]
        return f"---\nname: {name}\ndescription: The {name} skill.\n---\nalpha beta\n".encode()
    return b"alpha beta\n"


def _seed(s3_client: Any, bucket: str) -> None:
    for key in SEED_KEYS:
        s3_client.put_object(Bucket=bucket, Key=key, Body=_body(key))


_SEGMENT_ATOMS = st.sampled_from(
    [
        "workspace",
        "ticket",
        "skills",
        "pdf",
        "compraventa",
        "venta",
        "escrituras",
        "pdf-extra",
        "large_tool_results",
        "conversation_history",
        "alice",
        "bob",
        "threads",
        "tickets",
        "t1",
        "t10",
        "k1",
        "org",
        "notes.md",
        "SKILL.md",
        "forms",
        "sub",
        "..",
        ".",
        "",
        "...",
        "%2e%2e",
        "a\\b",
        "x\x00",
        "\u2028",
        "\x7f",
        "*",
        "**",
        "?",
        "[a]",
        "ñ",
    ]
)
_PATH_STRINGS = st.one_of(
    st.builds(
        lambda lead, parts, trail: lead + "/".join(parts) + trail,
        st.sampled_from(["/", "", "//", "\\", "./", "../"]),
        st.lists(_SEGMENT_ATOMS | st.text(max_size=6), max_size=6),
        st.sampled_from(["", "/", "//"]),
    ),
    st.text(),
)


class KeyRecorder:
    """A botocore `before-parameter-build.s3` handler recording the keys each request names.

    `before-parameter-build` carries the API parameters (`Key`, `Prefix`, `Delete`) as the
    caller passed them; `before-call`'s `params` is already the serialised HTTP request.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, params: dict[str, Any], model: Any = None, **_: Any) -> None:
        operation = getattr(model, "name", "?")
        bucket = str(params.get("Bucket"))
        keys: list[str] = []
        if "Key" in params:
            keys.append(params["Key"])
        if operation == "ListObjectsV2":
            keys.append(params.get("Prefix", ""))  # no Prefix would list the whole bucket
        keys.extend(obj["Key"] for obj in params.get("Delete", {}).get("Objects", []))
        with self._lock:
            self.calls.extend((operation, bucket, key) for key in keys)

    def take(self) -> list[tuple[str, str, str]]:
        with self._lock:
            calls, self.calls = self.calls, []
        return calls


def _error_of(result: Any) -> str | None:
    if isinstance(result, bool):
        return None if result else "does not exist"
    if isinstance(result, list):
        return result[0].error
    return result.error


OPERATIONS: dict[str, Callable[[S3Backend, str], Any]] = {
    "ls": lambda b, p: b.ls(p),
    "read": lambda b, p: b.read(p),
    "write": lambda b, p: b.write(p, "written"),
    "edit": lambda b, p: b.edit(p, "a", "b", replace_all=True),
    "delete": lambda b, p: b.delete(p),
    "grep_path": lambda b, p: b.grep("a", path=p),
    "grep_glob": lambda b, p: b.grep("a", path="/", glob=p),
    "glob_pattern": lambda b, p: b.glob(p),
    "glob_path": lambda b, p: b.glob("**", path=p),
    "download_files": lambda b, p: b.download_files([p]),
    "upload_files": lambda b, p: b.upload_files([(p, b"uploaded")]),
    "exists": lambda b, p: b.exists(p),
}
# Operations whose argument is a path; for the others the string is a pattern.
_PATH_OPERATIONS = set(OPERATIONS) - {"grep_glob", "glob_pattern"}
# grep and glob take an optional path: like deepagents, `""` means the root.
_OPTIONAL_PATH_OPERATIONS = {"grep_path", "glob_path"}


@dataclass
class Confined:
    backend: S3Backend
    recorder: KeyRecorder
    bucket: str


@pytest.fixture
def confined(bucket: str, moto_endpoint: str, s3_client: Any) -> Iterator[Confined]:
    _seed(s3_client, bucket)
    backend = S3Backend(
        bucket,
        user_id="alice",
        thread_id="t1",
        ticket_id="k1",
        endpoint_url=moto_endpoint,
        session=SESSION,
        layout=SEEDS,
    )
    backend.load_skill("pdf")
    backend.load_skill("escrituras/compraventa")
    recorder = KeyRecorder()
    backend.store.register_event("before-parameter-build.s3", recorder)
    yield Confined(backend, recorder, bucket)
    backend.close()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=_PATH_STRINGS)
def test_every_request_stays_inside_the_tenant_prefixes(confined: Confined, raw: str) -> None:
    for operation, run in OPERATIONS.items():
        confined.recorder.take()
        result = run(confined.backend, raw)
        touched = confined.recorder.take()
        for op, bucket, key in touched:
            assert bucket == confined.bucket
            assert key.startswith(ALLOWED_PREFIXES), f"{operation}({raw!r}) sent {op} for {key!r}"
        if operation not in _PATH_OPERATIONS:
            continue
        try:
            VPath.parse(raw or "/" if operation in _OPTIONAL_PATH_OPERATIONS else raw)
        except InvalidPath:
            assert touched == [], f"{operation}({raw!r}) reached S3 with a rejected path"
            assert _error_of(result) is not None


def test_recorder_sees_the_keys_of_a_valid_call(confined: Confined) -> None:
    # Guards the property above against a recorder that silently records nothing.
    confined.recorder.take()
    confined.backend.read("/workspace/notes.md")
    confined.backend.delete("/workspace/sub")
    touched = confined.recorder.take()
    assert ("GetObject", confined.bucket, "threads/t1/notes.md") in touched
    assert ("DeleteObjects", confined.bucket, "threads/t1/sub/deep.md") in touched


# --- identity parts from the constructor and from the run's context ---------------------------


class _State(TypedDict, total=False):
    loaded_skills: list[str]
    op: Callable[[], Any]
    result: Any


def _graph() -> Any:
    graph = StateGraph(_State, context_schema=dict)
    graph.add_node("call", lambda state: {"result": state["op"]()})
    graph.add_edge(START, "call")
    graph.add_edge("call", END)
    return graph.compile()


_RUN = _graph()


def _run_graph(
    op: Callable[[], Any],
    *,
    context: dict[str, Any],
    configurable: dict[str, Any],
    loaded_skills: list[str] | None = None,
) -> Any:
    """Call `op` inside a LangGraph run whose context, config and state carry the given ids."""
    state: _State = {"op": op, "loaded_skills": loaded_skills or []}
    return _RUN.invoke(state, context=context, config={"configurable": configurable})["result"]


@pytest.fixture
def plain_backend(bucket: str, moto_endpoint: str, s3_client: Any) -> Iterator[Confined]:
    s3_client.put_object(Bucket=bucket, Key="threads/t1/notes.md", Body=b"alpha beta\n")
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, session=SESSION, layout=SEEDS)
    recorder = KeyRecorder()
    backend.store.register_event("before-parameter-build.s3", recorder)
    yield Confined(backend, recorder, bucket)
    backend.close()


ID_FIELDS = ["user_id", "thread_id", "ticket_id"]
_OFFLINE_STORE = ObjectStore("never-contacted", session=SESSION)  # built, never called


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(ID_FIELDS), value=BAD_ID_STRINGS)
def test_constructor_rejects_ids_outside_the_allow_list(field: str, value: str) -> None:
    with pytest.raises(InvalidPath, match=f"Invalid {field.replace('_', ' ')}"):
        S3Backend("never-contacted", store=_OFFLINE_STORE, **{field: value}, layout=SEEDS)


# Where a run carries each id: the context (user, ticket) or the config (thread; the
# context is its fallback). A user or ticket in `configurable` is never read.
_CHANNELS = {"user_id": ["context"], "ticket_id": ["context"], "thread_id": ["context", "configurable"]}
_FIELD_CHANNELS = st.sampled_from([(f, c) for f, cs in _CHANNELS.items() for c in cs])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=_FIELD_CHANNELS, value=BAD_ID_STRINGS)
def test_runtime_ids_outside_the_allow_list_are_rejected_without_touching_s3(
    plain_backend: Confined, where: tuple[str, str], value: str
) -> None:
    field, channel = where
    context: dict[str, Any] = {"user_id": "alice", "ticket_id": "k1"}
    configurable: dict[str, Any] = {"thread_id": "t1"}
    context.pop(field, None)
    configurable.pop(field, None)
    (context if channel == "context" else configurable)[field] = value
    backend = plain_backend.backend
    plain_backend.recorder.take()
    results = _run_graph(
        lambda: [backend.ls("/workspace"), backend.read("/workspace/notes.md"), backend.grep("alpha")],
        context=context,
        configurable=configurable,
    )
    for result in results:
        assert result.error is not None
        assert f"Invalid {field.replace('_', ' ')}" in result.error
    assert plain_backend.recorder.take() == []


def test_runtime_ids_inside_the_allow_list_are_used(plain_backend: Confined) -> None:
    backend = plain_backend.backend
    result = _run_graph(
        lambda: backend.read("/workspace/notes.md"),
        context={"user_id": "alice", "ticket_id": "k1"},
        configurable={"thread_id": "t1"},
    )
    assert result.error is None
    assert result.file_data["content"] == "alpha beta\n"
    assert ("GetObject", plain_backend.bucket, "threads/t1/notes.md") in plain_backend.recorder.take()


# --- skill ids that come from the run's state ---------------------------------------------------

# Inside an agent the loaded skills are read from the state key `loaded_skills`, which a
# client of a LangGraph server can also write. An id there must pass the same allow-list
# as one given to `load_skill` before it becomes part of a key: S3 keys are literal, but
# an S3-compatible server or proxy that normalises dot-segments would resolve these.
FORGED_SKILL_IDS = ["../../bob/skills/pdf", "skills/../../bob/skills/pdf", "./pdf", "x//pdf", "a b/pdf"]


@pytest.mark.parametrize("forged", FORGED_SKILL_IDS)
def test_skill_ids_from_the_run_state_are_validated_before_any_key_is_built(
    plain_backend: Confined, forged: str
) -> None:
    backend = plain_backend.backend
    plain_backend.recorder.take()
    results = _run_graph(
        lambda: [
            backend.read("/skills/pdf/SKILL.md"),
            backend.ls("/skills/pdf"),
            backend.grep("alpha", path="/skills/pdf"),
            backend.download_files(["/skills/pdf/SKILL.md"])[0],
        ],
        context={"user_id": "alice"},
        configurable={"thread_id": "t1"},
        loaded_skills=[forged],
    )
    for _, _, key in plain_backend.recorder.take():
        assert not key.startswith("alice/skills/"), f"a key was built from the forged skill id: {key!r}"
    assert all(r.error is not None for r in results)
