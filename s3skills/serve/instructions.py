"""The MCP server's `instructions`: what a host's model reads about the server at start.

A client that declares the skills extension reads about the extension's methods
(`EXTENSION_FACE`); any other client reads about the tools and prompts (`TOOLS_FACE`),
which is what Claude Code, Cursor and VS Code use. Where the client is not known
(`server/discover`), `BOTH_FACES` describes both, the tools first.
"""

from __future__ import annotations

__all__ = ["BOTH_FACES", "EXTENSION_FACE", "TOOLS_FACE"]

EXTENSION_FACE = (
    "Skills of the signed-in user, as skill:// resources (the skills extension). Call skills/list for the "
    "entries (frontmatter and digests), then resources/read the files you need."
)
"""For a client with the skills extension (or a server without the tools face)."""

TOOLS_FACE = (
    "Skills of the signed-in user: each is a folder of instructions (SKILL.md) and files for one kind of "
    "task. Call list_skills (with a query to rank them) to find one, load_skill(name) to read its "
    "instructions and file list before following it, and read_skill_file(name, path) for the files they "
    "mention. Each skill is also a prompt (prompts/list) whose message holds its SKILL.md."
)
"""For a client without the extension: the tools and prompts."""

BOTH_FACES = (
    f"{TOOLS_FACE} Clients with the skills extension (io.modelcontextprotocol/skills) can use "
    "skills/list and resources/read on skill:// URIs instead."
)
"""When the client is not known."""
