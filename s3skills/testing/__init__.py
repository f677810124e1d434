"""Test helpers shipped with s3skills, for testing apps built on it.

`FaultProxy` sits between an S3 client and a local S3 server (moto, SeaweedFS,
LocalStack) and adds latency, injects faults and counts requests.
`MemoryObjectStore` is the object-store contract in memory, for unit tests.
`ScriptedChatModel` drives a real agent loop from a script, with no model provider.
"""

from s3skills.testing.memory import MemoryObjectStore
from s3skills.testing.proxy import (
    FaultKind,
    FaultProxy,
    FaultRule,
    ProxyRequest,
    RequestMatcher,
    RequestRecord,
    match_request,
)
from s3skills.testing.scripted import ScriptedChatModel, ScriptStep, tool_call

__all__ = [
    "FaultKind",
    "FaultProxy",
    "FaultRule",
    "MemoryObjectStore",
    "ProxyRequest",
    "RequestMatcher",
    "RequestRecord",
    "ScriptStep",
    "ScriptedChatModel",
    "match_request",
    "tool_call",
]
