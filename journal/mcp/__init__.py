"""The journal as an MCP server: tools, their schemas and handlers, over stdio and Streamable HTTP."""

__all__: list[str] = []
