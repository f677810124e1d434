"""Time a fresh reader's index on `latest` and on a channel, at several library sizes.

    python bench/channel_index.py                    # 1,000 and 10,000 skills
    python bench/channel_index.py --sizes 200 --repeat 3

Each size: a versioned in-memory bucket gets a library of that many skills (one push), a
channel `production` made from it, and a newer push of one skill (so the channel serves an
older `SKILL.md` of it). Then a new `SkillLibrary` (nothing cached) builds its index, on
`latest` and on the channel: the median wall time and the S3 requests of each are printed
as JSON. Request counts are pinned by `tests/test_channel_serving.py`; this measures time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from s3skills._loop import run_sync
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.versions.channels import Channel, acurrent_skills, awrite_channel
from s3skills.storage import RequestCounter
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, builders
from s3skills.transfer import apush_tree

LAYOUT = KeyLayout()
ANA = Tenant(user_id="ana")


def library(root: Path, count: int) -> Path:
    for i in range(count):
        folder = root / f"cat{i % 4}" / f"skill-{i:05d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(builders.skill_md(f"skill-{i:05d}", f"Skill number {i}"))
    return root


def measure(count: int, repeat: int) -> dict[str, object]:
    store = MemoryObjectStore(versioning=True)
    prefix = LAYOUT.user_prefix("ana")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run_sync(apush_tree(store, library(root / "lib", count), prefix, concurrency=64))
        skills = run_sync(acurrent_skills(store, prefix))
        run_sync(awrite_channel(store, LAYOUT.channels_prefix(prefix), Channel("production", skills), actor="bench"))
        one = root / "one" / "cat0" / "skill-00000"
        one.mkdir(parents=True)
        (one / "SKILL.md").write_text(builders.skill_md("skill-00000", "A newer description"))
        run_sync(apush_tree(store, root / "one", prefix, replace=True))
    out: dict[str, object] = {"skills": count}
    for name, channel in (("latest", None), ("channel", "production")):
        times, requests = [], 0
        for _ in range(repeat):
            counter = RequestCounter()
            store.add_request_hook(counter)
            started = time.perf_counter()
            SkillLibrary(store, Config(layout=LAYOUT, channel=channel), tenant=lambda: ANA).index()
            times.append(time.perf_counter() - started)
            store.remove_request_hook(counter)
            requests = counter.total
        out[name] = {"median_ms": round(statistics.median(times) * 1000, 1), "requests": requests}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="library sizes, comma separated")
    parser.add_argument("--repeat", type=int, default=5, help="fresh readers timed per size and channel")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(json.dumps([measure(n, max(1, args.repeat)) for n in sizes], indent=2))


if __name__ == "__main__":
    main()
