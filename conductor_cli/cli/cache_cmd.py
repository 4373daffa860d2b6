"""`conductor cache`: where the response cache is, how big, and clearing it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from conductor_cli.cli.common import AsJson, ConfigOption, config_path, handle_errors
from conductor_cli.cli.output import print_json

if TYPE_CHECKING:
    from conductor_cli.runtime import Runtime

app = typer.Typer(no_args_is_help=True)


def _runtime(ctx: typer.Context, config: Path | None) -> Runtime:
    from conductor_cli.config import load_config
    from conductor_cli.runtime import Runtime

    return Runtime(load_config(config_path(ctx, config)))


@app.command("path")
@handle_errors
def path() -> None:
    """Print the cache directory."""
    from conductor_cli.disk import paths

    typer.echo(str(paths.cache_dir() / "responses"))


@app.command("stats")
@handle_errors
def stats(ctx: typer.Context, as_json: AsJson = False, config: ConfigOption = None) -> None:
    """Entries, size on disk and size limit; and the saved conductor prompt states."""
    with _runtime(ctx, config) as runtime:
        info = runtime.cache_report()
    state_dir = info.pop("prompt_state_dir")
    if as_json:
        print_json(info)
        return
    mb = info["bytes"] / 1e6
    limit = info["size_limit_bytes"] / 1e6
    typer.echo(f"{info['entries']} entries, {mb:.1f} MB of {limit:.0f} MB, in {info['path']}")
    typer.echo(
        f"{info['prompt_states']} saved conductor prompt states, "
        f"{info['prompt_state_bytes'] / 1e6:.1f} MB, in {state_dir}"
    )


@app.command("clear")
@handle_errors
def clear(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Delete every cached response, saved conductor prompt state, converted training base and
    16-bit model copy (made again when needed)."""
    with _runtime(ctx, config) as runtime:
        removed, states, bases, copies = runtime.clear_caches()
    typer.echo(
        f"removed {removed} entries, {states} prompt states, {bases} converted training bases "
        f"and {copies} 16-bit model copies"
    )
