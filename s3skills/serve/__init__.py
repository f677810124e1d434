"""Front ends that serve skill libraries to other clients.

- `s3skills.serve.mcp`: an MCP server with the skills extension (SEP-2640) and, for hosts
  without it, the same skills as MCP tools and prompts (`s3skills.serve.tools`), over stdio
  or stateless streamable HTTP (`s3skills mcp --help`); it needs the `mcp` extra
  (`pip install "s3skills[mcp]"`), so this package imports nothing from it eagerly.
- `s3skills.serve.langgraph`: `LangGraphAuthResolver`, the tenant of a run behind LangGraph
  Server's authentication.
"""

__all__: list[str] = []
