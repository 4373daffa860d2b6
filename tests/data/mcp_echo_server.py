"""A real MCP server for tests/test_mcp_tool.py (the `mcp` 2.x server API, over stdio)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server: MCPServer = MCPServer(name="echo", log_level="WARNING")


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(text: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"cannot handle {text!r}")


if __name__ == "__main__":
    server.run("stdio")
