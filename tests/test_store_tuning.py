"""`S3ObjectStore`'s client spends less CPU per request and answers the same (issue 21 item 2).

The S3 endpoint ruleset never reads an object's `Key`, yet botocore resolved the endpoint
again for every new key; timestamps went through dateutil; the User-Agent was rebuilt twice
per request. `s3skills.storage.tuning` takes all three off the store's own client. These tests
pin that the answers are unchanged (the same instants, the same endpoint, the same header) and,
through the store's real requests to moto, that each saving happens: botocore's own ruleset
evaluation, User-Agent builder and dateutil timestamp parser are wrapped and their calls counted
per request (never timed), so switching any of the three off fails a test.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import aioboto3
import pytest
from botocore.utils import parse_timestamp

from s3skills._loop import run_sync
from s3skills.storage import S3ObjectStore
from s3skills.storage.tuning import fast_timestamp, tune_client


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-26T10:00:00.000Z",
        "2026-11-26T10:00:00Z",
        "2026-11-26T10:00:00.123456+02:00",
        "2026-11-26T10:00:00",
        "2026-11-26",
        "Wed, 26 Nov 2026 10:00:00 GMT",
        "Wed, 26 Nov 2026 10:00:00 +0100",
        "Wed, 26 Nov 2026 10:00:00 -0000",
        "26 Nov 2026 10:00:00 GMT",
        1_795_000_000,
        1_795_000_000.5,
        "1795000000",
    ],
)
def test_a_timestamp_is_the_instant_botocore_gives(value: Any) -> None:
    ours, theirs = fast_timestamp(value), parse_timestamp(value)
    assert (ours.tzinfo is None) == (theirs.tzinfo is None)
    assert ours == theirs


def test_a_timestamp_botocore_refuses_is_refused() -> None:
    with pytest.raises(ValueError, match="not a date"):
        parse_timestamp("not a date")
    with pytest.raises(ValueError, match="not a date"):
        fast_timestamp("not a date")


async def _client_calls(endpoint: str, tuned: bool) -> tuple[list[str], int]:
    session = aioboto3.Session(aws_access_key_id="a", aws_secret_access_key="b")
    async with session.client("s3", endpoint_url=endpoint, region_name="us-east-1") as client:
        if tuned:
            assert tune_client(client)
        resolver = client._ruleset_resolver
        evaluations = 0
        evaluate = resolver._provider.ruleset.evaluate

        def counted(params: Any) -> Any:
            nonlocal evaluations
            evaluations += 1
            return evaluate(params)

        resolver._provider.ruleset.evaluate = counted
        urls = []
        for key in ("a/SKILL.md", "b/SKILL.md", "c/d/SKILL.md"):
            operation = client.meta.service_model.operation_model("GetObject")
            found = await resolver.construct_endpoint(operation, {"Bucket": "bk", "Key": key}, {})
            urls.append(found.url)
        return urls, evaluations


def test_a_tuned_client_resolves_the_same_endpoint_once_for_every_key() -> None:
    # A fresh endpoint per client: botocore's resolution cache is per provider object.
    plain_urls, plain = run_sync(_client_calls("http://127.0.0.1:9001", tuned=False))
    tuned_urls, tuned = run_sync(_client_calls("http://127.0.0.1:9001", tuned=True))
    assert tuned_urls == plain_urls == ["http://127.0.0.1:9001/bk"] * 3
    assert plain == 3  # the Key made every resolution a cache miss
    assert tuned == 1


def test_the_store_reads_and_lists_with_its_tuned_client(bucket: str, moto_endpoint: str) -> None:
    store = S3ObjectStore(bucket, endpoint_url=moto_endpoint, region_name="us-east-1")

    async def scenario() -> None:
        before = datetime.now(UTC).replace(microsecond=0)
        for key in ("lib/a/SKILL.md", "lib/b/SKILL.md"):
            await store.aput(key, b"---\nname: x\n---\n")
        objects, _ = await store.alist("lib/")
        assert [o.key for o in objects] == ["lib/a/SKILL.md", "lib/b/SKILL.md"]
        assert all(o.last_modified is not None for o in objects)
        assert all(o.last_modified >= before for o in objects if o.last_modified is not None)
        body = await store.aget_range("lib/b/SKILL.md", 0, 8)
        assert body.data == b"---\nname"
        assert body.last_modified is not None
        assert body.last_modified.tzinfo is not None
        await store.aclose_all()

    run_sync(scenario())


async def _user_agents(endpoint: str, tuned: bool) -> list[str]:
    from botocore.context import get_context, start_as_current_context

    session = aioboto3.Session(aws_access_key_id="a", aws_secret_access_key="b")
    async with session.client("s3", endpoint_url=endpoint, region_name="us-east-1") as client:
        if tuned:
            assert tune_client(client)
        creator = client._user_agent_creator
        out = [creator.to_string(), creator.to_string()]
        with start_as_current_context():
            context = get_context()
            context.features.add("Z")
            out.append(creator.to_string())
            context.features.add("e")
            out.append(creator.to_string())
        out.append(creator.to_string())
        return out


def _features(user_agent: str) -> tuple[str, frozenset[str]]:
    """The User-Agent with its `m/` component's features as a set (botocore joins a set)."""
    parts = user_agent.split(" ")
    found = [p for p in parts if p.startswith("m/")]
    rest = " ".join(p for p in parts if not p.startswith("m/"))
    return rest, frozenset(found[0][2:].split(",")) if found else frozenset()


def test_a_tuned_client_sends_the_user_agent_botocore_builds_for_each_feature_set() -> None:
    plain = run_sync(_user_agents("http://127.0.0.1:9001", tuned=False))
    tuned = run_sync(_user_agents("http://127.0.0.1:9001", tuned=True))
    assert [_features(u) for u in tuned] == [_features(u) for u in plain]
    assert "Z" in _features(tuned[2])[1]
    assert {"Z", "e"} <= _features(tuned[3])[1]  # a new feature set is built anew, not served stale
    assert tuned[4] == tuned[0]  # back outside the request's context


# --- each optimisation, switched off, fails a test: the work it saves is counted per request ---


def _counted(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Wrap botocore's real `owner.name` so that each call is counted (in the returned one-item list)."""
    real = getattr(owner, name)
    calls = [0]

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


async def _requests(store: S3ObjectStore, keys: list[str], work: list[int]) -> list[int]:
    """`work[0]` after each round of one ranged GET per key and one LIST of them (the first is a warm-up)."""
    seen = []
    for key in keys:
        body = await store.aget_range(key, 0, 8)
        assert body.data == b"---\nname"
        assert body.last_modified is not None
        assert body.last_modified.tzinfo is not None
        objects, _ = await store.alist("lib/")
        assert all(o.last_modified is not None for o in objects)
        seen.append(work[0])
    return seen


def _rounds(bucket: str, endpoint: str, work: list[int], count: int = 12) -> list[int]:
    """`work` counted over `count` rounds of requests by a new store on `bucket` (made after the wrap)."""
    keys = [f"lib/s{n}/SKILL.md" for n in range(count)]
    writer = S3ObjectStore(bucket, endpoint_url=endpoint, region_name="us-east-1")
    reader = S3ObjectStore(bucket, endpoint_url=endpoint, region_name="us-east-1")

    async def scenario() -> list[int]:
        for key in keys:
            await writer.aput(key, b"---\nname: x\n---\n")
        await writer.aclose_all()
        try:
            return await _requests(reader, keys, work)
        finally:
            await reader.aclose_all()

    return run_sync(scenario())


def test_the_store_builds_its_user_agent_once_per_feature_set_not_per_request(
    bucket: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.useragent import UserAgentString

    builds = _counted(monkeypatch, UserAgentString, "to_string")
    seen = _rounds(bucket, moto_endpoint, builds)
    # Untuned, botocore builds it twice per request: 2 x 2 x 11 more builds after the first round.
    assert seen[1:] == [seen[0]] * (len(seen) - 1), seen
    assert seen[0] >= 1  # the counter does see botocore's builder


def test_the_store_resolves_its_endpoint_once_not_per_key(
    bucket: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.endpoint_provider import RuleSet

    evaluations = _counted(monkeypatch, RuleSet, "evaluate")
    seen = _rounds(bucket, moto_endpoint, evaluations)
    # Untuned, every new Key misses botocore's cache: one more evaluation per GET.
    assert seen[1:] == [seen[0]] * (len(seen) - 1), seen
    assert seen[0] >= 1


def test_the_store_parses_no_timestamp_with_botocores_dateutil_parser(
    bucket: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import botocore.parsers

    from s3skills.storage import tuning

    slow = _counted(monkeypatch, botocore.parsers, "DEFAULT_TIMESTAMP_PARSER")
    fast = _counted(monkeypatch, tuning, "fast_timestamp")
    seen = _rounds(bucket, moto_endpoint, slow)
    # Untuned, each GET's Last-Modified and each listed key went through dateutil.
    assert seen == [0] * len(seen)
    assert fast[0] >= 2 * len(seen)  # every GET header and every listing parsed, the fast way
