"""Moving skills between a local folder and a library: scan, push, pull."""

from s3skills.transfer.localtree import Finding, Item, LocalTree, scan_tree
from s3skills.transfer.trees import (
    MAX_FILE_BYTES,
    Progress,
    PullReport,
    PushRefused,
    PushReport,
    apull_tree,
    apush_tree,
    pull_tree,
    push_tree,
)

__all__ = [
    "MAX_FILE_BYTES",
    "Finding",
    "Item",
    "LocalTree",
    "Progress",
    "PullReport",
    "PushRefused",
    "PushReport",
    "apull_tree",
    "apush_tree",
    "pull_tree",
    "push_tree",
    "scan_tree",
]
