"""`conductor ask` and `conductor run`: a question in, a workflow run, the answer out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from conductor_cli.cli.common import (
    AsJson,
    ConfigOption,
    Quiet,
    Verbose,
    config_path,
    handle_errors,
)
from conductor_cli.cli.complete import worker_names
from conductor_cli.cli.output import note, print_answer, print_code, print_json, watching
from conductor_cli.models import spellings

FileOption = Annotated[
    list[Path] | None,
    typer.Option("--file", "-f", help="Attach a text file (repeatable).", show_default=False),
]
Extract = Annotated[
    bool,
    typer.Option(
        "--extract",
        "-x",
        help="Print only the answer's first fenced code block (the whole answer if it has none).",
    ),
]
ExtractLast = Annotated[
    bool,
    typer.Option("--extract-last", "--xl", help="Print only the answer's last fenced code block."),
]
NoStdin = Annotated[bool, typer.Option("--no-stdin", help="Do not read piped standard input.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
Refresh = Annotated[
    bool, typer.Option("--refresh", help="Call every model again and overwrite the cache.")
]
MaxCost = Annotated[
    float | None,
    typer.Option("--max-cost", help="Stop before a model call that could cross this many USD."),
]
NoServer = Annotated[
    bool,
    typer.Option("--no-server", help="Run in this process even when a server runs."),
]
MaxCalls = Annotated[
    int | None,
    typer.Option("--max-calls", help="Stop before model call N+1 (cache hits are free)."),
]


def read_attachments(files: list[Path] | None, no_stdin: bool) -> list[Any]:
    from conductor_cli.run import read_file, read_stdin

    attachments = []
    if not no_stdin and not sys.stdin.isatty():
        piped = read_stdin(sys.stdin.buffer)
        if piped is not None:
            attachments.append(piped)
    attachments.extend(read_file(p) for p in files or [])
    return attachments


def note_cuts(cfg: Any, question: str, attachments: list[Any], quiet: bool) -> None:
    """Say on stderr which workers will read the attachments cut: never cut silently."""
    if quiet or not attachments:
        return
    from conductor_cli.run import cut_notes

    for line in cut_notes(cfg, question, attachments):
        note(line)


def run_and_show(
    cfg: Any,
    request: Any,
    attachments: list[Any],
    *,
    loaded: Any,
    quiet: bool,
    verbose: bool,
    as_json: bool,
    endpoint: Any = None,
    extract: str | None = None,
) -> None:
    """The part `ask` and `run` share: note any cut input, carry out `request` (a
    wire.RunRequest) while watched, on the server at `endpoint` when there is one, else here
    on the `loaded` config (api.execute_request, the server's road too), and show the result
    (`extract`: only its first or last code block). `cfg` is the config the request's
    overrides make, as the notes see it."""
    note_cuts(cfg, request.question, attachments, quiet)
    if endpoint is not None:
        from conductor_cli.cli import via_server

        if endpoint.socket is not None:  # a local server: this machine's models dir
            conductor = request.workflow is None
            via_server.pull_first(cfg, conductor=conductor)
        remote = via_server.run(endpoint, request, quiet=quiet, verbose=verbose, as_json=as_json)
        if remote is not None:
            show_result(remote, as_json=as_json, extract=extract)
            return
    from dataclasses import replace

    from conductor_cli.api import execute_request

    with watching(quiet=quiet, verbose=verbose, as_json=as_json) as (view, stream):
        result = execute_request(replace(request, stream=stream), config=loaded, on_event=view)
    show_result(result, as_json=as_json, extract=extract)


def cache_mode(no_cache: bool, refresh: bool) -> Any:
    from conductor_cli.errors import InputError
    from conductor_cli.storage import CacheMode

    if no_cache and refresh:
        raise InputError("--no-cache and --refresh exclude each other; pick one.")
    return CacheMode.OFF if no_cache else CacheMode.REFRESH if refresh else CacheMode.USE


def extract_mode(extract: bool, extract_last: bool, as_json: bool) -> str | None:
    """-x / --xl as llm reads them: the answer's first or last fenced code block."""
    from conductor_cli.errors import InputError

    if extract and extract_last:
        raise InputError("-x/--extract and --xl/--extract-last exclude each other; pick one.")
    chosen = "first" if extract else "last" if extract_last else None
    if chosen is not None and as_json:
        raise InputError(
            "-x/--xl print the answer's code alone and --json the whole result; pick one."
        )
    return chosen


def show_result(result: Any, *, as_json: bool, extract: str | None = None) -> None:
    for line in result.to_dict().get("notes") or []:
        note(line)
    if as_json:
        print_json(result.to_dict())
    elif extract is not None:
        from conductor_cli.sandbox import code_blocks

        blocks = [body for _, body in code_blocks(result.answer)]
        if blocks:
            print_code(blocks[0] if extract == "first" else blocks[-1])
        else:
            note("the answer has no fenced code block to extract; it is printed whole")
            print_answer(result.answer)
    else:
        print_answer(result.answer)


@handle_errors
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question. Piped stdin is attached to it.")],
    file: FileOption = None,
    conductor: Annotated[
        str | None,
        typer.Option(
            "--conductor",
            "-m",
            help=f"Conductor model: {spellings(conductor=True)}; a bare name is a GGUF.",
        ),
    ] = None,
    worker: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            "-w",
            help="Use only this worker (repeatable).",
            show_default=False,
            autocompletion=worker_names,
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", help="Most steps the conductor's plan may have.")
    ] = None,
    max_depth: Annotated[int | None, typer.Option("--max-depth", hidden=True)] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds",
            help="At most N rounds: the conductor reads its team's answer and corrects or "
            "keeps it (1 to 4).",
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Sampling seed.")] = None,
    no_cache: NoCache = False,
    refresh: Refresh = False,
    max_cost: MaxCost = None,
    max_calls: MaxCalls = None,
    as_json: AsJson = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
    no_stdin: NoStdin = False,
    no_server: NoServer = False,
    extract: Extract = False,
    extract_last: ExtractLast = False,
    config: ConfigOption = None,
) -> None:
    """Ask a question: the conductor writes a workflow, the workers run it, the answer prints."""
    from conductor_cli.cli.via_server import pick_endpoint
    from conductor_cli.config import (
        MAX_ROUNDS_LIMIT,
        NESTED_RETIRED,
        apply_overrides,
        load_config,
        rounds_for_depth,
    )
    from conductor_cli.errors import InputError
    from conductor_cli.wire import Overrides

    if not question.strip():
        raise InputError('the question is empty; ask something, e.g. conductor ask "..."')
    if max_depth:
        raise InputError(
            f"--max-depth: {NESTED_RETIRED}; use --rounds {rounds_for_depth(max_depth)}."
        )
    if rounds is not None and not 1 <= rounds <= MAX_ROUNDS_LIMIT:
        raise InputError(f"--rounds {rounds}: give 1 to {MAX_ROUNDS_LIMIT} rounds.")
    mode = cache_mode(no_cache, refresh)
    extracted = extract_mode(extract, extract_last, as_json)
    # Read everything the user gave and validate the config before any model is loaded.
    attachments = read_attachments(file, no_stdin)
    path = config_path(ctx, config)
    loaded = cfg = load_config(path)
    endpoint = pick_endpoint(path, cfg.server, no_server, quiet=quiet)
    overrides = Overrides(conductor, tuple(worker or []), max_steps, seed, rounds)
    if endpoint is None or endpoint.socket is not None:
        # A server elsewhere (CONDUCTOR_SERVER) has its own config and checks the options.
        cfg = apply_overrides(cfg, overrides)
    run_and_show(
        cfg,
        _request(question, attachments, mode, max_cost, max_calls, overrides=overrides),
        attachments,
        loaded=loaded,
        quiet=quiet,
        verbose=verbose,
        as_json=as_json,
        endpoint=endpoint,
        extract=extracted,
    )


def _request(
    question: str,
    attachments: list[Any],
    mode: Any,
    max_cost: float | None,
    max_calls: int | None,
    *,
    overrides: Any = None,
    workflow: Any = None,
) -> Any:
    from conductor_cli.wire import Overrides, RunRequest

    return RunRequest(
        question,
        tuple((a.name, a.text) for a in attachments),
        workflow.to_dict() if workflow is not None else None,
        overrides or Overrides(),
        str(mode.value),
        False,
        max_cost,
        max_calls,
    )


@handle_errors
def run(
    ctx: typer.Context,
    workflow_file: Annotated[
        Path, typer.Argument(help="A workflow: our JSON form or the paper's three lists.")
    ],
    question: Annotated[str, typer.Argument(help="The question. Piped stdin is attached to it.")],
    file: FileOption = None,
    no_cache: NoCache = False,
    refresh: Refresh = False,
    max_cost: MaxCost = None,
    max_calls: MaxCalls = None,
    as_json: AsJson = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
    no_stdin: NoStdin = False,
    no_server: NoServer = False,
    extract: Extract = False,
    extract_last: ExtractLast = False,
    config: ConfigOption = None,
) -> None:
    """Run a hand-written workflow on a question, skipping the conductor."""
    from conductor_cli.cli.via_server import pick_endpoint
    from conductor_cli.config import MAX_STEPS_LIMIT, load_config
    from conductor_cli.errors import InputError, WorkflowError
    from conductor_cli.run import parse_workflow

    mode = cache_mode(no_cache, refresh)
    extracted = extract_mode(extract, extract_last, as_json)
    try:
        text = workflow_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{workflow_file}: cannot read the workflow file: {e}.") from None
    attachments = read_attachments(file, no_stdin)
    path = config_path(ctx, config)
    cfg = load_config(path)
    try:
        names = [w.name for w in cfg.workers]
        workflow = parse_workflow(text, names, MAX_STEPS_LIMIT)
    except WorkflowError as e:
        raise WorkflowError(f"{workflow_file}: {e}") from None
    run_and_show(
        cfg,
        _request(question, attachments, mode, max_cost, max_calls, workflow=workflow),
        attachments,
        loaded=cfg,
        quiet=quiet,
        verbose=verbose,
        as_json=as_json,
        endpoint=pick_endpoint(path, cfg.server, no_server, quiet=quiet),
        extract=extracted,
    )
