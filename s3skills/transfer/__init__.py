"""Moving skills between a local folder and a library: scan, push, pull."""

from s3skills.transfer.localtree import Finding, Item, LocalTree, scan_tree
from s3skills.transfer.provenance import PULL_RECORD, SOURCE_KEY, source_of
from s3skills.transfer.pull import BACKUP_SUFFIX, apull_tree, pull_tree
from s3skills.transfer.push import MAX_FILE_BYTES, Progress, apush_tree, push_tree
from s3skills.transfer.reports import PullReport, PushRefused, PushReport

__all__ = [
    "BACKUP_SUFFIX",
    "MAX_FILE_BYTES",
    "PULL_RECORD",
    "SOURCE_KEY",
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
    "source_of",
]
