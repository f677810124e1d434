"""s3skills: a multi-tenant skills system for LLM agents, stored in S3.

Layers, imported one way only (checked by `tests/test_layers.py`):

    front ends   s3skills.agent, s3skills.middleware, s3skills.tools, s3skills.cli,
                 s3skills.serve, s3skills.demo, s3skills.seed
    adapters     s3skills.fs (S3Backend), s3skills.runner, s3skills.transfer
    skills       s3skills.skills (SkillLibrary, the seam every front end uses)
    storage      s3skills.storage (ObjectStore, S3ObjectStore)
    base         errors, paths, ids, layout, tenancy, config, media, _loop

The names below are imported on first use, so `import s3skills` (and the CLI) stays
light: LangChain, LangGraph and deepagents load only with the parts that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from s3skills.errors import (
    AccessDenied,
    BinaryFile,
    BucketNotFound,
    Conflict,
    CredentialsError,
    FileTooLarge,
    InvalidPath,
    NotFound,
    ReadOnly,
    S3SkillsError,
    SkillError,
    StoreError,
    StoreUnavailable,
    TenantError,
    UserNotResolved,
)

if TYPE_CHECKING:
    from s3skills.agent import SkillsContext, create_skills_agent
    from s3skills.config import Config, Limits
    from s3skills.fs import S3Backend
    from s3skills.ids import SkillId
    from s3skills.layout import KeyLayout
    from s3skills.paths import VPath
    from s3skills.runner import ScriptObservation, ScriptRunner
    from s3skills.serve.langgraph import LangGraphAuthResolver
    from s3skills.skills import (
        InvalidSkill,
        LoadResult,
        Skill,
        SkillCatalog,
        SkillInfo,
        SkillLibrary,
        SkillMetadata,
        SkillProblem,
        SkillRegistry,
        SkillUsage,
        get_skill_doc,
        parse_skill_md,
        usage_stats,
    )
    from s3skills.skills.code.executable import CodeSkill, PromptSkill, SkillContext, SkillResult
    from s3skills.storage import ObjectStore, RequestCounter, S3ObjectStore
    from s3skills.tenancy import Identity, Tenant, TenantResolver, context_identity

_LAZY: dict[str, str] = {
    "CodeSkill": "s3skills.skills.code.executable",
    "PromptSkill": "s3skills.skills.code.executable",
    "SkillContext": "s3skills.skills.code.executable",
    "SkillResult": "s3skills.skills.code.executable",
    "Config": "s3skills.config",
    "Identity": "s3skills.tenancy",
    "InvalidSkill": "s3skills.skills",
    "KeyLayout": "s3skills.layout",
    "LangGraphAuthResolver": "s3skills.serve.langgraph",
    "Limits": "s3skills.config",
    "LoadResult": "s3skills.skills",
    "ObjectStore": "s3skills.storage",
    "RequestCounter": "s3skills.storage",
    "S3Backend": "s3skills.fs",
    "S3ObjectStore": "s3skills.storage",
    "ScriptObservation": "s3skills.runner",
    "ScriptRunner": "s3skills.runner",
    "Skill": "s3skills.skills",
    "SkillCatalog": "s3skills.skills",
    "SkillId": "s3skills.ids",
    "SkillInfo": "s3skills.skills",
    "SkillLibrary": "s3skills.skills",
    "SkillMetadata": "s3skills.skills",
    "SkillProblem": "s3skills.skills",
    "SkillRegistry": "s3skills.skills",
    "SkillUsage": "s3skills.skills",
    "SkillsContext": "s3skills.agent",
    "Tenant": "s3skills.tenancy",
    "TenantResolver": "s3skills.tenancy",
    "VPath": "s3skills.paths",
    "context_identity": "s3skills.tenancy",
    "create_skills_agent": "s3skills.agent",
    "get_skill_doc": "s3skills.skills",
    "parse_skill_md": "s3skills.skills",
    "usage_stats": "s3skills.skills",
}

__all__ = [
    "AccessDenied",
    "BinaryFile",
    "BucketNotFound",
    "CodeSkill",
    "Config",
    "Conflict",
    "CredentialsError",
    "FileTooLarge",
    "Identity",
    "InvalidPath",
    "InvalidSkill",
    "KeyLayout",
    "LangGraphAuthResolver",
    "Limits",
    "LoadResult",
    "NotFound",
    "ObjectStore",
    "PromptSkill",
    "ReadOnly",
    "RequestCounter",
    "S3Backend",
    "S3ObjectStore",
    "S3SkillsError",
    "ScriptObservation",
    "ScriptRunner",
    "Skill",
    "SkillCatalog",
    "SkillContext",
    "SkillError",
    "SkillId",
    "SkillInfo",
    "SkillLibrary",
    "SkillMetadata",
    "SkillProblem",
    "SkillRegistry",
    "SkillResult",
    "SkillUsage",
    "SkillsContext",
    "StoreError",
    "StoreUnavailable",
    "Tenant",
    "TenantError",
    "TenantResolver",
    "UserNotResolved",
    "VPath",
    "context_identity",
    "create_skills_agent",
    "get_skill_doc",
    "parse_skill_md",
    "usage_stats",
]

__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 's3skills' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
