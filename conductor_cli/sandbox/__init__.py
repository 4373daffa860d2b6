"""Run untrusted Python (a model's code) confined: eval's code scorer and the python tool.

Entry point: `Sandbox(limits).run(program) -> Outcome`; `Sandbox.isolation.describe()` lists
each confinement in force (`conductor doctor` and the trace show it). Constructing a Sandbox
raises InputError on a machine that cannot confine a program's reads, writes, unix sockets
and disk, unless CONDUCTOR_SANDBOX=unconfined says to run with what it allows.
"""

from conductor_cli.sandbox.isolation import Isolation, Limits
from conductor_cli.sandbox.runner import Outcome, Sandbox

__all__ = ["Isolation", "Limits", "Outcome", "Sandbox"]
