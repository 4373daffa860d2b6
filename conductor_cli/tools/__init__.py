"""Tools as workers: a worker whose model is `tool:NAME` runs a built-in tool instead of a model.

Entry points: `tool_backend(name, config, where) -> Backend` for built-in tools, `mcp_backend(spec,
config, where)` for `mcp:SERVER/TOOL` (a tool of an MCP server, tools/mcp_tool.py). A tool
answers a step like a model does (its output is the step's output, with no tokens and no
cost), so the engine, cache, trace and view treat it as any other worker; it is deterministic,
so the engine asks it with seed 0 and the cache keys it by its input alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from conductor_cli.backends.base import Backend
from conductor_cli.errors import ConfigError
from conductor_cli.exports import resolve
from conductor_cli.models.builtin_tools import BUILTIN, BuiltinTool, tool_names
from conductor_cli.models.spec import ModelSpec

__all__ = [
    "BUILTIN",
    "BuiltinTool",
    "default_description",
    "mcp_backend",
    "tool_backend",
    "tool_version",
]

if TYPE_CHECKING:
    from conductor_cli.config.settings import Config


def default_description(spec: ModelSpec) -> str:
    """What the conductor reads about a tool worker whose config gives no description (models
    without one stay undescribed)."""
    if spec.kind == "mcp":
        return f"the MCP tool {spec.mcp_tool} of {spec.mcp_server}"
    tool = BUILTIN.get(spec.name) if spec.tool else None
    return tool.description if tool is not None else ""


def tool_version(name: str) -> int:
    """A built-in tool's behaviour version (0: no such tool)."""
    tool = BUILTIN.get(name)
    return tool.version if tool is not None else 0


def tool_backend(name: str, config: Config, where: str) -> Backend:
    tool = BUILTIN.get(name)
    if tool is None:
        raise ConfigError(f"{where}: no tool {name!r}; the tools are {', '.join(tool_names())}")
    make: Callable[[Config], Backend] = resolve(tool.make)
    return make(config)


def mcp_backend(spec: ModelSpec, config: Config, where: str) -> Backend:
    """An `mcp:SERVER/TOOL` worker (the config already checked that SERVER is configured)."""
    from conductor_cli.tools.mcp_tool import McpTool

    try:
        server = config.mcp_server(spec.mcp_server)
    except KeyError:
        known = ", ".join(s.name for s in config.mcp_servers) or "none"
        raise ConfigError(
            f"{where}: no MCP server {spec.mcp_server!r} in [mcp_servers]; configured: {known}."
        ) from None
    return McpTool(server, spec.mcp_tool)
