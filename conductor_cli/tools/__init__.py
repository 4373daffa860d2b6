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
from conductor_cli.models.spec import TOOLS, ModelSpec

if TYPE_CHECKING:
    from conductor_cli.config.settings import Config

# What the conductor reads about a tool worker when the config gives no description.
DESCRIPTIONS = {
    "python": "a Python interpreter: runs the Python program in the steps it sees (or in its "
    "task) and returns what the program printed; it cannot read English",
}


def default_description(spec: ModelSpec) -> str:
    """What the conductor reads about a tool worker whose config gives no description (models
    without one stay undescribed)."""
    if spec.kind == "mcp":
        return f"the MCP tool {spec.mcp_tool} of {spec.mcp_server}"
    return DESCRIPTIONS.get(spec.name, "") if spec.tool else ""


def _python(config: Config) -> Backend:
    from conductor_cli.tools.python_tool import PythonTool, limits_of

    return PythonTool(limits_of(config.sandbox))


# One entry per built-in tool, named as `tool:NAME` names it (models/spec.TOOLS lists the same
# names for the config's check, below this package; a test keeps the two equal): a new tool is
# a module here and one line.
TOOL_KINDS: dict[str, Callable[[Config], Backend]] = {
    "python": _python,
}


def tool_backend(name: str, config: Config, where: str) -> Backend:
    make = TOOL_KINDS.get(name)
    if make is None:
        raise ConfigError(f"{where}: no tool {name!r}; the tools are {', '.join(TOOLS)}")
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
