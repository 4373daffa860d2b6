"""The `conductor` command: a thin Typer app; every command calls the library."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated

import typer

from conductor_cli import __version__
from conductor_cli.cli import ask as ask_cmd
from conductor_cli.cli import (
    cache_cmd,
    config_cmd,
    doctor_cmd,
    eval_cmd,
    mcp_cmd,
    models,
    serve_cmd,
    signals,
    traces,
    train_cmd,
    workers,
)
from conductor_cli.cli.common import ConfigOption, quiet_broken_pipe
from conductor_cli.cli.complete import COMPLETE_VAR

app = typer.Typer(
    name="conductor",
    help="Answer hard questions with a team of language models, planned by a local conductor.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals can hold API keys
    # Plain Click help: rendering it with Rich costs 0.1 s of imports on every --help.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"conductor {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: ConfigOption = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the Python traceback behind an error.")
    ] = False,
) -> None:
    ctx.obj = {"config": config, "debug": debug}


app.command("ask")(ask_cmd.ask)
app.command("run")(ask_cmd.run)
app.command("replay")(traces.replay)
app.command("doctor")(doctor_cmd.doctor)
app.command("eval")(eval_cmd.eval_cmd)
app.command("train")(train_cmd.train_cmd)
app.command("serve")(serve_cmd.serve)
app.command("mcp")(mcp_cmd.mcp)
app.add_typer(traces.app, name="traces", help="List, show and remove saved run traces.")
app.add_typer(workers.app, name="workers", help="List, add, remove and test workers.")
app.add_typer(cache_cmd.app, name="cache", help="The response cache: stats, clear, path.")
app.add_typer(models.app, name="models", help="List, fetch, inspect and locate GGUF models.")
app.add_typer(
    config_cmd.app, name="config", help="Show, get, set, edit, locate and create the config file."
)


def main() -> None:
    try:
        # Until a command starts, a signal just ends the process (exit 130); each command
        # turns it into KeyboardInterrupt while it runs (common.handle_errors).
        signals.before_command()
        if os.environ.get(COMPLETE_VAR):
            # A Tab in the shell: register Typer's shell classes (add_completion=False leaves
            # them out so that plain runs pay nothing for them).
            from conductor_cli.cli.typer_compat import completion_init

            completion_init()
        app()
    except BrokenPipeError:  # help or usage text into a closed pipe
        with contextlib.suppress(typer.Exit):
            quiet_broken_pipe()
    finally:
        # The command is over and everything it wrote is on disk (its output flushed first):
        # a signal from now on just ends the process, as it would any program.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        signals.after_command()
