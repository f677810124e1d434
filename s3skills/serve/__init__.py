"""Servers in front of the skill libraries: MCP (the skills extension, SEP-2640).

`SkillsServer` serves a `SkillSource` over MCP; `s3skills.serve.mcp` runs it over stdio
or streamable HTTP (`python -m s3skills.serve.mcp --help`). Importing this package needs
the `mcp` extra (`pip install "s3skills[mcp]"`).
"""

from s3skills.serve.auth import JsonFileTokenVerifier, user_of_token
from s3skills.serve.catalog_source import CatalogSkillSource
from s3skills.serve.server import EXTENSION_ID, SkillsServer
from s3skills.serve.source import SkillFile, SkillSource

__all__ = [
    "EXTENSION_ID",
    "CatalogSkillSource",
    "JsonFileTokenVerifier",
    "SkillFile",
    "SkillSource",
    "SkillsServer",
    "user_of_token",
]
