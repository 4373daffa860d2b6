"""Run untrusted Python (a model's code) confined: eval's code scorer and the python tool.

Entry point: `Sandbox(limits).run(program) -> Outcome`; `Sandbox.isolation.describe()` says
which confinement is in use (`conductor doctor` shows it). Constructing a Sandbox raises
InputError on a machine whose kernel cannot keep the program's writes in its folder
(Landlock), unless CONDUCTOR_SANDBOX=unconfined says to run without that.
"""

from conductor_cli.sandbox.runner import Isolation, Limits, Outcome, Sandbox

__all__ = ["Isolation", "Limits", "Outcome", "Sandbox"]
