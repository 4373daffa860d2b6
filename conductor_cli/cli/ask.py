"""`conductor ask`: plan a workflow for a question, run it, print the answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import ConfigOption, config_path, handle_errors


def format_workflow(workflow: object) -> str:
    from ..workflow import Workflow

    assert isinstance(workflow, Workflow)
    lines = []
    for i, step in enumerate(workflow.steps):
        sees = ", ".join(str(j) for j in step.sees) if step.sees else "only the question"
        lines.append(f"  {i}. {step.worker}: {step.task}  [sees: {sees}]")
    return "\n".join(lines)


@handle_errors
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question. Piped stdin is attached to it.")],
    file: Annotated[
        list[Path] | None,
        typer.Option("--file", "-f", help="Attach a text file (repeatable).", show_default=False),
    ] = None,
    conductor: Annotated[
        str | None,
        typer.Option(
            "--conductor", "-m", help="Conductor model: catalog name, .gguf path or litellm:MODEL."
        ),
    ] = None,
    worker: Annotated[
        list[str] | None,
        typer.Option(
            "--worker", "-w", help="Use only this worker (repeatable).", show_default=False
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", help="Most steps the workflow may have.")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Sampling seed.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document: workflow, steps, answer.")
    ] = False,
    no_stdin: Annotated[
        bool, typer.Option("--no-stdin", help="Do not read piped standard input.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Ask a question: the conductor writes a workflow, the workers run it, the answer prints."""
    from ..api import ask as run_ask
    from ..config import load_config, restrict_workers, with_conductor
    from ..errors import InputError
    from ..inputs import read_file, read_stdin

    if not question.strip():
        raise InputError('the question is empty; ask something, e.g. conductor ask "..."')
    # Read everything the user gave and validate the config before any model is loaded.
    attachments = []
    if not no_stdin and not sys.stdin.isatty():
        piped = read_stdin(sys.stdin.buffer)
        if piped is not None:
            attachments.append(piped)
    attachments.extend(read_file(p) for p in file or [])
    cfg = load_config(config_path(ctx, config))
    cfg = restrict_workers(cfg, worker or [])
    cfg = with_conductor(cfg, model=conductor, max_steps=max_steps, seed=seed)

    result = run_ask(question, config=cfg, attachments=attachments)

    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return
    workflow_text = f"Workflow:\n{format_workflow(result.plan.workflow)}\n"
    if sys.stdout.isatty():
        typer.echo(workflow_text)
    else:
        # Piped: the answer alone goes to stdout, so `conductor ask ... > answer.md` works.
        sys.stderr.write(workflow_text + "\n")
    typer.echo(result.answer.strip())
