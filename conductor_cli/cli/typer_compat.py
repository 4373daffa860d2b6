"""The private Typer names the CLI uses, in one place: nothing else imports from `typer._*`.

Why private names at all: typer is pinned to 0.28.0 (pyproject.toml) because 0.29 coerces
every option through pydantic, which costs about 0.2 s on every command, `--help` included.
0.28 vendors Click as `typer._click` and keeps its shell-completion machinery private, and
this CLI needs both (Click's usage errors, the current context, completion without Typer's
`--install-completion` options).

When the pin moves, check each import below still exists with the same behaviour:
- `ClickException`: the base of Click's usage errors, which `common.handle_errors` re-raises
  for Typer to print (a bad option must stay a usage error, exit 2).
- `get_current_context(silent=True)`: the running command's context or None (`--debug`).
- `completion_init()`: registers Typer's shell classes, needed because the app is built with
  `add_completion=False`; `get_completion_script(prog_name=, complete_var=, shell=)`: the
  scripts in completions/ (completions/generate.py).
Then run tests/test_completions.py, tests/test_performance.py (no pydantic at start-up) and
tests/test_config_edit.py (`--debug`), and try an unknown option: `conductor ask --bogus x`
must print Click's usage error and exit 2. Every name here is imported by `import typer`
itself, so this module costs nothing at start-up.
"""

from __future__ import annotations

from typer._click.exceptions import ClickException
from typer._click.globals import get_current_context
from typer._completion_classes import completion_init
from typer._completion_shared import get_completion_script

__all__ = ["ClickException", "completion_init", "get_completion_script", "get_current_context"]
