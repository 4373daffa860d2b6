"""`conductor cache`: where the response cache is, how big, and clearing it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from conductor_cli.cli.common import AsJson, ConfigOption, config_path, handle_errors
from conductor_cli.cli.present import print_json

if TYPE_CHECKING:
    from conductor_cli.storage.cache import ResponseCache

app = typer.Typer(no_args_is_help=True)


def _open(ctx: typer.Context, config: Path | None) -> ResponseCache:
    from conductor_cli.config.settings import load_config
    from conductor_cli.storage.cache import ResponseCache

    cfg = load_config(config_path(ctx, config))
    return ResponseCache(size_limit_mb=cfg.cache.size_limit_mb)


@app.command("path")
@handle_errors
def path() -> None:
    """Print the cache directory."""
    from conductor_cli.storage import paths

    typer.echo(str(paths.cache_dir() / "responses"))


@app.command("stats")
@handle_errors
def stats(ctx: typer.Context, as_json: AsJson = False, config: ConfigOption = None) -> None:
    """Entries, size on disk and size limit; and the saved conductor prompt states."""
    from conductor_cli.backends.prefix_state import PrefixStateStore

    cache = _open(ctx, config)
    info = cache.stats()
    cache.close()
    store = PrefixStateStore.default()
    info["prompt_states"] = len(store.files())
    info["prompt_state_bytes"] = store.size_bytes()
    if as_json:
        print_json(info)
        return
    mb = info["bytes"] / 1e6
    limit = info["size_limit_bytes"] / 1e6
    typer.echo(f"{info['entries']} entries, {mb:.1f} MB of {limit:.0f} MB, in {info['path']}")
    typer.echo(
        f"{info['prompt_states']} saved conductor prompt states, "
        f"{info['prompt_state_bytes'] / 1e6:.1f} MB, in {store.directory}"
    )


@app.command("clear")
@handle_errors
def clear(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Delete every cached response and saved conductor prompt state."""
    from conductor_cli.backends.prefix_state import PrefixStateStore

    cache = _open(ctx, config)
    removed = cache.clear()
    cache.close()
    states = PrefixStateStore.default().clear()
    typer.echo(f"removed {removed} entries and {states} prompt states")
