"""s3skills: a multi-tenant skills system for LLM agents, stored in S3."""

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # imported lazily at run time (see __getattr__)
    from s3skills.agent import SkillsContext, create_skills_agent
    from s3skills.executable import CodeSkill, PromptSkill, SkillContext, SkillResult

__all__ = [
    "AccessDenied",
    "BinaryFile",
    "BucketNotFound",
    "CodeSkill",
    "Conflict",
    "CredentialsError",
    "FileTooLarge",
    "InvalidPath",
    "InvalidSkill",
    "KeyLayout",
    "NotFound",
    "ObjectStore",
    "PromptSkill",
    "ReadOnly",
    "RequestCounter",
    "S3Backend",
    "S3SkillsError",
    "ScriptObservation",
    "ScriptRunner",
    "Skill",
    "SkillCatalog",
    "SkillContext",
    "SkillError",
    "SkillInfo",
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
    "VPath",
    "create_skills_agent",
    "get_skill_doc",
    "parse_skill_md",
    "usage_stats",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The agent glue imports langchain's agent stack: load it only when asked for.
    if name in ("create_skills_agent", "SkillsContext"):
        from s3skills import agent

        return getattr(agent, name)
    if name in ("CodeSkill", "PromptSkill", "SkillContext", "SkillResult"):
        from s3skills import executable

        return getattr(executable, name)
    raise AttributeError(f"module 's3skills' has no attribute {name!r}")
