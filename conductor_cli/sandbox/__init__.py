"""Run untrusted Python (a model's code) confined: eval's code scorer and the python tool.

Entry point: `Sandbox(limits).run(program) -> Outcome`; `Sandbox.isolation.describe()` lists
each confinement in force (`conductor doctor` and the trace show it). Constructing a Sandbox
raises InputError on a machine that cannot confine a program's reads, writes, unix sockets
and disk, unless CONDUCTOR_SANDBOX=unconfined says to run with what it allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conductor_cli.exports import lazy_exports

# Loaded on first use: reading code blocks out of a reply (sandbox/fences.py, which eval's
# answer readers and so the CLI's start-up import) must not load the confinement machinery.
_EXPORTS = {
    "code_blocks": "fences",
    "Isolation": "isolation",
    "Limits": "isolation",
    "Outcome": "process",
    "Sandbox": "process",
}
__all__ = ["Isolation", "Limits", "Outcome", "Sandbox", "code_blocks"]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.sandbox.fences import code_blocks
    from conductor_cli.sandbox.isolation import Isolation, Limits
    from conductor_cli.sandbox.process import Outcome, Sandbox
