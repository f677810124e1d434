"""What an agent reads when a file operation fails: the one place that writes those messages.

The core raises the project's exceptions; `S3Backend` turns each into an `error=` string
here, once, at the protocol boundary. Messages name the virtual path and the operation,
never a bucket or a key, and say what to do next.
"""

from __future__ import annotations

import logging

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
    StoreUnavailable,
    TenantError,
)

__all__ = ["message", "not_found", "op_error"]

logger = logging.getLogger("s3skills.fs.backend")


def not_found(path: str) -> str:
    """deepagents' wording for a missing file."""
    return f"File '{path}' not found"


def message(exc: BaseException, path: str, op: str) -> str:
    """The agent-facing message of an exception raised while doing `op` on `path`."""
    if isinstance(exc, BucketNotFound | CredentialsError):  # the deployment, not the file: say so
        return (
            f"Could not {op} '{path}': the storage is misconfigured ({exc.fix}). Retrying will not help; tell the user."
        )
    if isinstance(exc, NotFound):
        return not_found(path)
    if isinstance(exc, InvalidPath | TenantError | BinaryFile | SkillError):
        return str(exc)
    if isinstance(exc, ReadOnly):
        return f"Permission denied: '{path}' is read-only. Write your files under /workspace."
    if isinstance(exc, AccessDenied):
        return f"Permission denied: the storage refused to {op} '{path}'."
    if isinstance(exc, Conflict):
        return (
            f"File '{path}' was changed by someone else since it was read. "
            "Read it again, then retry the edit on the current content."
        )
    if isinstance(exc, FileTooLarge):
        return f"File '{path}' is too large to {op} ({exc})."
    if isinstance(exc, StoreUnavailable):
        return f"The storage is unavailable: could not {op} '{path}' after retries. Try again shortly."
    if isinstance(exc, S3SkillsError):
        return f"Could not {op} '{path}': {exc}"
    logger.exception("unexpected error in %s of %s", op, path, exc_info=exc)
    return f"Could not {op} '{path}': internal error ({type(exc).__name__})."


def op_error(exc: BaseException, path: str, op: str) -> str:
    """deepagents' `FileOperationError` code when one fits (upload/download), else a message."""
    if isinstance(exc, BucketNotFound | CredentialsError):
        return message(exc, path, op)
    if isinstance(exc, NotFound):
        return "file_not_found"
    if isinstance(exc, ReadOnly | AccessDenied):
        return "permission_denied"
    if isinstance(exc, InvalidPath | TenantError):
        return "invalid_path"
    return message(exc, path, op)
