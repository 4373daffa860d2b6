"""`conductor traces` and `conductor replay`: look at past runs, replay them, resume them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from conductor_cli.cli.ask import NoServer, show_result
from conductor_cli.cli.common import (
    AsJson,
    ConfigOption,
    Quiet,
    Verbose,
    config_path,
    handle_errors,
)
from conductor_cli.cli.complete import trace_ids
from conductor_cli.cli.output import print_answer, print_json, watching
from conductor_cli.cli.safe_text import flat

app = typer.Typer(no_args_is_help=True)

TraceRef = Annotated[
    str,
    typer.Argument(help="Trace id (or a unique prefix) or path.", autocompletion=trace_ids),
]


@app.command("list")
@handle_errors
def list_cmd(as_json: AsJson = False) -> None:
    """List traces, newest first."""
    from conductor_cli.storage import list_traces

    rows = list_traces()
    if as_json:
        print_json(rows)
        return
    lines = []
    for r in rows:
        steps = f"{r['steps_done']}/{r['steps']}"
        duration = f"{r['duration']:.1f}s" if isinstance(r["duration"], int | float) else "-"
        question = flat(r["question"] or "")
        lines.append((r["id"], (r["time"] or "-")[:19], r["status"], steps, duration, question))
    if not sys.stdout.isatty():
        # Piped: one tab-separated line per trace, for cut/grep/awk.
        sys.stdout.write("".join("\t".join(line) + "\n" for line in lines))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for k, col in enumerate(("id", "time", "status", "steps", "duration")):
        width = max([len(col), *(len(line[k]) for line in lines)])
        table.add_column(col, no_wrap=True, min_width=width)
    table.add_column("question", no_wrap=True, overflow="ellipsis", ratio=1)
    for line in lines:
        table.add_row(*line)
    Console().print(table)


@app.command("show")
@handle_errors
def show(ref: TraceRef, as_json: AsJson = False) -> None:
    """Show a trace as a tree (or the whole trace with --json)."""
    from rich.console import Console

    from conductor_cli.cli.view import render_static
    from conductor_cli.run import RunState, event_from_dict
    from conductor_cli.storage import load_trace

    record = load_trace(ref)
    if as_json:
        record.pop("_path", None)
        print_json(record)
        return
    state = RunState()
    for raw in record.get("events") or []:
        state.apply(event_from_dict(raw))
    render_static(state, Console())
    if record.get("answer") is not None:
        print_answer(record["answer"])


@app.command("rm")
@handle_errors
def rm(
    refs: Annotated[
        list[str], typer.Argument(help="Trace ids or paths.", autocompletion=trace_ids)
    ],
) -> None:
    """Delete traces."""
    from conductor_cli.storage import resolve_trace_path

    for path in [resolve_trace_path(r) for r in refs]:
        path.unlink()
        typer.echo(f"removed {path}")


@app.command("export")
@handle_errors
def export(
    out: Annotated[Path, typer.Argument(help="JSONL file to write.", dir_okay=False)],
    fmt: Annotated[
        str, typer.Option("--format", help="grpo: (prompt, workflow, reward) rows.")
    ] = "grpo",
) -> None:
    """Export the scored conductor runs of `conductor eval` as training rows."""
    from conductor_cli.errors import InputError
    from conductor_cli.evals import export_grpo

    if fmt != "grpo":
        raise InputError(f"--format {fmt}: unknown format; the one format is grpo")
    count = export_grpo(out)
    sys.stderr.write(f"conductor: wrote {count} rows to {out}\n")
    if count == 0:
        sys.stderr.write(
            "conductor: note: no scored conductor runs yet; `conductor eval` makes them\n"
        )


@handle_errors
def replay(
    ctx: typer.Context,
    ref: TraceRef,
    speed: Annotated[
        float, typer.Option("--speed", help="Play at the recorded pace times N (0: instant).")
    ] = 0.0,
    live: Annotated[bool, typer.Option("--live", help="Call the workers again.")] = False,
    worker: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            "-w",
            help="OLD=NEW sends OLD's steps to NEW; a lone NAME takes all steps.",
            show_default=False,
        ),
    ] = None,
    from_step: Annotated[
        int | None, typer.Option("--from-step", help="Keep steps before K, recompute from K.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Finish an interrupted trace (missing steps only).")
    ] = False,
    as_json: AsJson = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
    no_server: NoServer = False,
    config: ConfigOption = None,
) -> None:
    """Replay a trace: offline from the record by default, or run its workflow again."""
    from conductor_cli.config import load_config
    from conductor_cli.errors import InputError, TraceError
    from conductor_cli.replay import live_request, parse_worker_map, play, rerun
    from conductor_cli.storage import load_trace

    record = load_trace(ref)
    if sum([live, from_step is not None, resume]) > 1:
        raise InputError("--live, --from-step and --resume exclude each other; pick one.")
    again = live or from_step is not None or resume or bool(worker) or config is not None
    if not again:
        if speed < 0:
            raise InputError("--speed must be 0 (instant) or more.")
        with watching(quiet=quiet, verbose=verbose, as_json=as_json) as (view, _):
            answer = play(record, view or (lambda _e: None), speed=speed)
        if answer is None:
            raise TraceError(
                f"trace {record.get('id')} did not finish (status {record.get('status')}); "
                f"finish it with `conductor replay --resume {record.get('id')}`."
            )
        if as_json:
            record.pop("_path", None)
            print_json(record)
        else:
            print_answer(answer)
        return
    path = config_path(ctx, config)
    cfg = load_config(path)
    if live and not resume and from_step is None:
        # A fresh run of the recorded workflow: the one kind a server carries out.
        from conductor_cli.cli import via_server

        endpoint = via_server.pick_endpoint(path, cfg.server, no_server, quiet=quiet)
        if endpoint is not None:
            remote = via_server.run(
                endpoint,
                live_request(record, cfg, parse_worker_map(worker or [])),
                quiet=quiet,
                verbose=verbose,
                as_json=as_json,
            )
            if remote is not None:
                show_result(remote, as_json=as_json)
                return
    with watching(quiet=quiet, verbose=verbose, as_json=as_json) as (view, stream):
        result = rerun(
            record,
            config=cfg,
            live=live,
            from_step=from_step,
            resume=resume,
            worker_map=parse_worker_map(worker or []),
            on_event=view,
            stream=stream,
        )
    show_result(result, as_json=as_json)
