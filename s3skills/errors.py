"""The project's exceptions and the one table that maps S3 error codes to them.

Every exception derives from `S3SkillsError` and, where one fits, from the builtin
that callers already catch (`NotFound` is a `FileNotFoundError`), as cloudpathlib does.
Messages never carry a bucket name or an object key: the layer that knows the
virtual path (the backend) writes the message the agent sees.

    S3SkillsError
    ├── InvalidPath (ValueError)       a path or id outside the rules; never resolved
    ├── TenantError (LookupError)      no user/thread for the call, or ids a layout refuses
    │   └── UserNotResolved            an agent run with no user (refused before the model is called)
    ├── ConfigurationError             the deployment is wrong, not the moment: `fix` says what to do
    ├── NotFound (FileNotFoundError)
    │   └── BucketNotFound             (also a ConfigurationError)
    ├── AccessDenied (PermissionError) the store said 403 (never reported as NotFound; a ConfigurationError)
    ├── ReadOnly (PermissionError)     a write to /skills or /ticket
    ├── Conflict                       a conditional write lost (IfMatch / IfNoneMatch)
    ├── FileTooLarge                   over a size limit (`Limits`)
    ├── LimitExceeded                  over a per-call limit; the message says how to narrow
    ├── BinaryFile                     bytes that are not text where text is needed
    ├── SkillError                     unknown, disabled, ambiguous or clashing skill
    └── StoreError (OSError)
        ├── StoreUnavailable           unreachable or throttled, after retries
        ├── CredentialsError           (also a ConfigurationError)
        └── EndpointError              not an S3 endpoint, or TLS on a plain port (also a ConfigurationError)

Configuration errors (`ConfigurationError`: a missing bucket, no or rejected credentials,
access denied, an endpoint that is not S3 or does not speak TLS) do not go away by trying
again; servers fail fast on them and say `fix`.
`StoreUnavailable` (5xx, throttling, a network fault) is the transient one: "try again".
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AccessDenied",
    "BinaryFile",
    "BucketNotFound",
    "ConfigurationError",
    "Conflict",
    "CredentialsError",
    "EndpointError",
    "FileTooLarge",
    "InvalidPath",
    "LimitExceeded",
    "NotFound",
    "ReadOnly",
    "S3SkillsError",
    "SkillError",
    "StoreError",
    "StoreUnavailable",
    "TenantError",
    "UserNotResolved",
    "is_transient",
    "translate_error",
]


class S3SkillsError(Exception):
    """Base class of every error raised by s3skills."""


class InvalidPath(S3SkillsError, ValueError):
    """A virtual path or an identity part was rejected at the boundary."""


class TenantError(S3SkillsError, LookupError):
    """The call does not know who it acts for (no user id, thread id, ...)."""


class UserNotResolved(TenantError):
    """An agent run whose user cannot be resolved: an application bug, refused before the model runs.

    Pass the user in the run's context (`context={"user_id": ...}`), check the backend's
    `TenantResolver` (on LangGraph Server: the auth handler), or build the backend with
    `S3Backend(..., allow_anonymous=True)` to allow user-less runs, which have no library.
    """


class ConfigurationError(S3SkillsError):
    """The deployment is misconfigured (bucket, credentials, permissions): retrying will not help.

    `fix` is one sentence saying what to change, for a person (a CLI line, a server's exit).
    """

    @property
    def fix(self) -> str:
        """What to change, in one sentence."""
        return "check the bucket, the endpoint and the credentials"


class NotFound(S3SkillsError, FileNotFoundError):
    """The object (or bucket) does not exist, or is not visible to the caller."""


class BucketNotFound(NotFound, ConfigurationError):
    """The bucket does not exist."""

    @property
    def fix(self) -> str:
        return (
            "the bucket does not exist at this endpoint: check --bucket (S3SKILLS_BUCKET) and --endpoint-url "
            "(S3SKILLS_ENDPOINT_URL), or create it with 's3skills push --create-bucket DIR'"
        )


class AccessDenied(ConfigurationError, PermissionError):
    """The store refused the request (403). Never treated as a missing object."""

    @property
    def fix(self) -> str:
        return (
            "access denied: the credentials may not use this bucket; grant them s3:ListBucket, s3:GetObject "
            "(and s3:PutObject to write) on it, or use other credentials (--profile, AWS_PROFILE)"
        )


class ReadOnly(S3SkillsError, PermissionError):
    """A write was attempted on a read-only mount."""


class Conflict(S3SkillsError):
    """A conditional write lost: the object changed (IfMatch) or exists (IfNoneMatch)."""


class FileTooLarge(S3SkillsError):
    """The object is larger than the operation allows."""


class BinaryFile(S3SkillsError):
    """A binary file was asked for as text."""


class LimitExceeded(S3SkillsError):
    """A call would do more work than one call may (`Limits`); the message says how to narrow it."""


class SkillError(S3SkillsError):
    """A skill cannot be loaded or used (unknown id, name clash, missing tools...)."""


class StoreError(S3SkillsError, OSError):
    """Any other failure of the object store."""


class StoreUnavailable(StoreError):
    """The store did not answer usefully after retries (5xx, throttling, network)."""


class CredentialsError(StoreError, ConfigurationError):
    """No usable credentials were found, or the store rejected them."""

    @property
    def fix(self) -> str:
        if "no AWS credentials" in str(self):
            return (
                "no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or name a profile with --profile (AWS_PROFILE)"
            )
        return f"the store rejected the credentials ({self}): check the access key, the secret and the endpoint"


NOT_S3 = "not an S3 endpoint"
NO_TLS = "does not speak TLS"


class EndpointError(StoreError, ConfigurationError):
    """The endpoint is not what was configured: not S3 (a web server, SeaweedFS's master or
    filer port answering a bucket listing with a bare 404), or `https://` on a plain-HTTP port,
    or a certificate the client does not trust."""

    @property
    def fix(self) -> str:
        text = str(self)
        if NOT_S3 in text:
            return (
                "the endpoint answered a bucket listing with a bare 404, as a web server does, not S3: point "
                "--endpoint-url (S3SKILLS_ENDPOINT_URL) at the S3 port (SeaweedFS: -s3.port, 8333 by default, "
                "not the master's 9333 or the filer's 8888; MinIO: 9000)"
            )
        if NO_TLS in text:
            return (
                "the endpoint does not speak TLS: write http:// instead of https:// in --endpoint-url "
                "(S3SKILLS_ENDPOINT_URL), or use the port that serves TLS"
            )
        return (
            f"TLS to the endpoint failed ({text}): check the endpoint's certificate, or give its CA bundle "
            "with AWS_CA_BUNDLE"
        )


def is_transient(exc: BaseException) -> bool:
    """Whether trying again later may succeed: the store was unreachable or throttled.

    Configuration errors (`ConfigurationError`) and everything else are not transient.
    """
    return isinstance(exc, StoreUnavailable)


# One table: S3 error code (or HTTP status as a string) -> exception class.
_CODE_TABLE: dict[str, type[S3SkillsError]] = {
    "NoSuchKey": NotFound,
    "NoSuchBucket": BucketNotFound,
    "NotFound": NotFound,
    "404": NotFound,
    "AccessDenied": AccessDenied,
    "AllAccessDisabled": AccessDenied,
    "AccountProblem": AccessDenied,
    "403": AccessDenied,
    "InvalidAccessKeyId": CredentialsError,
    "SignatureDoesNotMatch": CredentialsError,
    "ExpiredToken": CredentialsError,
    "InvalidToken": CredentialsError,
    "PreconditionFailed": Conflict,
    "412": Conflict,
    "ConditionalRequestConflict": Conflict,
    "OperationAborted": Conflict,
    "SlowDown": StoreUnavailable,
    "ServiceUnavailable": StoreUnavailable,
    "InternalError": StoreUnavailable,
    "RequestTimeout": StoreUnavailable,
    "500": StoreUnavailable,
    "502": StoreUnavailable,
    "503": StoreUnavailable,
    "504": StoreUnavailable,
    "EntityTooLarge": FileTooLarge,
}


def translate_error(exc: BaseException, operation: str) -> S3SkillsError:
    """Map a botocore/aiohttp exception to the project's exception.

    Args:
        exc: What the S3 client raised.
        operation: The store operation (`get`, `put`, `list`, ...) for the message.

    Returns:
        An exception to raise with `raise translate_error(e, op) from e`. The
        message names the operation and the S3 error code, never the key.
    """
    if isinstance(exc, S3SkillsError):
        return exc
    # Imported here so that importing the error types stays cheap.
    from botocore import exceptions as bex

    if isinstance(exc, bex.ClientError):
        error: dict[str, Any] = exc.response.get("Error", {}) or {}
        meta: dict[str, Any] = exc.response.get("ResponseMetadata", {}) or {}
        code = str(error.get("Code") or "")
        status = str(meta.get("HTTPStatusCode") or "")
        if operation == "list" and status == "404" and code in ("", "404", "NotFound"):
            # S3 answers a listing of a missing bucket NoSuchBucket; only a web server says a bare 404.
            return EndpointError(f"{operation}: {NOT_S3} (a bare 404 to a bucket listing)")
        cls = _CODE_TABLE.get(code) or _CODE_TABLE.get(status) or StoreError
        label = code or status or "unknown error"
        return cls(f"{operation}: the store answered {label}")
    if isinstance(exc, bex.SSLError):
        if "WRONG_VERSION_NUMBER" in str(exc) or "wrong version number" in str(exc):
            return EndpointError(f"{operation}: the endpoint {NO_TLS} (https:// on a plain-HTTP port)")
        return EndpointError(f"{operation}: TLS failed ({type(exc).__name__})")
    if isinstance(exc, bex.NoCredentialsError | bex.PartialCredentialsError):
        return CredentialsError(f"{operation}: no AWS credentials were found")
    if isinstance(exc, bex.ProfileNotFound):
        return CredentialsError(f"{operation}: {exc}")
    if isinstance(
        exc,
        bex.EndpointConnectionError
        | bex.ConnectionClosedError
        | bex.ReadTimeoutError
        | bex.ConnectTimeoutError
        | bex.HTTPClientError,
    ):
        return StoreUnavailable(f"{operation}: the store could not be reached ({type(exc).__name__})")
    if type(exc).__name__ in ("ClientPayloadError", "ServerDisconnectedError", "IncompleteReadError"):
        return StoreUnavailable(f"{operation}: the connection broke mid-response ({type(exc).__name__})")
    if isinstance(exc, TimeoutError | ConnectionError):
        return StoreUnavailable(f"{operation}: the store could not be reached ({type(exc).__name__})")
    return StoreError(f"{operation}: {type(exc).__name__}")
