"""`conductor mcp`: serve the conductor to MCP clients (Claude Code, Claude Desktop, Cursor,
goose) over stdio, in this process."""

from __future__ import annotations

import os
import sys

import typer

from conductor_cli.cli.common import ConfigOption, config_path, handle_errors


@handle_errors
def mcp(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Serve the conductor to an MCP client over stdio: one tool, ask, through your pool."""
    try:
        from conductor_cli.mcp_server import serve_stdio
    except ImportError as e:  # mcp is a dependency: a broken install
        from conductor_cli.errors import InputError

        raise InputError(f"cannot import {e.name}: reinstall conductor-cli") from None
    if not serve_stdio(config_path(ctx, config)):
        # A run is still inside a model: freeing it under that thread could crash.
        sys.stderr.flush()
        os._exit(0)
