"""Tools as workers: a worker whose model is `tool:NAME` runs a built-in tool instead of a model.

Entry points: `tool_backend(name, config, where) -> Backend` for built-in tools, `mcp_backend(spec,
config, where)` for `mcp:SERVER/TOOL` (a tool of an MCP server, tools/mcp_tool.py). A tool
answers a step like a model does (its output is the step's output, with no tokens and no
cost), so the engine, cache, trace and view treat it as any other worker; it is deterministic,
so the engine asks it with seed 0 and the cache keys it by its input alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from conductor_cli.backends.base import Backend
from conductor_cli.errors import ConfigError
from conductor_cli.models.spec import TOOLS, ModelSpec

if TYPE_CHECKING:
    from conductor_cli.config.settings import Config


def default_description(spec: ModelSpec) -> str:
    """What the conductor reads about a tool worker whose config gives no description (models
    without one stay undescribed)."""
    if spec.kind == "mcp":
        return f"the MCP tool {spec.mcp_tool} of {spec.mcp_server}"
    tool = BUILTIN.get(spec.name) if spec.tool else None
    return tool.description if tool is not None else ""


def _python(config: Config) -> Backend:
    from conductor_cli.tools.python_tool import PythonTool, limits_of

    return PythonTool(limits_of(config.sandbox), tool_version("python"))


@dataclass(frozen=True)
class BuiltinTool:
    """One built-in tool, everything about it in one entry."""

    name: str  # as `tool:NAME` names it
    # What the conductor reads about a tool worker whose config gives no description.
    description: str
    # Its behaviour version: what its runs give can change with conductor's own code, so the
    # version is part of every cache key of its runs (its fingerprint) and of every reward
    # measured with it (policy/registry.worker_fingerprint). python: 3, reads, unix sockets,
    # memory and disk confined; 4, a bare block after a ```python one is its output shown,
    # not the program.
    version: int
    make: Callable[[Config], Backend]


# One entry per built-in tool (models/spec.TOOLS lists the same names for the config's check,
# below this package; a test keeps the two equal): a new tool is a module here and one entry.
BUILTIN: dict[str, BuiltinTool] = {
    t.name: t
    for t in (
        BuiltinTool(
            "python",
            "a Python interpreter: runs the Python program in the steps it sees (or in its "
            "task) and returns what the program printed; it cannot read English",
            4,
            _python,
        ),
    )
}


def tool_version(name: str) -> int:
    """A built-in tool's behaviour version (0: no such tool)."""
    tool = BUILTIN.get(name)
    return tool.version if tool is not None else 0


def tool_backend(name: str, config: Config, where: str) -> Backend:
    tool = BUILTIN.get(name)
    if tool is None:
        raise ConfigError(f"{where}: no tool {name!r}; the tools are {', '.join(TOOLS)}")
    return tool.make(config)


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
