"""The built-in tools a worker can be (`tool:NAME`), one entry each, on the bottom floor: the
config's check reads their names here, and conductor_cli/tools builds them from the entry's
`make` (imported on first use, so nothing here imports a backend).

A new tool is its module in conductor_cli/tools and one entry below.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # "module:function" of its maker, (Config) -> Backend.
    make: str
    # It runs the program an earlier step wrote: training then also measures, by default,
    # each model writing a program that this tool runs (policy/shapes.program_shapes).
    runs_programs: bool = False


BUILTIN: dict[str, BuiltinTool] = {
    t.name: t
    for t in (
        BuiltinTool(
            "python",
            "a Python interpreter: runs the Python program in the steps it sees (or in its "
            "task) and returns what the program printed; it cannot read English",
            4,
            "conductor_cli.tools.python_tool:make",
            runs_programs=True,
        ),
    )
}


def tool_names() -> tuple[str, ...]:
    """The built-in tools' names, as the table holds them now."""
    return tuple(BUILTIN)
