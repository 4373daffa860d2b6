"""`conductor doctor`: a table of environment checks; exit 1 when one fails."""

from __future__ import annotations

import typer

from conductor_cli.cli.common import AsJson, ConfigOption, config_path, handle_errors
from conductor_cli.cli.output import print_json


@handle_errors
def doctor(ctx: typer.Context, as_json: AsJson = False, config: ConfigOption = None) -> None:
    """Check Python, llama.cpp, GPU offload, models, config, workers, and the data dirs."""
    from conductor_cli.doctor import run_checks
    from conductor_cli.errors import EXIT_RUN_FAILED

    checks = run_checks(config_path(ctx, config))
    if as_json:
        print_json([c.to_dict() for c in checks])
    else:
        from rich.console import Console

        console = Console()
        if not console.is_terminal:  # piped: one tab-separated line per check, never wrapped
            for c in checks:
                typer.echo(f"{c.what}\t{c.status}\t{c.detail}")
        else:
            from rich.table import Table

            colour = {"ok": "green", "warn": "yellow", "fail": "red"}
            table = Table(box=None, pad_edge=False)
            for column in ("check", "status", "detail"):
                table.add_column(column, overflow="fold")
            for c in checks:
                table.add_row(c.what, f"[{colour[c.status]}]{c.status}[/]", c.detail)
            console.print(table)
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(EXIT_RUN_FAILED)
