"""s3skills: a multi-tenant skills system for LLM agents, stored in S3.

The public names are imported on first use (PEP 562), so that `import s3skills`
stays cheap: the backend and the agent glue pull in deepagents and LangChain, which
a command such as `s3skills list` never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from s3skills.agent import SkillsContext, create_skills_agent
    from s3skills.backend import S3Backend
    from s3skills.catalog import SkillCatalog, SkillProblem
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
    )
    from s3skills.layout import KeyLayout
    from s3skills.paths import VPath
    from s3skills.registry import Skill, SkillRegistry
    from s3skills.runner import ScriptObservation, ScriptRunner
    from s3skills.skillmd import InvalidSkill, SkillInfo, SkillMetadata, get_skill_doc, parse_skill_md
    from s3skills.store import ObjectStore, RequestCounter
    from s3skills.tenancy import Tenant
    from s3skills.usage import SkillUsage, usage_stats

__all__ = [
    "AccessDenied",
    "BinaryFile",
    "BucketNotFound",
    "Conflict",
    "CredentialsError",
    "FileTooLarge",
    "InvalidPath",
    "InvalidSkill",
    "KeyLayout",
    "NotFound",
    "ObjectStore",
    "ReadOnly",
    "RequestCounter",
    "S3Backend",
    "S3SkillsError",
    "ScriptObservation",
    "ScriptRunner",
    "Skill",
    "SkillCatalog",
    "SkillError",
    "SkillInfo",
    "SkillMetadata",
    "SkillProblem",
    "SkillRegistry",
    "SkillUsage",
    "SkillsContext",
    "StoreError",
    "StoreUnavailable",
    "Tenant",
    "TenantError",
    "VPath",
    "create_skills_agent",
    "get_skill_doc",
    "parse_skill_md",
    "usage_stats",
]

__version__ = "0.1.0"

_ERRORS = (
    "AccessDenied",
    "BinaryFile",
    "BucketNotFound",
    "Conflict",
    "CredentialsError",
    "FileTooLarge",
    "InvalidPath",
    "NotFound",
    "ReadOnly",
    "S3SkillsError",
    "SkillError",
    "StoreError",
    "StoreUnavailable",
    "TenantError",
)
# Public name -> the module that defines it (imported when the name is first read).
_LAZY: dict[str, str] = {
    **dict.fromkeys(_ERRORS, "s3skills.errors"),
    "S3Backend": "s3skills.backend",
    "SkillCatalog": "s3skills.catalog",
    "SkillProblem": "s3skills.catalog",
    "KeyLayout": "s3skills.layout",
    "VPath": "s3skills.paths",
    "Skill": "s3skills.registry",
    "SkillRegistry": "s3skills.registry",
    "ScriptObservation": "s3skills.runner",
    "ScriptRunner": "s3skills.runner",
    "InvalidSkill": "s3skills.skillmd",
    "SkillInfo": "s3skills.skillmd",
    "SkillMetadata": "s3skills.skillmd",
    "get_skill_doc": "s3skills.skillmd",
    "parse_skill_md": "s3skills.skillmd",
    "ObjectStore": "s3skills.store",
    "RequestCounter": "s3skills.store",
    "Tenant": "s3skills.tenancy",
    "SkillUsage": "s3skills.usage",
    "usage_stats": "s3skills.usage",
    "SkillsContext": "s3skills.agent",
    "create_skills_agent": "s3skills.agent",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 's3skills' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
