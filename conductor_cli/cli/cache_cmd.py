"""`conductor cache`: where the response cache is, how big, and clearing it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .ask import AsJson
from .common import ConfigOption, config_path, handle_errors
from .present import print_json

if TYPE_CHECKING:
    from ..cache import ResponseCache

app = typer.Typer(no_args_is_help=True)


def _open(ctx: typer.Context, config: Path | None) -> ResponseCache:
    from ..cache import ResponseCache
    from ..config import load_config

    cfg = load_config(config_path(ctx, config))
    return ResponseCache(size_limit_mb=cfg.cache.size_limit_mb)


@app.command("path")
@handle_errors
def path() -> None:
    """Print the cache directory."""
    from .. import paths

    typer.echo(str(paths.cache_dir() / "responses"))


@app.command("stats")
@handle_errors
def stats(ctx: typer.Context, as_json: AsJson = False, config: ConfigOption = None) -> None:
    """Entries, size on disk and size limit."""
    cache = _open(ctx, config)
    info = cache.stats()
    cache.close()
    if as_json:
        print_json(info)
        return
    mb = info["bytes"] / 1e6
    limit = info["size_limit_bytes"] / 1e6
    typer.echo(f"{info['entries']} entries, {mb:.1f} MB of {limit:.0f} MB, in {info['path']}")


@app.command("clear")
@handle_errors
def clear(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Delete every cached response."""
    cache = _open(ctx, config)
    removed = cache.clear()
    cache.close()
    typer.echo(f"removed {removed} entries")
