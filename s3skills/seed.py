"""Seed a bucket with the bundled example library (the demo, the LocalStack hook, tests).

    python -m s3skills.seed --endpoint-url http://localhost:4566 --bucket s3skills --user ana

creates the bucket if it is missing and pushes `s3skills.examples.LIBRARY` to the
user's library (`ana/skills/...`), or with `--shared NAME` to an organisation library
(`NAME/skills/...`). Pushing again uploads only what changed.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from urllib.parse import urlsplit

import aioboto3

from s3skills._loop import io_bound, sync_method
from s3skills.examples import LIBRARY
from s3skills.layout import KeyLayout
from s3skills.paths import check_identity
from s3skills.storage import S3ObjectStore as ObjectStore
from s3skills.transfer import PushReport, apush_tree

__all__ = [
    "LOCAL_ACCESS_KEY",
    "LOCAL_SECRET_KEY",
    "aseed_example_library",
    "is_loopback_url",
    "library_prefix",
    "main",
    "seed_example_library",
    "session_for",
]

LOCAL_ACCESS_KEY = "test"
"""Access key used for a loopback endpoint when none is configured (LocalStack's default)."""
LOCAL_SECRET_KEY = "test"  # noqa: S105 - a well-known dummy value, for local servers only
"""Secret key that goes with `LOCAL_ACCESS_KEY`."""
DEFAULT_REGION = "us-east-1"
_ENDPOINT_VARIABLES = ("S3SKILLS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def library_prefix(user_id: str, *, shared: bool = False, layout: KeyLayout | None = None) -> str:
    """The key prefix of a user's library, or of the shared library named `user_id`.

    Raises:
        InvalidPath: The id is not made of allow-listed characters.
    """
    layout = layout or KeyLayout()
    if shared:
        return layout.shared_prefix(check_identity(user_id.strip("/"), "shared library name"))
    return layout.user_prefix(check_identity(user_id, "user id"))


@io_bound
async def aseed_example_library(
    store: ObjectStore,
    user_id: str,
    *,
    shared: bool = False,
    layout: KeyLayout | None = None,
    create_bucket: bool = False,
) -> PushReport:
    """Push the bundled example library to a user's (or the shared) library.

    Args:
        store: The bucket.
        user_id: The user (`ana` -> `ana/skills/`), or with `shared` the shared
            library's name (`org` -> `org/skills/`).
        shared: Seed the organisation library instead of a user's.
        layout: Key templates; the defaults are the project's.
        create_bucket: Create the bucket first if it does not exist.

    Returns:
        The push report (what was uploaded or already up to date).
    """
    prefix = library_prefix(user_id, shared=shared, layout=layout)
    if create_bucket:
        await store.acreate_bucket()
    return await apush_tree(store, LIBRARY, prefix)


seed_example_library = sync_method(aseed_example_library)
seed_example_library.__qualname__ = "seed_example_library"


def is_loopback_url(url: str | None) -> bool:
    """True when `url` names this machine (`localhost`, 127.0.0.0/8, ::1)."""
    if not url:
        return False
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def session_for(endpoint_url: str | None, region_name: str | None = None) -> aioboto3.Session:
    """An aioboto3 session for `endpoint_url`.

    Credentials come from the usual AWS chain (environment, profile, ...). For a
    loopback endpoint with no credentials in the environment (`AWS_ACCESS_KEY_ID` or
    `AWS_PROFILE`), LocalStack's dummy `test`/`test` keys are used instead, so a
    local server works with no setup and the instance-metadata service is never asked.
    """
    region = region_name or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    configured = os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")
    if is_loopback_url(endpoint_url) and not configured:
        return aioboto3.Session(
            aws_access_key_id=LOCAL_ACCESS_KEY, aws_secret_access_key=LOCAL_SECRET_KEY, region_name=region
        )
    return aioboto3.Session(region_name=region)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m s3skills.seed",
        description="Create a bucket if needed and push the bundled example skills library to it.",
    )
    parser.add_argument(
        "--endpoint-url",
        default=next((os.environ[v] for v in _ENDPOINT_VARIABLES if os.environ.get(v)), None),
        help="S3-compatible endpoint (LocalStack, SeaweedFS, moto); omit for AWS "
        "(env S3SKILLS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)",
    )
    parser.add_argument(
        "--bucket", default=os.environ.get("S3SKILLS_BUCKET"), help="bucket to seed (created if missing)"
    )
    parser.add_argument(
        "--user", default=os.environ.get("S3SKILLS_USER"), help="user id whose library is seeded (<user>/skills/)"
    )
    parser.add_argument(
        "--shared", action="store_true", help="seed the shared organisation library named by --user instead"
    )
    parser.add_argument("--region", default=None, help=f"region (default: AWS_REGION or {DEFAULT_REGION})")
    parser.add_argument("--json", action="store_true", help="print the push report as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m s3skills.seed`. Returns the exit code."""
    args = _parser().parse_args(argv)
    if not args.bucket or not args.user:
        print("s3skills seed: error: --bucket and --user are required", file=sys.stderr)
        return 1
    try:
        session = session_for(args.endpoint_url, args.region)
        store = ObjectStore(
            args.bucket, endpoint_url=args.endpoint_url, region_name=session.region_name, session=session
        )
        report = seed_example_library(store, args.user, shared=args.shared, create_bucket=True)
    except Exception as exc:
        print(f"s3skills seed: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2, default=str))
    else:
        where = f"s3://{args.bucket}/{library_prefix(args.user, shared=args.shared)}"
        print(
            f"Seeded {len(report.skills)} skills into {where}: {len(report.uploaded)} files uploaded "
            f"({report.bytes_uploaded} bytes), {len(report.skipped)} already up to date."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
