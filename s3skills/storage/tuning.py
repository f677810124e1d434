"""Per-request CPU that botocore spends for nothing, taken off one S3 client.

A cold index reads thousands of small objects, and on a small machine botocore's own
CPU per request is what limits it (bench/README.md, issue 21). Two costs are pure waste
for `S3ObjectStore`'s requests, and `tune_client` removes them from one client (never
from the session the application passed, which its other clients share):

- Endpoint resolution. botocore caches the endpoint of a call by its ruleset
  parameters, and for S3 those include the object `Key` (and `Prefix`), which the S3
  ruleset never reads: every new key missed the cache and evaluated the whole ruleset
  (about 0.2 ms of CPU per GET). The parameters the ruleset does not reference are
  dropped before the (cached) resolution, so the endpoint is the same and is found in
  the cache.
- Timestamps. botocore parses every `Last-Modified` (each GET's header and each listed
  key) with dateutil. ISO 8601 and HTTP dates are parsed with the standard library
  instead; anything else (or a result without a time zone where botocore would give
  one) goes to botocore's parser, so the values are the same instants.
- The User-Agent header. botocore builds it twice per request (once for the request,
  again before sending, to add the features the request used), sanitising each of its
  components every time: about 45 microseconds each, 0.9 s of CPU over a cold index of
  10,000 skills. The string depends only on the client (fixed) and on that feature set,
  so it is built once per feature set and reused.

All three reach into botocore internals; when a botocore release moves them, the client
is left as it is (slower, never wrong).
"""

from __future__ import annotations

from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from botocore.utils import parse_timestamp

__all__ = ["fast_timestamp", "tune_client"]


def fast_timestamp(value: Any) -> datetime:
    """The instant botocore's `parse_timestamp` gives for `value`, with less CPU."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)  # ListObjectsV2: 2026-11-26T10:00:00.000Z
        except ValueError:
            try:
                parsed = parsedate_to_datetime(value)  # headers: Wed, 26 Nov 2026 10:00:00 GMT
            except (TypeError, ValueError, IndexError):
                return parse_timestamp(value)  # type: ignore[no-any-return]
        if parsed.tzinfo is not None:
            return parsed
    return parse_timestamp(value)  # type: ignore[no-any-return]


def tune_client(client: Any) -> bool:
    """Take the wasted costs off `client` (an aiobotocore S3 client); False if one could not be."""
    return _cache_endpoints(client) & _fast_timestamps(client) & _cache_user_agent(client)


_USER_AGENTS_KEPT = 64  # distinct feature sets whose User-Agent a client keeps


def _cache_user_agent(client: Any) -> bool:
    try:
        from botocore.context import get_context

        creator = client._user_agent_creator
        build = creator.to_string
    except (AttributeError, ImportError):
        return False
    if not hasattr(creator, "_client_features"):
        return False  # this botocore builds the header from other state: leave it as it is
    built: dict[frozenset[str], str] = {}

    def to_string() -> str:
        context = get_context()
        features = frozenset(creator._client_features or ()) | frozenset(() if context is None else context.features)
        value = built.get(features)
        if value is None:
            if len(built) >= _USER_AGENTS_KEPT:
                built.clear()
            value = built[features] = build()
        return value  # type: ignore[no-any-return]

    creator.to_string = to_string
    return True


def _cache_endpoints(client: Any) -> bool:
    try:
        provider = client._ruleset_resolver._provider
        ruleset = provider.ruleset
        names = set(ruleset.parameters)
        used = _refs(ruleset.rules)
    except AttributeError:
        return False
    unused = frozenset(n for n in ("Key", "Prefix", "CopySource") if n in names and n not in used)
    if not used or not unused:
        return bool(used)
    resolve = provider.resolve_endpoint

    def resolve_endpoint(**params: Any) -> Any:
        for name in unused:
            params.pop(name, None)
        return resolve(**params)

    provider.resolve_endpoint = resolve_endpoint
    return True


def _refs(node: Any, depth: int = 0) -> set[str]:
    """Every parameter name a ruleset's rules reference (`{"ref": name}`), at any depth."""
    if depth > 64:
        raise AttributeError("ruleset too deep to inspect")
    if isinstance(node, dict):
        found = {node["ref"]} if isinstance(node.get("ref"), str) else set()
        for value in node.values():
            found |= _refs(value, depth + 1)
        return found
    if isinstance(node, list | tuple):
        return set().union(*(_refs(v, depth + 1) for v in node)) if node else set()
    if hasattr(node, "__dict__") and not isinstance(node, type):
        return _refs(vars(node), depth + 1)
    return set()


def _fast_timestamps(client: Any) -> bool:
    try:
        endpoint = client._endpoint
        factory = type(endpoint._response_parser_factory)()
    except (AttributeError, TypeError):
        return False
    factory.set_parser_defaults(timestamp_parser=fast_timestamp)
    endpoint._response_parser_factory = factory
    return True
