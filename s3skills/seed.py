"""Seed a bucket with the bundled example library (the demo, the LocalStack hook, tests).

    python -m s3skills.seed --endpoint-url http://localhost:4566 --bucket s3skills --user ana

creates the bucket if it is missing and pushes `s3skills.examples.LIBRARY` to the
user's library (`users/ana/skills/...` in the default layout, `ana/skills/...` with
`--layout seeds`), or with `--shared` to the organisation library named by `--user`
(`shared/NAME/skills/...`). Pushing again uploads only what changed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from urllib.parse import urlsplit

import aioboto3
import click

from s3skills.aio import io_bound, sync_method
from s3skills.examples import LIBRARY
from s3skills.layout import KeyLayout
from s3skills.options import option
from s3skills.paths import check_identity
from s3skills.storage import ObjectStore, S3ObjectStore
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
_ENDPOINT_VARIABLES = option("endpoint_url").env  # the table every entry point reads


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


def session_for(
    endpoint_url: str | None, region_name: str | None = None, *, profile: str | None = None
) -> aioboto3.Session:
    """An aioboto3 session for `endpoint_url`.

    Credentials come from `profile` when given, else the usual AWS chain (environment,
    profile, ...). For a loopback endpoint with no credentials in the environment
    (`AWS_ACCESS_KEY_ID` or `AWS_PROFILE`), LocalStack's dummy `test`/`test` keys are used
    instead, so a local server works with no setup and the instance-metadata service is
    never asked.

    Raises:
        botocore.exceptions.ProfileNotFound: `profile` is not configured.
    """
    region = region_name or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    if profile is not None:
        return aioboto3.Session(profile_name=profile, region_name=region)
    configured = os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")
    if is_loopback_url(endpoint_url) and not configured:
        return aioboto3.Session(
            aws_access_key_id=LOCAL_ACCESS_KEY, aws_secret_access_key=LOCAL_SECRET_KEY, region_name=region
        )
    return aioboto3.Session(region_name=region)


def _default_endpoint() -> str | None:
    return next((os.environ[v] for v in _ENDPOINT_VARIABLES if os.environ.get(v)), None)


@click.command(
    "seed",
    help="Create a bucket if needed and push the bundled example skills library to it.",
)
@click.option(
    "--endpoint-url",
    metavar="URL",
    help="An S3-compatible endpoint (LocalStack, SeaweedFS, moto); omit for AWS "
    "(env S3SKILLS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL).",
)
@click.option("--bucket", metavar="NAME", help="The bucket to seed, created if missing (env S3SKILLS_BUCKET)")
@click.option("--user", metavar="ID", help="The user whose library is seeded (env S3SKILLS_USER)")
@click.option("--shared", is_flag=True, help="Seed the shared organisation library named by --user instead")
@click.option(
    "--layout",
    "layout_name",
    type=click.Choice(["users", "seeds"]),
    envvar="S3SKILLS_LAYOUT",
    default="users",
    show_default=True,
    help="The key layout (env S3SKILLS_LAYOUT).",
)
@click.option("--region", metavar="NAME", help=f"The region (default: AWS_REGION or {DEFAULT_REGION})")
@click.option("--json", "as_json", is_flag=True, help="Print the push report as JSON")
def _command(
    endpoint_url: str | None,
    bucket: str | None,
    user: str | None,
    shared: bool,
    layout_name: str,
    region: str | None,
    as_json: bool,
) -> int:
    layout = KeyLayout.named(layout_name)
    endpoint_url = endpoint_url or _default_endpoint()
    bucket = bucket or os.environ.get("S3SKILLS_BUCKET")
    user = user or os.environ.get("S3SKILLS_USER")
    if not bucket or not user:
        _fail("--bucket and --user are required")
        return 1
    try:
        session = session_for(endpoint_url, region)
        store = S3ObjectStore(bucket, endpoint_url=endpoint_url, region_name=session.region_name, session=session)
        report = seed_example_library(store, user, shared=shared, layout=layout, create_bucket=True)
    except Exception as exc:
        _fail(" ".join(str(exc).split()) or type(exc).__name__)
        return 1
    if as_json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2, default=str))
    else:
        where = f"s3://{bucket}/{library_prefix(user, shared=shared, layout=layout)}"
        print(
            f"Seeded {len(report.skills)} skills into {where}: {len(report.uploaded)} files uploaded "
            f"({report.bytes_uploaded} bytes), {len(report.skipped)} already up to date."
        )
    return 0


def _fail(message: str) -> None:
    print(f"s3skills seed: error: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m s3skills.seed`: 0 when seeded, 1 on an error, 2 on a usage error."""
    try:
        status = _command.main(argv, prog_name="python -m s3skills.seed", standalone_mode=False)
    except click.UsageError as exc:
        _fail(" ".join(exc.format_message().split()))
        return 2
    except click.Abort:
        _fail("interrupted")
        return 130
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
