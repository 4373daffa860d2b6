"""`conductor config`: where the config file is, what is in force, and a starter file."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import ConfigOption, config_path, handle_errors

app = typer.Typer(no_args_is_help=True)


@app.command("path")
@handle_errors
def path(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Print the config file's path."""
    from .. import paths

    typer.echo(str(config_path(ctx, config) or paths.config_file()))


@app.command("show")
@handle_errors
def show(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Print the settings in force, as TOML (the embedded default when there is no file)."""
    import tomli_w

    from ..config import config_to_dict, load_config

    cfg = load_config(config_path(ctx, config))
    where = str(cfg.source) if cfg.source else "embedded default (no config file)"
    typer.echo(f"# {where}\n" + tomli_w.dumps(config_to_dict(cfg)), nl=False)


@app.command("init")
@handle_errors
def init(
    ctx: typer.Context,
    config: ConfigOption = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write the default settings to the config file, to edit from there."""
    from .. import paths
    from ..config import Config, save_config
    from ..errors import ConfigError

    target = config_path(ctx, config) or paths.config_file()
    if target.exists() and not force:
        raise ConfigError(f"{target}: already exists; use --force to overwrite it.")
    save_config(Config(), target)
    typer.echo(str(target))
