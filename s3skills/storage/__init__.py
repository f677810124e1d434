"""The storage layer: the `ObjectStore` contract and its S3 implementation."""

from s3skills.storage.protocol import (
    ListPage,
    NotModified,
    ObjectBody,
    ObjectInfo,
    ObjectStore,
    RequestCounter,
    RequestHook,
)
from s3skills.storage.s3 import S3ObjectStore

__all__ = [
    "ListPage",
    "NotModified",
    "ObjectBody",
    "ObjectInfo",
    "ObjectStore",
    "RequestCounter",
    "RequestHook",
    "S3ObjectStore",
]
