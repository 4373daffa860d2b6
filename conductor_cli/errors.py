"""Errors a user can cause, each with the exit code the CLI maps it to.

Every message is one line that names the file, key or step at fault and says what to do.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class ConductorError(Exception):
    """Base of every error the CLI reports as one line without a traceback."""

    exit_code: int = EXIT_RUN_FAILED


class ConfigError(ConductorError):
    exit_code = EXIT_USAGE


class InputError(ConductorError):
    exit_code = EXIT_USAGE


class ModelError(ConductorError):
    """A model file is missing, corrupt, or could not be fetched."""

    exit_code = EXIT_RUN_FAILED


class WorkflowError(ConductorError):
    """The conductor's output is not a workflow that can run on this pool."""

    exit_code = EXIT_RUN_FAILED


class WorkerError(ConductorError):
    """A model call failed (unreachable server, missing key, bad answer).

    `retryable` says whether the same call may succeed later: timeouts, rate limits, server
    errors, refused connections and empty or malformed answers are; bad requests are not.
    """

    exit_code = EXIT_RUN_FAILED

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class BudgetError(ConductorError):
    """The next call would cross --max-cost or --max-calls."""

    exit_code = EXIT_RUN_FAILED


class TraceError(ConductorError):
    """A trace file is missing, damaged, or from a newer conductor."""

    exit_code = EXIT_USAGE


class RunCancelled(KeyboardInterrupt):
    """The run's client went away or pressed Ctrl-C (a server's run): it ends as interrupted,
    in the thread that carries it out."""


def is_interrupt(error: BaseException) -> bool:
    """Ctrl-C, possibly wrapped in another error: Python turns a KeyboardInterrupt raised while
    a class is being created (a lazy import) into RuntimeError("Error calling __set_name__")."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
