"""`conductor mcp`: the conductor as an MCP server over stdio, one tool (`ask`), in-process.

`serve_stdio` is the one entry point (the CLI's `mcp` command calls it). It imports the
`mcp` package, so only that command pays for it.
"""

from __future__ import annotations

from pathlib import Path


def serve_stdio(config_file: Path | None) -> bool:
    """Serve until the client closes stdin; see `server.serve_stdio`."""
    from conductor_cli.mcp_server.server import serve_stdio as serve

    return serve(config_file)
