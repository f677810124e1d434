"""Concurrent `edit`s of one file on a real server (SeaweedFS): one wins, the others are told.

`S3Backend.edit` reads the object with its ETag and writes it back with `IfMatch`. Two
editors that read the same version race their conditional PUTs; the server must let exactly
one through and answer 412 to the other, which the backend reports in `error=` with a hint
to read the file again. Whatever the interleaving, the final content holds exactly the edits
that reported success: none lost, none applied behind a reported failure.

The "gated" tests make every round a true race: a `before-send` hook holds each editor's
PUT until all editors have read the file (so they all hold the same ETag), then releases the
PUTs together. The "free" tests let threads collide naturally, as agents would.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import pytest
from botocore.exceptions import ClientError

from s3skills import S3Backend
from s3skills.layout import KeyLayout
from s3skills.testing import SeaweedBucket, make_client

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

pytestmark = pytest.mark.seaweedfs

USER, THREAD = "alice", "t1"
PATH = "/workspace/shared.md"
KEY = f"threads/{THREAD}/shared.md"
ROUNDS = 20
CONFLICT_HINT = "Read it again"


def slot(i: int) -> str:
    return f"slot-{i}: empty"


def filled(i: int, round_no: int) -> str:
    return f"slot-{i}: editor {i} in round {round_no}"


def initial_content(editors: int) -> str:
    return "".join(f"{slot(i)}\n" for i in range(editors))


def make_session(server: SeaweedBucket) -> aioboto3.Session:
    return aioboto3.Session(
        aws_access_key_id=server.access_key, aws_secret_access_key=server.secret_key, region_name="us-east-1"
    )


@pytest.fixture
def editors(seaweed_bucket: SeaweedBucket, request: pytest.FixtureRequest) -> Iterator[list[S3Backend]]:
    """Independent backends (own client each, as separate processes would have) on one bucket."""
    count = getattr(request, "param", 2)
    session = make_session(seaweed_bucket)
    backends = [
        S3Backend(
            seaweed_bucket.bucket,
            user_id=USER,
            thread_id=THREAD,
            endpoint_url=seaweed_bucket.endpoint_url,
            region_name="us-east-1",
            session=session,
            layout=SEEDS,
        )
        for _ in range(count)
    ]
    yield backends
    for backend in backends:
        backend.close()


@dataclass(eq=False)  # hashable: botocore keys handlers by identity
class PutGate:
    """A `before-send` hook that holds PutObject requests until `parties` of them are waiting.

    All hooks run on the library's I/O loop, so plain counters are safe. The wait is bounded:
    if an editor never reaches its PUT, the others go ahead after `timeout` seconds.
    """

    parties: int
    timeout: float = 10.0
    arrived: int = 0
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def reset(self) -> None:
        self.arrived = 0
        self.released = asyncio.Event()

    async def __call__(self, **_: Any) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.released.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.released.wait(), self.timeout)


@dataclass
class Tally:
    """What happened over the rounds."""

    rounds: int = 0
    winners_per_round: dict[int, int] = field(default_factory=dict)
    conflicts: int = 0

    def add(self, winners: int, conflicts: int) -> None:
        self.rounds += 1
        self.winners_per_round[winners] = self.winners_per_round.get(winners, 0) + 1
        self.conflicts += conflicts


def run_round(backends: list[S3Backend], round_no: int, *, use_threads: bool = True) -> list[Any]:
    """Each backend i replaces slot i, all at once (threads released by a barrier)."""
    results: list[Any] = [None] * len(backends)
    barrier = threading.Barrier(len(backends))

    def edit(i: int) -> None:
        barrier.wait(timeout=30)
        results[i] = backends[i].edit(PATH, slot(i), filled(i, round_no))

    threads = [threading.Thread(target=edit, args=(i,)) for i in range(len(backends))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def check_round(backends: list[S3Backend], results: list[Any], round_no: int, tally: Tally) -> None:
    """The invariant: the file holds exactly the edits that reported success."""
    content = backends[0].read(PATH, limit=100_000).file_data["content"]
    winners = 0
    conflicts = 0
    for i, result in enumerate(results):
        assert result is not None, f"editor {i} did not finish"
        if result.error is None:
            winners += 1
            assert result.occurrences == 1
            assert filled(i, round_no) in content, f"round {round_no}: editor {i} reported success; edit lost"
        else:
            conflicts += 1
            assert CONFLICT_HINT in result.error, result.error
            assert "changed by someone else" in result.error
            assert filled(i, round_no) not in content, f"round {round_no}: editor {i} failed but was applied"
    tally.add(winners, conflicts)


def reset_file(backend: S3Backend, editors: int) -> None:
    result = backend.write(PATH, initial_content(editors))
    assert result.error is None, result.error


@pytest.mark.parametrize("editors", [2, 4], indirect=True, ids=["2-editors", "4-editors"])
@pytest.mark.slow
def test_gated_concurrent_edits_have_exactly_one_winner_per_round(editors: list[S3Backend]) -> None:
    gate = PutGate(parties=len(editors))
    for backend in editors:
        backend.store.register_event("before-send.s3.PutObject", gate)
    tally = Tally()

    for round_no in range(ROUNDS):
        reset_file(editors[0], len(editors))  # before the gate is armed: a lone PUT must not wait
        gate.reset()
        results = run_round(editors, round_no)
        gate.parties = 10**9  # disarm for the read-back and the next reset
        check_round(editors, results, round_no, tally)
        gate.parties = len(editors)

    # Every editor read the same ETag before any PUT was sent: exactly one may win.
    assert tally.winners_per_round == {1: ROUNDS}, tally
    assert tally.conflicts == ROUNDS * (len(editors) - 1)


@pytest.mark.slow
def test_free_running_concurrent_edits_never_lose_an_edit(editors: list[S3Backend]) -> None:
    tally = Tally()

    for round_no in range(ROUNDS):
        reset_file(editors[0], len(editors))
        results = run_round(editors, round_no)
        check_round(editors, results, round_no, tally)

    # Without the gate an editor may read after the other's PUT and win too (a correct
    # sequential outcome); at least one edit lands every round.
    assert 0 not in tally.winners_per_round, tally


@pytest.mark.slow
async def test_async_concurrent_edits_from_one_backend_report_the_conflict(editors: list[S3Backend]) -> None:
    backend = editors[0]
    gate = PutGate(parties=2)
    backend.store.register_event("before-send.s3.PutObject", gate)
    tally = Tally()

    for round_no in range(ROUNDS):
        gate.parties = 10**9
        assert (await backend.awrite(PATH, initial_content(2))).error is None
        gate.reset()
        gate.parties = 2
        results = await asyncio.gather(
            backend.aedit(PATH, slot(0), filled(0, round_no)), backend.aedit(PATH, slot(1), filled(1, round_no))
        )
        gate.parties = 10**9
        check_round(editors, list(results), round_no, tally)

    assert tally.winners_per_round == {1: ROUNDS}, tally


def test_an_edit_after_a_completed_one_applies_on_top_of_it(editors: list[S3Backend]) -> None:
    first, second = editors
    reset_file(first, 2)
    assert first.edit(PATH, slot(0), filled(0, 0)).error is None

    result = second.edit(PATH, slot(1), filled(1, 0))  # reads the current version

    assert result.error is None
    content = first.read(PATH).file_data["content"]
    assert filled(0, 0) in content
    assert filled(1, 0) in content


@pytest.mark.parametrize("writers", [2, 4])
@pytest.mark.slow
def test_create_only_put_has_exactly_one_winner(seaweed_bucket: SeaweedBucket, writers: int) -> None:
    # The primitive a lock object would rest on: PutObject with IfNoneMatch="*".
    clients = [
        make_client(
            seaweed_bucket.endpoint_url, access_key=seaweed_bucket.access_key, secret_key=seaweed_bucket.secret_key
        )
        for _ in range(writers)
    ]
    winners_per_round: dict[int, int] = {}
    for round_no in range(ROUNDS):
        key = f"locks/round-{round_no}"
        outcomes = [""] * writers
        start = threading.Barrier(writers)

        def create(i: int, key: str = key, outcomes: list[str] = outcomes, start: threading.Barrier = start) -> None:
            start.wait(timeout=30)
            try:
                clients[i].put_object(Bucket=seaweed_bucket.bucket, Key=key, Body=b"owner", IfNoneMatch="*")
                outcomes[i] = "won"
            except ClientError as exc:
                outcomes[i] = exc.response["Error"]["Code"]

        threads = [threading.Thread(target=create, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        winners = outcomes.count("won")
        assert outcomes.count("PreconditionFailed") == writers - winners, outcomes
        winners_per_round[winners] = winners_per_round.get(winners, 0) + 1

    assert winners_per_round == {1: ROUNDS}
