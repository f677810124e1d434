"""The bench's workload: a generated skills library and workspace, and the naive baseline.

The baseline (`NaiveS3`) is what the seed scripts did: sequential boto3 calls, one GET
per file, no cache.
"""

from __future__ import annotations

from typing import Any

import yaml

from s3skills.layout import KeyLayout
from s3skills.testing import make_client

USER, THREAD = "bench-user", "bench-thread"
LAYOUT = KeyLayout()
WS_PREFIX = LAYOUT.workspace_prefix(USER, THREAD)
SKILLS_PREFIX = LAYOUT.user_prefix(USER)
NEEDLE = "needle-7f3a"
CATEGORIES = ("legal", "finance", "writing", "data", "ops", "sales", "support", "hr", "design", "research")


# -- the library to benchmark: seeded straight into moto (not through the proxy) ----------


def skill_md(category: str, name: str, index: int) -> str:
    body = "\n".join(f"Step {i}: do the {name} thing carefully, line {i}." for i in range(40))
    return (
        "---\n"
        f"name: {name}\n"
        f"description: Skill number {index} of the {category} category; use it when the user asks "
        f"for {name.replace('-', ' ')}.\n"
        "version: 1.0.0\n"
        f"tags: [{category}, bench]\n"
        "---\n\n"
        f"# {name}\n\n{body}\n"
    )


def workspace_file(index: int, lines: int = 60) -> str:
    text = [f"file {index} line {i}: lorem ipsum dolor sit amet, consectetur adipiscing elit." for i in range(lines)]
    if index % 10 == 0:
        text[lines // 2] = f"file {index}: here is the {NEEDLE} we are looking for"
    return "\n".join(text) + "\n"


def seed(client: Any, bucket: str, skills: int, files: int) -> dict[str, int]:
    count = 0
    for i in range(skills):
        category = CATEGORIES[i % len(CATEGORIES)]
        name = f"skill-{i:04d}"
        home = f"{SKILLS_PREFIX}{category}/{name}/"
        client.put_object(Bucket=bucket, Key=home + "SKILL.md", Body=skill_md(category, name, i).encode())
        client.put_object(Bucket=bucket, Key=home + "references/guide.md", Body=b"# Guide\n\nMore detail.\n")
        count += 2
    for i in range(files):
        sub = "notes/" if i % 3 == 0 else ""
        client.put_object(Bucket=bucket, Key=f"{WS_PREFIX}{sub}file-{i:04d}.md", Body=workspace_file(i).encode())
        count += 1
    return {"skills": skills, "workspace_files": files, "objects": count}


# -- the baseline ----------------------------------------------------------------------------


class NaiveS3:
    """The seeds' approach: sequential boto3 calls, one GET per file, no cache."""

    def __init__(self, endpoint_url: str, bucket: str, access_key: str, secret_key: str) -> None:
        self.bucket = bucket
        self.client = make_client(endpoint_url, access_key=access_key, secret_key=secret_key)

    def keys(self, prefix: str) -> list[str]:
        out: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return out

    def get_text(self, key: str) -> str:
        return str(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode("utf-8"))

    def grep(self, prefix: str, pattern: str) -> list[tuple[str, int]]:
        matches = []
        for key in self.keys(prefix):
            for number, line in enumerate(self.get_text(key).splitlines(), 1):
                if pattern in line:
                    matches.append((key, number))
        return matches

    def skills_index(self, prefix: str) -> list[dict[str, Any]]:
        index = []
        for key in self.keys(prefix):
            if key.endswith("/SKILL.md"):
                text = self.get_text(key)
                _, front, _ = text.split("---", 2)
                index.append(yaml.safe_load(front))
        return index

    def read(self, key: str) -> str:
        return self.get_text(key)
