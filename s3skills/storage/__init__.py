"""The storage layer: the `ObjectStore` contract and its S3 implementation."""

from s3skills.storage.protocol import (
    ListPage,
    ObjectBody,
    ObjectInfo,
    ObjectStore,
    ObjectVersion,
    RequestCounter,
    RequestHook,
    VersioningStatus,
    sort_versions,
)
from s3skills.storage.s3 import S3ObjectStore

__all__ = [
    "ListPage",
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
