"""`conductor config`: where the config file is, what is in force, and a starter file."""

from __future__ import annotations

from typing import Annotated

import typer

from conductor_cli.cli.common import ConfigOption, config_path, config_target, handle_errors

app = typer.Typer(no_args_is_help=True)

KeyArg = Annotated[
    str,
    typer.Argument(
        help="Dotted key: conductor.max_steps, workers.NAME.model, mcp_servers.NAME.command"
    ),
]


@app.command("path")
@handle_errors
def path(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Print the config file's path."""
    typer.echo(str(config_target(ctx, config)))


@app.command("show")
@handle_errors
def show(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Print the settings in force, as TOML (the embedded default when there is no file)."""
    import tomli_w

    from conductor_cli.config import config_to_dict, load_config

    cfg = load_config(config_path(ctx, config))
    where = str(cfg.source) if cfg.source else "embedded default (no config file)"
    typer.echo(f"# {where}\n" + tomli_w.dumps(config_to_dict(cfg)), nl=False)


@app.command("init")
@handle_errors
def init(
    ctx: typer.Context,
    config: ConfigOption = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    preset: Annotated[
        str,
        typer.Option(
            "--preset",
            help="team: the embedded default (SmolLM2, Qwen2.5-Coder-1.5B and the python tool, "
            "planned by the conductor trained for them); small-team: the same with the 0.5B "
            "coder (half the download, less often right); smollm2: SmolLM2 alone (98 MB, "
            "instant, weak).",
        ),
    ] = "team",
) -> None:
    """Write a commented starter file: the defaults, and examples for OpenAI, Anthropic, a
    local server, Ollama and a bigger GGUF, ready to uncomment."""
    from conductor_cli.config import PRESETS, starter_config
    from conductor_cli.disk.atomic import atomic_write
    from conductor_cli.errors import ConfigError

    if preset not in PRESETS:
        raise ConfigError(f"--preset {preset}: no such preset; use one of {', '.join(PRESETS)}.")
    target = config_target(ctx, config)
    if target.exists() and not force:
        raise ConfigError(f"{target}: already exists; use --force to overwrite it.")
    atomic_write(target, starter_config(preset).encode("utf-8"))
    typer.echo(str(target))


@app.command("get")
@handle_errors
def get(
    ctx: typer.Context,
    key: KeyArg,
    config: ConfigOption = None,
) -> None:
    """Print one setting in force (a section or a worker prints as TOML)."""
    import tomli_w

    from conductor_cli.config import get_value, load_config

    value = get_value(load_config(config_path(ctx, config)), key)
    if isinstance(value, dict):
        typer.echo(tomli_w.dumps(value), nl=False)
    elif value is None:
        typer.echo("")  # unset optional key: an empty line, exit 0
    elif isinstance(value, bool):
        typer.echo("true" if value else "false")
    elif isinstance(value, tuple | list):  # one item a line, for shell loops
        typer.echo("".join(f"{item}\n" for item in value), nl=False)
    else:
        typer.echo(str(value))


# A value may start with '-' (a server's args "-y pkg", a negative number): not an option.
@app.command("set", context_settings={"ignore_unknown_options": True})
@handle_errors
def set_(
    ctx: typer.Context,
    key: KeyArg,
    value: Annotated[str, typer.Argument(help="The new value, read as the key's type.")],
    config: ConfigOption = None,
) -> None:
    """Change one setting in the config file; everything else in it stays."""
    from conductor_cli.config import load_raw, save_raw, set_value

    target = config_target(ctx, config)
    save_raw(target, set_value(load_raw(target), key, value))
    typer.echo(f"{key} = {value}  ({target})")


@app.command("edit")
@handle_errors
def edit(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Open the config file in $VISUAL or $EDITOR; it is saved only if it is valid."""
    import os
    import shlex
    import subprocess
    import sys

    from conductor_cli.config import load_config
    from conductor_cli.disk.atomic import atomic_write
    from conductor_cli.errors import ConfigError

    target = config_target(ctx, config)
    if not target.exists():
        from conductor_cli.config import starter_config

        atomic_write(target, starter_config().encode("utf-8"))  # start as `config init` would
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    # The editor works on a copy next to the file: the file itself changes only when the copy
    # is valid, so a broken edit, a crash or Ctrl-C in the editor cannot damage it.
    draft = target.with_name(f".{target.name}.edit.toml")
    atomic_write(draft, target.read_bytes())
    try:
        while True:
            try:
                status = subprocess.call([*shlex.split(editor), str(draft)])
            except OSError as e:
                raise ConfigError(
                    f"cannot run the editor {editor!r} ({e.strerror}); set $VISUAL or $EDITOR."
                ) from None
            if status != 0:
                raise ConfigError(
                    f"{target}: the editor exited with status {status}; the file is unchanged."
                )
            try:
                load_config(draft)
            except ConfigError as e:
                problem = str(e).replace(str(draft), str(target))
                if sys.stdin.isatty() and typer.confirm(f"{problem}\nEdit again?", default=True):
                    continue
                raise ConfigError(f"{problem} The file is unchanged.") from None
            atomic_write(target, draft.read_bytes())
            typer.echo(f"saved {target}")
            return
    finally:
        draft.unlink(missing_ok=True)
