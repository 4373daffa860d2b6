"""`conductor workers`: list, add, remove and test the worker pool in the config file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from conductor_cli.cli.common import AsJson, ConfigOption, config_path, config_target, handle_errors
from conductor_cli.cli.complete import worker_names
from conductor_cli.cli.output import print_json
from conductor_cli.models import spellings

app = typer.Typer(no_args_is_help=True)


def _load_raw(path: Path) -> dict[str, Any]:
    from conductor_cli.config import load_raw

    return load_raw(path)


def _save_raw(path: Path, raw: dict[str, Any]) -> None:
    from conductor_cli.config import save_raw

    save_raw(path, raw)


@app.command("list")
@handle_errors
def list_cmd(ctx: typer.Context, as_json: AsJson = False, config: ConfigOption = None) -> None:
    """List the workers the conductor can plan for."""
    from dataclasses import asdict

    from conductor_cli.config import load_config

    cfg = load_config(config_path(ctx, config))
    rows = [{k: v for k, v in asdict(w).items() if v is not None} for w in cfg.workers]
    if as_json:
        print_json(rows)
        return
    for r in rows:
        extra = f" fallback={r['fallback']}" if "fallback" in r else ""
        where = f" @ {r['api_base']}" if "api_base" in r else ""
        typer.echo(f"{r['name']}\t{r['model']}{where}{extra}\t{r.get('description', '')}")


@app.command("add")
@handle_errors
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Worker name, as the conductor will write it.")],
    model: Annotated[
        str,
        typer.Argument(help=f"One of {spellings()}; a bare name is a litellm model."),
    ],
    description: Annotated[
        str, typer.Option(help="Strengths, cost, speed (for the conductor).")
    ] = "",
    api_base: Annotated[
        str | None, typer.Option(help="Server URL, e.g. http://127.0.0.1:8000/v1")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable with the key.")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Most tokens per answer.")] = None,
    fallback: Annotated[str | None, typer.Option(help="Worker that takes over on failure.")] = None,
    config: ConfigOption = None,
) -> None:
    """Add a worker to the config file (created if missing)."""
    from conductor_cli.errors import ConfigError

    path = config_target(ctx, config)
    raw = _load_raw(path)
    workers = raw.setdefault("workers", [])
    if any(w.get("name") == name for w in workers):
        raise ConfigError(f"{path}: a worker named {name!r} exists; remove it first.")
    entry: dict[str, Any] = {"name": name, "model": model}
    options = {
        "description": description or None,
        "api_base": api_base,
        "api_key_env": api_key_env,
        "max_tokens": max_tokens,
        "fallback": fallback,
    }
    entry.update({k: v for k, v in options.items() if v is not None})
    workers.append(entry)
    _save_raw(path, raw)
    typer.echo(f"added {name} to {path}")
    from conductor_cli.config import load_config
    from conductor_cli.policy import pool_note

    # The embedded default's trained conductor plans only the team it was trained for.
    if (note := pool_note(load_config(path))) is not None:
        typer.echo(f"conductor: note: {note}", err=True)


@app.command("remove")
@handle_errors
def remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Worker name.", autocompletion=worker_names)],
    config: ConfigOption = None,
) -> None:
    """Remove a worker from the config file."""
    from conductor_cli.errors import ConfigError

    path = config_target(ctx, config)
    raw = _load_raw(path)
    workers = raw.get("workers", [])
    kept = [w for w in workers if w.get("name") != name]
    if len(kept) == len(workers):
        raise ConfigError(f"{path}: no worker named {name!r}.")
    raw["workers"] = kept
    _save_raw(path, raw)
    typer.echo(f"removed {name} from {path}")


@app.command("test")
@handle_errors
def test(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Workers to test (default: all).", autocompletion=worker_names),
    ] = None,
    as_json: AsJson = False,
    config: ConfigOption = None,
) -> None:
    """Send each worker a tiny prompt; report latency, or the error. Exit 1 if any failed."""
    from dataclasses import asdict

    from conductor_cli.config import load_config, restrict_workers
    from conductor_cli.errors import EXIT_RUN_FAILED
    from conductor_cli.runtime import Runtime

    cfg = restrict_workers(load_config(config_path(ctx, config)), names or [])
    with Runtime(cfg) as runtime:
        runtime.pull_missing(conductor=False)  # only the workers are probed
        rows = [asdict(r) for r in runtime.probe_workers()]
    if as_json:
        print_json(rows)
    else:
        for r in rows:
            status = (
                f"ok {r['seconds']:.2f}s  {r['reply']!r}" if r["ok"] else f"FAILED {r['error']}"
            )
            typer.echo(f"{r['name']}\t{status}")
    if not all(r["ok"] for r in rows):
        raise typer.Exit(EXIT_RUN_FAILED)
