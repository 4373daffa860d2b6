"""Shared CLI plumbing: the options several commands take, one-line errors, exit codes."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from conductor_cli.cli.safe_text import visible
from conductor_cli.cli.signals import during_command
from conductor_cli.cli.typer_compat import ClickException, get_current_context
from conductor_cli.errors import EXIT_INTERRUPTED, EXIT_RUN_FAILED, ConductorError, is_interrupt
from conductor_cli.evals import datasets_help

F = TypeVar("F", bound=Callable[..., Any])

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Config file to use (default: $CONDUCTOR_CONFIG or the platform config dir).",
        dir_okay=False,
    ),
]

# Output options several commands share (ask, run, replay, eval, and the list commands).
AsJson = Annotated[
    bool, typer.Option("--json", help="Print one JSON document: workflow, steps, answer, totals.")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print the answer only.")]
Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Progress lines on stderr when not on a terminal.")
]


# The dataset arguments `eval` and `train` share.
DatasetArg = Annotated[
    str,
    typer.Argument(
        help=datasets_help(),
        show_default=False,
    ),
]
DatasetFileArg = Annotated[
    Path | None,
    typer.Argument(
        help="JSONL file (mcq, qa, mixed; humaneval without one is the public set).",
        show_default=False,
    ),
]


def _qa_scorers() -> dict[str, Any]:
    from conductor_cli.evals import QA_SCORERS

    return QA_SCORERS


ScorerOption = Annotated[
    str,
    typer.Option(
        "--scorer",
        help="qa (and mixed qa lines without their own): "
        + "; ".join(f"{s.name}: {s.about}" for s in _qa_scorers().values())
        + ".",
    ),
]


def fail(message: str, code: int) -> typer.Exit:
    # Plain write, not Rich: Rich wraps at the terminal width and an error must stay one line.
    sys.stderr.write(f"conductor: error: {visible(message)}\n")
    sys.stderr.flush()
    return typer.Exit(code)


def handle_errors(fn: F) -> F:
    """Turn the errors a user can cause into one line on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with during_command():
                return fn(*args, **kwargs)
        except ConductorError as e:
            if _debug():
                raise
            raise fail(str(e), e.exit_code) from None
        except (typer.Exit, typer.Abort, ClickException):
            raise  # Typer's own exits and usage errors keep their handling
        except BrokenPipeError:
            quiet_broken_pipe()
        except Exception as e:  # a bug of ours: still one line, the traceback behind --debug
            if is_interrupt(e):
                _leave_interrupted()
            if _debug():
                raise
            problem = storage_problem(e)
            if problem is not None:
                raise fail(problem, EXIT_RUN_FAILED) from None
            raise fail(
                f"internal error: {type(e).__name__}: {e} "
                "(rerun with --debug for the traceback, and please report it)",
                EXIT_RUN_FAILED,
            ) from None
        except KeyboardInterrupt:
            _leave_interrupted()

    return wrapper  # type: ignore[return-value]


def _leave_interrupted() -> NoReturn:
    sys.stderr.write("conductor: interrupted\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # The trace and cache are already consistent on disk. A step's thread may still be inside
    # llama.cpp, and interpreter shutdown under it can crash; leave at once.
    os._exit(EXIT_INTERRUPTED)


def storage_problem(error: BaseException) -> str | None:
    """One line for a full, read-only or forbidden data or cache directory; None otherwise."""
    import errno
    import sqlite3

    from conductor_cli.disk import paths

    if isinstance(error, OSError) and error.errno in (
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
    ):
        where = error.filename or f"{paths.data_dir()} or {paths.cache_dir()}"
        return (
            f"cannot write {where}: {error.strerror}. Free space there or point "
            "CONDUCTOR_DATA_DIR / CONDUCTOR_CACHE_DIR elsewhere; traces and cache entries "
            "written before are intact."
        )
    if isinstance(error, sqlite3.OperationalError):
        return (
            f"the response cache in {paths.cache_dir()} cannot be used ({error}): is the disk "
            "full or read-only? Free space, or run with --no-cache; entries written before are "
            "intact."
        )
    return None


def quiet_broken_pipe() -> None:
    """The reader went away (`conductor ... | head`): stop quietly, like other Unix tools."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the exit's final flush must not fail again
    raise typer.Exit(0)


def _debug() -> bool:
    ctx = get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return bool(obj.get("debug")) if isinstance(obj, dict) else False


def config_path(ctx: typer.Context, option: Path | None) -> Path | None:
    """A command's own --config wins over the one given before the command."""
    if option is not None:
        return option
    obj = ctx.find_root().obj
    return obj.get("config") if isinstance(obj, dict) else None


def config_target(ctx: typer.Context, option: Path | None) -> Path:
    """The file a command edits: --config, else $CONDUCTOR_CONFIG or the platform location."""
    from conductor_cli.disk import paths

    return config_path(ctx, option) or paths.config_file()
