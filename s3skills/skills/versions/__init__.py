"""Skill versions: history rebuilt from object versions, pins, and reads that check what they
fetched against a pin or a confirmed entry.

Imports the base and storage layers and `format/`: never the index, the library or a front end.
"""

__all__: list[str] = []
