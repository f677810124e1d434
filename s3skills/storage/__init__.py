"""The storage layer: the `ObjectStore` contract and its S3 implementation.

`S3ObjectStore` is imported on first use (it pulls in aioboto3), so code that only
needs the contract, such as the CLI's `--help`, stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from s3skills.storage.protocol import (
    ListPage,
    NotModified,
    ObjectBody,
    ObjectInfo,
    ObjectStore,
    ObjectVersion,
    RequestCounter,
    RequestHook,
    VersioningStatus,
    sort_versions,
)

if TYPE_CHECKING:
    from s3skills.storage.s3 import S3ObjectStore

__all__ = [
    "ListPage",
    "NotModified",
    "ObjectBody",
    "ObjectInfo",
    "ObjectStore",
    "ObjectVersion",
    "RequestCounter",
    "RequestHook",
    "S3ObjectStore",
    "VersioningStatus",
    "sort_versions",
]


def __getattr__(name: str) -> Any:
    if name == "S3ObjectStore":
        from s3skills.storage.s3 import S3ObjectStore

        return S3ObjectStore
    raise AttributeError(f"module 's3skills.storage' has no attribute {name!r}")
