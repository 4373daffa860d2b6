"""How a run is shown: a live tree on a terminal, plain lines with --verbose, or nothing."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # events pull in the workflow module; --help should not pay for it
    from conductor_cli.run import Subscriber


@contextmanager
def watching(
    *, quiet: bool, verbose: bool, as_json: bool
) -> Iterator[tuple[Subscriber | None, bool]]:
    """Yield the subscriber that shows the run, and whether it wants streamed tokens.

    The tree goes to stderr, so stdout holds only the answer even while a run is watched.
    """
    if quiet or as_json:
        yield None, False
        return
    from rich.console import Console

    err = Console(stderr=True)
    if err.is_terminal:
        from conductor_cli.cli.view import LiveTreeView

        view = LiveTreeView(err)
        view.start()
        try:
            yield view, True
        finally:
            view.stop()  # leaves the final tree on screen, also after Ctrl-C
        return
    if verbose:
        from conductor_cli.cli.view import PlainProgress

        yield PlainProgress(sys.stderr), False
        return
    yield None, False


def note(line: str) -> None:
    """One `conductor: note:` line on stderr (a note may quote what a model wrote)."""
    from conductor_cli.cli.safe_text import visible

    sys.stderr.write(f"conductor: note: {visible(line)}\n")
    sys.stderr.flush()


def print_answer(answer: str) -> None:
    """Markdown on a terminal, control characters shown as escapes; the plain text,
    unchanged, when piped (the bytes the model wrote are what a file should hold)."""
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markdown import Markdown

        from conductor_cli.cli.safe_text import visible

        Console().print(Markdown(visible(answer)))
    else:
        sys.stdout.write(answer.strip() + "\n")
        sys.stdout.flush()


def print_code(code: str) -> None:
    """Code extracted from an answer (-x): its bytes, never rendered, ending in one newline,
    so `conductor ask -x ... > fixed.py` writes the file; control characters shown as escapes
    on a terminal only."""
    text = code.rstrip("\n") + "\n"
    if sys.stdout.isatty():
        from conductor_cli.cli.safe_text import visible

        text = visible(text)
    sys.stdout.write(text)
    sys.stdout.flush()


def print_json(doc: Any) -> None:
    from conductor_cli.cli.safe_text import json_text

    sys.stdout.write(json_text(json.dumps(doc, ensure_ascii=False, indent=2)) + "\n")
    sys.stdout.flush()
