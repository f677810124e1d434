"""How big the `.s3skills/` documents of real libraries are: what the decode caps are sized from.

Each repository of the real-skills corpus (`s3skills.testing.corpus`) is pushed into a versioned
in-memory bucket through the project's own writers (push writes the manifest, the digest book
and the version records), a `production` channel is made of it as `channel create --from
latest` would, and each document's bytes and values (`{ [ , :`, what
`s3skills.storage.documents.count_nodes` counts) are measured. Printed: per repository, then
per skill (the corpus's mean and the heaviest repository's mean), projected to 10,000 and
20,000 skills, beside each kind's caps.

    python bench/document_sizes.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from s3skills._loop import run_sync
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.index.digests import BOOK_DOCUMENT, book_key
from s3skills.skills.index.manifest import MANIFEST_DOCUMENT
from s3skills.skills.versions.channels import CHANNEL_DOCUMENT, Channel, acurrent_skills, awrite_channel
from s3skills.storage.documents import DocumentKind, count_nodes
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore
from s3skills.testing.corpus import real_repositories
from s3skills.transfer import apush_tree

LAYOUT = KeyLayout()
KINDS: dict[str, DocumentKind] = {"channel": CHANNEL_DOCUMENT, "manifest": MANIFEST_DOCUMENT, "book": BOOK_DOCUMENT}


def measure(folders: list[Path], user: str) -> tuple[int, dict[str, tuple[int, int]]]:
    """(skills, kind -> (bytes, values)) of one repository's library."""
    store = MemoryObjectStore(versioning=True)
    prefix = LAYOUT.user_prefix(user)
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            if not (Path(tmp) / folder.name).exists():
                shutil.copytree(folder, Path(tmp) / folder.name)
        run_sync(apush_tree(store, Path(tmp), prefix, concurrency=32))
    skills = run_sync(acurrent_skills(store, prefix, LAYOUT.records_prefix(prefix)))
    channel = Channel("production", skills)
    run_sync(awrite_channel(store, LAYOUT.channels_prefix(prefix), channel, actor="arn:aws:iam::123456789012:user/x"))
    SkillLibrary(store, Config(layout=LAYOUT), tenant=lambda: Tenant(user, "t")).index()
    keys = {
        "channel": LAYOUT.channels_prefix(prefix) + "production.json",
        "manifest": LAYOUT.manifest_key(prefix),
        "book": book_key(LAYOUT, prefix),
    }
    out = {}
    for kind, key in keys.items():
        data = store._get(key).data
        out[kind] = (len(data), count_nodes(data))
    return len(skills), out


def main() -> int:
    totals = {kind: [0, 0] for kind in KINDS}
    heaviest = dict.fromkeys(KINDS, (0.0, 0.0))
    skills_total = 0
    for repo in real_repositories():
        count, sizes = measure(repo.skill_folders(), repo.name.replace("/", "-")[:60])
        skills_total += count
        row = "  ".join(f"{k} {b:>8} B {n:>6} v" for k, (b, n) in sizes.items())
        print(f"{repo.name:<40} {count:>4} skills  {row}")
        for kind, (size, nodes) in sizes.items():
            totals[kind][0] += size
            totals[kind][1] += nodes
            heaviest[kind] = max(heaviest[kind], (size / count, nodes / count))
    print(f"\n{skills_total} skills; per skill (mean | heaviest repository), projected, and the caps:")
    for kind, (size, nodes) in totals.items():
        mean = (size / skills_total, nodes / skills_total)
        top = heaviest[kind]
        cap = KINDS[kind]
        print(
            f"{kind:<9} {mean[0]:>6.0f} B {mean[1]:>5.1f} v | {top[0]:>6.0f} B {top[1]:>5.1f} v;"
            f" 10,000 heaviest: {top[0] * 1e4 / 1e6:5.1f} MB {top[1] * 1e4:>9,.0f} v;"
            f" 20,000 heaviest: {top[0] * 2e4 / 1e6:5.1f} MB {top[1] * 2e4:>9,.0f} v;"
            f" caps {cap.max_bytes / 1e6:5.1f} MB {cap.max_nodes:>9,} v"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
