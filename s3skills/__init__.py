"""s3skills: a multi-tenant skills system for LLM agents, stored in S3."""

from s3skills.backend import S3Backend
from s3skills.errors import (
    AccessDenied,
    BinaryFile,
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
from s3skills.store import ObjectStore, RequestCounter
from s3skills.tenancy import Tenant

__all__ = [
    "AccessDenied",
    "BinaryFile",
    "Conflict",
    "CredentialsError",
    "FileTooLarge",
    "InvalidPath",
    "KeyLayout",
    "NotFound",
    "ObjectStore",
    "ReadOnly",
    "RequestCounter",
    "S3Backend",
    "S3SkillsError",
    "SkillError",
    "StoreError",
    "StoreUnavailable",
    "Tenant",
    "TenantError",
    "VPath",
]

__version__ = "0.1.0"
