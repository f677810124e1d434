"""Request counts are part of the contract: each operation's S3 calls are pinned here.

Counts come from `s3skills.storage.RequestCounter` (one tick per API call, retries excluded);
which keys a GET touched come from a botocore `before-parameter-build.s3` handler. No timing
is measured anywhere: concurrency is observed as the number of GETs in flight at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import aioboto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from s3skills import S3Backend
from s3skills.layout import KeyLayout
from s3skills.storage import RequestCounter

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

SESSION = aioboto3.Session()


def bulk_put(bucket: str, objects: dict[str, bytes]) -> None:
    """Store objects straight into moto's in-process backend.

    The moto server runs in this process; 2,500 PUTs over HTTP would cost more than the
    rest of the module, and the requests under test are the backend's, not these.
    """
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for key, body in objects.items():
        backend.put_object(bucket, key, body)


class GetRecorder:
    """Records the keys of GetObject calls, from the API parameters botocore is given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keys: list[str] = []

    def __call__(self, params: dict[str, Any], model: Any = None, **_: Any) -> None:
        if getattr(model, "name", None) == "GetObject":
            with self._lock:
                self.keys.append(params["Key"])


class Counted:
    def __init__(self, backend: S3Backend, bucket: str) -> None:
        self.backend = backend
        self.bucket = bucket
        self.counter = RequestCounter()
        self.gets = GetRecorder()
        backend.store.add_request_hook(self.counter)
        backend.store.register_event("before-parameter-build.s3", self.gets)

    def reset(self) -> None:
        self.counter.reset()
        self.gets.keys.clear()


@pytest.fixture
def counted(bucket: str, moto_endpoint: str) -> Iterator[Counted]:
    backend = S3Backend(
        bucket,
        user_id="alice",
        thread_id="t1",
        ticket_id="k1",
        endpoint_url=moto_endpoint,
        session=SESSION,
        max_grep_bytes=1_000,
        layout=SEEDS,
    )
    yield Counted(backend, bucket)
    backend.close()


def test_ls_costs_one_list_per_thousand_entries(counted: Counted) -> None:
    bulk_put(counted.bucket, {f"threads/t1/big/f{i:04d}.md": b"x" for i in range(2_500)})
    result = counted.backend.ls("/workspace/big")
    assert result.error is None
    assert len(result.entries) == 2_500
    assert counted.counter.counts == {"ListObjectsV2": 3}


def test_ls_of_a_small_folder_is_one_list(counted: Counted) -> None:
    bulk_put(counted.bucket, {"threads/t1/a.md": b"a", "threads/t1/sub/b.md": b"b"})
    assert len(counted.backend.ls("/workspace").entries) == 2
    assert counted.counter.counts == {"ListObjectsV2": 1}


def test_ls_of_the_root_and_skills_folder_costs_nothing(counted: Counted) -> None:
    bulk_put(counted.bucket, {"alice/skills/pdf/SKILL.md": b"---\nname: pdf\ndescription: PDF.\n---\n"})
    counted.backend.load_skill("pdf")
    counted.reset()
    assert counted.backend.ls("/").error is None
    assert counted.backend.ls("/skills").error is None
    assert counted.counter.counts == {}


def test_read_is_exactly_one_get(counted: Counted) -> None:
    bulk_put(counted.bucket, {"threads/t1/notes.md": b"one\ntwo\n"})
    result = counted.backend.read("/workspace/notes.md", offset=1, limit=1)
    assert result.file_data["content"] == "two\n"
    assert counted.counter.counts == {"GetObject": 1}
    assert counted.gets.keys == ["threads/t1/notes.md"]


def test_read_of_a_loaded_skill_file_is_exactly_one_get(counted: Counted) -> None:
    bulk_put(
        counted.bucket,
        {"alice/skills/pdf/SKILL.md": b"---\nname: pdf\ndescription: PDF.\n---\n", "alice/skills/pdf/forms.md": b"f"},
    )
    counted.backend.load_skill("pdf")
    counted.reset()
    assert counted.backend.read("/skills/pdf/forms.md").error is None
    assert counted.counter.counts == {"GetObject": 1}


def test_read_without_extension_costs_one_more_get(counted: Counted) -> None:
    bulk_put(counted.bucket, {"threads/t1/readme.md": b"r"})
    assert counted.backend.read("/workspace/readme").error is None
    assert counted.counter.counts == {"GetObject": 2}
    assert counted.gets.keys == ["threads/t1/readme", "threads/t1/readme.md"]


def test_write_is_exactly_one_put(counted: Counted) -> None:
    assert counted.backend.write("/workspace/new.md", "x").error is None
    assert counted.counter.counts == {"PutObject": 1}


def test_edit_is_one_get_and_one_put(counted: Counted) -> None:
    bulk_put(counted.bucket, {"threads/t1/notes.md": b"alpha beta\n"})
    assert counted.backend.edit("/workspace/notes.md", "beta", "gamma").error is None
    assert counted.counter.counts == {"GetObject": 1, "PutObject": 1}


def test_failed_edit_does_not_write(counted: Counted) -> None:
    bulk_put(counted.bucket, {"threads/t1/notes.md": b"alpha beta\n"})
    assert counted.backend.edit("/workspace/notes.md", "omega", "gamma").error is not None
    assert counted.counter.counts == {"GetObject": 1}


def test_delete_of_a_folder_is_one_list_and_one_batch_delete(counted: Counted) -> None:
    bulk_put(counted.bucket, {f"threads/t1/docs/f{i}.md": b"x" for i in range(20)})
    assert counted.backend.delete("/workspace/docs").error is None
    assert counted.counter.counts == {"ListObjectsV2": 1, "DeleteObjects": 1}


WORKSPACE = {
    "threads/t1/a.md": b"needle a\n",
    "threads/t1/b.md": b"no match here\n",
    "threads/t1/notes.txt": b"needle in txt\n",
    "threads/t1/docs/c.md": b"needle c\n",
    "threads/t1/photo.png": b"\x89PNG needle",
    "threads/t1/doc.pdf": b"%PDF needle",
    "threads/t1/song.mp3": b"ID3 needle",
    "threads/t1/big.md": b"needle " + b"x" * 2_000,  # over max_grep_bytes=1,000
}


def test_grep_lists_once_and_gets_only_text_files_within_the_size_limit(counted: Counted) -> None:
    bulk_put(counted.bucket, WORKSPACE)
    result = counted.backend.grep("needle", path="/workspace")
    assert sorted(m["path"] for m in result.matches) == [
        "/workspace/a.md",
        "/workspace/docs/c.md",
        "/workspace/notes.txt",
    ]
    assert counted.counter.counts == {"ListObjectsV2": 1, "GetObject": 4}
    assert sorted(counted.gets.keys) == [
        "threads/t1/a.md",
        "threads/t1/b.md",
        "threads/t1/docs/c.md",
        "threads/t1/notes.txt",
    ]


def test_grep_does_not_get_files_excluded_by_the_glob(counted: Counted) -> None:
    bulk_put(counted.bucket, WORKSPACE)
    result = counted.backend.grep("needle", path="/workspace", glob="docs/*.md")
    assert [m["path"] for m in result.matches] == ["/workspace/docs/c.md"]
    assert counted.counter.counts == {"ListObjectsV2": 1, "GetObject": 1}
    assert counted.gets.keys == ["threads/t1/docs/c.md"]


def test_grep_from_the_root_lists_each_visible_mount_once(counted: Counted) -> None:
    bulk_put(
        counted.bucket,
        {
            "alice/skills/pdf/SKILL.md": b"---\nname: pdf\ndescription: PDF.\n---\nneedle\n",
            "alice/skills/other/SKILL.md": b"---\nname: other\ndescription: Other.\n---\nneedle\n",
            "threads/t1/a.md": b"needle\n",
            "tickets/k1/t.md": b"needle\n",
        },
    )
    counted.backend.load_skill("pdf")
    counted.reset()
    result = counted.backend.grep("needle", path="/")
    assert len(result.matches) == 3
    assert counted.counter.counts == {"ListObjectsV2": 3, "GetObject": 3}
    assert sorted(counted.gets.keys) == ["alice/skills/pdf/SKILL.md", "threads/t1/a.md", "tickets/k1/t.md"]


def test_grep_does_not_get_fonts_or_archives(counted: Counted) -> None:
    bulk_put(
        counted.bucket,
        {"threads/t1/a.md": b"needle\n", "threads/t1/font.ttf": b"\x00needle", "threads/t1/x.zip": b"PK\x03\x04"},
    )
    counted.backend.grep("needle", path="/workspace")
    assert counted.gets.keys == ["threads/t1/a.md"]


def test_glob_only_lists(counted: Counted) -> None:
    bulk_put(counted.bucket, WORKSPACE)
    result = counted.backend.glob("**/*.md", path="/workspace")
    assert len(result.matches) == 4
    assert counted.counter.counts == {"ListObjectsV2": 1}
    counted.reset()
    assert counted.backend.glob("*.md").error is None  # the root: workspace and ticket
    assert counted.counter.counts == {"ListObjectsV2": 2}


class InFlight:
    """Counts GetObject calls between botocore's `before-send` and `after-call` events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.sent = 0

    def sending(self, **_: Any) -> None:
        with self._lock:
            self.now += 1
            self.sent += 1
            self.peak = max(self.peak, self.now)

    def done(self, **_: Any) -> None:
        with self._lock:
            self.now -= 1


def test_grep_issues_its_gets_concurrently(counted: Counted) -> None:
    bulk_put(counted.bucket, {f"threads/t1/f{i:02d}.md": f"needle {i}\n".encode() for i in range(64)})
    in_flight = InFlight()
    counted.backend.store.register_event("before-send.s3.GetObject", in_flight.sending)
    counted.backend.store.register_event("after-call.s3.GetObject", in_flight.done)
    result = counted.backend.grep("needle", path="/workspace")
    assert len(result.matches) == 64
    assert in_flight.sent == 64
    assert in_flight.now == 0
    assert in_flight.peak >= 32
    assert counted.counter.counts == {"ListObjectsV2": 1, "GetObject": 64}


def test_grep_concurrency_is_bounded_by_the_backend_setting(bucket: str, moto_endpoint: str) -> None:
    bulk_put(bucket, {f"threads/t1/f{i:02d}.md": b"needle\n" for i in range(24)})
    backend = S3Backend(
        bucket, thread_id="t1", endpoint_url=moto_endpoint, session=SESSION, concurrency=4, layout=SEEDS
    )
    try:
        in_flight = InFlight()
        backend.store.register_event("before-send.s3.GetObject", in_flight.sending)
        backend.store.register_event("after-call.s3.GetObject", in_flight.done)
        assert len(backend.grep("needle", path="/workspace").matches) == 24
        assert in_flight.sent == 24
        assert 1 <= in_flight.peak <= 4
    finally:
        backend.close()
