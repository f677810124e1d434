"""The index of a library: the catalog (cache, single flight, verify), reading `SKILL.md` heads,
applying a LIST, the manifest and digest book under `.s3skills/` (derived data, bounded and
schema-checked), and the writers that keep the manifest current.

Imports the base and storage layers, `format/`, `ranking/` (the sketch) and `versions/`.
"""

__all__: list[str] = []
