"""Tools as workers: a worker whose model is `tool:NAME` runs a built-in tool instead of a model.

Entry point: `tool_backend(name, where) -> Backend`. A tool answers a step like a model does
(its output is the step's output, with no tokens and no cost), so the engine, cache, trace and
view treat it as any other worker; it is deterministic, so the engine asks it with seed 0 and
the cache keys it by its input alone.
"""

from __future__ import annotations

from conductor_cli.backends.base import Backend
from conductor_cli.errors import ConfigError
from conductor_cli.models.spec import TOOLS

# What the conductor reads about a tool worker when the config gives no description.
DESCRIPTIONS = {
    "python": "a Python interpreter: runs the Python program in the steps it sees (or in its "
    "task) and returns what the program printed; it cannot read English",
}


def tool_backend(name: str, where: str) -> Backend:
    if name == "python":
        from conductor_cli.tools.python_tool import PythonTool

        return PythonTool()
    raise ConfigError(f"{where}: no tool {name!r}; the tools are {', '.join(TOOLS)}")
