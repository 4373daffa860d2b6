"""`conductor serve`: one long-lived Runtime behind an OpenAI-compatible HTTP API.

Built so far (issue 18): `serve()` in the foreground on a loopback address, with
`GET /v1/models` and `POST /v1/chat/completions` (plain and streamed). Not yet: the CLI as a
client of a running server, --detach/--stop/--status, auto-start, the local socket, API keys
for other addresses, request limits.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from conductor_cli.config.settings import Config
from conductor_cli.errors import InputError

DEFAULT_PORT = 8787


def check_host(host: str) -> None:
    """Loopback only until requests can be authenticated: anyone who reaches the port could
    spend the pool's API keys."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InputError(
            f"--host {host}: conductor serve binds only to a loopback address (127.0.0.1) "
            "for now; API keys for other addresses are not built yet"
        )


def serve(
    config: Config,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    on_ready: Callable[[str], None] = lambda url: None,
) -> None:
    """Serve until interrupted; the models stay loaded between requests."""
    from conductor_cli.server.http_api import ConductorServer

    check_host(host)
    try:
        server = ConductorServer(config, host, port)
    except OSError as e:
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    try:
        on_ready(server.url)
        server.serve_forever()
    finally:
        server.server_close()
