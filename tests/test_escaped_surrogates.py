"""A frontmatter that spells an emoji as a JSON-style pair of escapes (`"\\ud83c\\udf89"`).

`json.dumps` writes a description that way, and JSON is YAML, so tools that generate
`SKILL.md` files do. PyYAML kept the two halves as two code points, which UTF-8 cannot
encode: the library's manifest could then never be written, and every index of that
library paid a whole LIST (16 requests a prompt at 10,000 skills instead of 1).
"""

from __future__ import annotations

import json

from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillCatalog, SkillLibrary, parse_skill_md
from s3skills.skills.format.frontmatter import frontmatter_json
from s3skills.skills.format.yaml12 import mend_surrogates
from s3skills.storage import RequestCounter
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore

LAYOUT = KeyLayout()
ANA = Tenant(user_id="ana")
PREFIX = "users/ana/skills/"
MANIFEST = "users/ana/.s3skills/manifest.json"
PARTY = "Plan the launch party \U0001f389 with the team"


def generated_skill_md(name: str, description: str) -> bytes:
    """A SKILL.md as a generator writes it: the description quoted by `json.dumps` (ASCII escapes)."""
    return f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n# {name}\n\nSteps.\n".encode()


def library(store: MemoryObjectStore) -> SkillLibrary:
    config = Config(layout=LAYOUT)
    catalog = SkillCatalog(
        store,
        limits=config.limits,
        manifest_key=LAYOUT.manifest_key,
        verify="interval",
        verify_interval=config.verify_interval,
    )
    return SkillLibrary(store, config, catalog=catalog, tenant=lambda: ANA)


def test_an_escaped_surrogate_pair_is_read_as_the_character_it_spells() -> None:
    data = generated_skill_md("party", PARTY)
    assert b"\\ud83c\\udf89" in data  # what json.dumps wrote
    assert parse_skill_md(data).metadata.description == PARTY
    assert frontmatter_json(data)["description"] == PARTY


def test_a_lone_escaped_surrogate_becomes_the_replacement_character() -> None:
    data = b'---\nname: half\ndescription: "half a pair \\ud800 here"\n---\n\nBody.\n'
    description = parse_skill_md(data).metadata.description
    assert description == "half a pair \ufffd here"
    description.encode("utf-8")  # encodable: a manifest can hold it
    assert mend_surrogates({"k\udfff": ["\ud83c\udf89", 1]}) == {"k\ufffd": ["\U0001f389", 1]}


def test_a_library_holding_an_escaped_emoji_keeps_its_manifest_and_indexes_in_one_get() -> None:
    store = MemoryObjectStore()
    store.put_object(f"{PREFIX}party/SKILL.md", generated_skill_md("party", PARTY))
    for i in range(5):
        store.put_object(f"{PREFIX}plain-{i}/SKILL.md", generated_skill_md(f"plain-{i}", f"Plain skill {i}"))
    first = library(store)
    first.index()
    first.flush()  # the manifest the cold index rebuilt is written after the answer
    assert MANIFEST in set(store.keys())
    counter = RequestCounter()
    store.add_request_hook(counter)
    skills = library(store).index()  # another process: the manifest alone
    assert {s.id: s.metadata.description for s in skills}["party"] == PARTY
    assert counter.counts == {"GetObject": 1}
