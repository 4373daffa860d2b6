"""`conductor serve`: the OpenAI-compatible server in the foreground."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from conductor_cli.cli.common import ConfigOption, config_path, handle_errors


@handle_errors
def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to bind; off loopback it needs --api-key-env.")
    ] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(help="TCP port (default: server.port, 8787; 0: any free one).")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the bearer key every request must send."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Keep the conductor and its pool loaded and answer OpenAI chat-completion requests."""
    from conductor_cli.config.settings import load_config
    from conductor_cli.server import serve as run_server

    cfg = load_config(config_path(ctx, config))

    def ready(url: str) -> None:
        sys.stderr.write(f'conductor: serving {url}/v1 (model "conductor"); Ctrl-C stops\n')
        sys.stderr.flush()

    run_server(cfg, host, port, ready, key_env=api_key_env)
