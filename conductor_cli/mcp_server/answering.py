"""The conductor's side of `conductor mcp`: one question answered through the user's pool.

No `mcp` import here. The config is read on every call (an edit applies to the next call, and
a broken file is that call's error, never the server's end); the models stay loaded between
calls in one `ServerApp` runtime, as `conductor serve` keeps them. Everything a user can get
wrong comes back as `AskFailed`, one line that names the file or key at fault.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from conductor_cli.api import RunOptions, RunResult, execute
from conductor_cli.config.settings import load_config
from conductor_cli.errors import ConductorError, InputError, RunCancelled
from conductor_cli.run.inputs import Attachment, read_file
from conductor_cli.run.pool import cut_notes
from conductor_cli.server.app import ConfigWatch, ServerApp


class AskFailed(Exception):
    """A call that could not answer: its one-line reason, for the client's model to read."""


def one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) or "failed"


def note(message: str) -> None:
    """Stdout carries the protocol: what the user should know goes to stderr (the client's
    log of this server)."""
    sys.stderr.write(f"conductor: {message}\n")
    sys.stderr.flush()


def read_files(files: Sequence[str]) -> list[Attachment]:
    """The files' text, attached as `conductor ask -f` attaches them. A relative path is read
    from the server's working directory (where the client started it)."""
    attachments = []
    for name in files:
        try:
            attachments.append(read_file(Path(name).expanduser()))
        except InputError as e:  # "--file PATH: ..." is the CLI's wording
            raise InputError(f"files: {str(e).removeprefix('--file ')}") from None
    return attachments


class AskSession:
    """Answers `ask` calls for one MCP client; `close` when the client has gone."""

    def __init__(self, config_file: Path | None) -> None:
        self.config_file = config_file  # --config as given; None: $CONDUCTOR_CONFIG or default
        self._app: ServerApp | None = None
        self._lock = threading.Lock()
        self._cancels: set[threading.Event] = set()  # one per run under way

    def _lease_app(self) -> ServerApp:
        with self._lock:
            if self._app is None:
                # The first config that loads starts the runtime; the watch reloads it later.
                config = load_config(self.config_file)
                self._app = ServerApp(config, watch=ConfigWatch(self.config_file))
            return self._app

    def answer(
        self, question: str, files: Sequence[str], cancel: threading.Event | None = None
    ) -> RunResult:
        """Plan and run `question` with `files` attached; AskFailed names what went wrong."""
        cancel = cancel or threading.Event()
        with self._lock:
            self._cancels.add(cancel)
        try:
            return self._answer(question, files, cancel)
        except ConductorError as e:
            raise AskFailed(one_line(str(e))) from None
        except RunCancelled:
            raise AskFailed("the run was cancelled") from None
        except Exception as e:  # a bug of ours: one line to the client, the server lives on
            raise AskFailed(
                one_line(f"internal error: {type(e).__name__}: {e} (please report it)")
            ) from e
        finally:
            with self._lock:
                self._cancels.discard(cancel)

    def _answer(self, question: str, files: Sequence[str], cancel: threading.Event) -> RunResult:
        if not question.strip():
            raise InputError("question: it is empty; ask something")
        attachments = read_files(files)
        app = self._lease_app()
        # Runs wait their turn for one of server.max_concurrent_runs slots.
        app.slots.acquire()
        try:
            with app.lease(cancel) as (config, runtime):
                for line in cut_notes(config, question, attachments):
                    note(f"note: {line}")
                result = execute(
                    question,
                    config=config,
                    attachments=attachments,
                    options=RunOptions(cancel=cancel),
                    runtime=runtime,
                )
        finally:
            app.slots.release()
        for line in result.notes:
            note(f"note: {line}")
        return result

    def close(self, grace_s: float = 3.0) -> bool:
        """Cancel the runs under way and free the models. False when a run is still inside a
        model after `grace_s`: its models stay (freeing them under it could crash), and the
        process should leave at once."""
        with self._lock:
            app, cancels = self._app, list(self._cancels)
        for cancel in cancels:
            cancel.set()
        deadline = time.monotonic() + grace_s
        while True:
            with self._lock:
                idle = not self._cancels
            if idle or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if idle and app is not None:
            app.close(0.0)
        return idle
