"""The `conductor` command: a thin Typer app; every command calls the library."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Annotated

import typer

from .. import __version__
from ..errors import EXIT_INTERRUPTED
from . import ask as ask_cmd
from . import cache_cmd, config_cmd, doctor_cmd, eval_cmd, models, traces, workers
from .common import ConfigOption, quiet_broken_pipe
from .complete import COMPLETE_VAR

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
app.add_typer(traces.app, name="traces", help="List, show and remove saved run traces.")
app.add_typer(workers.app, name="workers", help="List, add, remove and test workers.")
app.add_typer(cache_cmd.app, name="cache", help="The response cache: stats, clear, path.")
app.add_typer(models.app, name="models", help="List, fetch, inspect and locate GGUF models.")
app.add_typer(
    config_cmd.app, name="config", help="Show, get, set, edit, locate and create the config file."
)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C and SIGTERM: raise KeyboardInterrupt (trace marked interrupted, exit 130).

    An exception raised inside a ctypes callback is printed and dropped, so a signal that
    lands in llama.cpp's log callback (a model is loading) is delivered again a moment later,
    outside it, instead of being lost.
    """
    if _in_ctypes_callback(frame):
        main_thread = threading.main_thread().ident
        if main_thread is not None:
            threading.Timer(0.02, signal.pthread_kill, (main_thread, signum)).start()
        return
    raise KeyboardInterrupt


def _in_ctypes_callback(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "llama_log_callback":
            return True
        frame = frame.f_back
    return False


def main() -> None:
    try:
        # From here on Ctrl-C raises KeyboardInterrupt, which the commands handle (trace marked
        # interrupted, exit 130); entry.py covered the import time before this.
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        if os.environ.get(COMPLETE_VAR):
            # A Tab in the shell: register Typer's shell classes (add_completion=False leaves
            # them out so that plain runs pay nothing for them).
            from typer._completion_classes import completion_init  # typer is pinned

            completion_init()
        app()
    except KeyboardInterrupt:  # while Typer builds the command tree, before it parses
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # help or usage text into a closed pipe
        with contextlib.suppress(typer.Exit):
            quiet_broken_pipe()
    finally:
        # The command is over and everything it wrote is on disk: a signal from now on just
        # ends the process, as it would any program, with nothing printed.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
