"""`conductor serve`: one long-lived Runtime behind an OpenAI-compatible HTTP API.

Built so far (issue 18): `serve()` in the foreground, with `GET /v1/models` and
`POST /v1/chat/completions` (plain and streamed); loopback only unless requests must carry a
bearer key; at most `server.max_concurrent_runs` runs at once. Not yet: the CLI as a client of
a running server, --detach/--stop/--status, auto-start, the local socket.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable

from conductor_cli.config.settings import Config
from conductor_cli.errors import InputError


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key(host: str, key_env: str | None) -> str | None:
    """The bearer key requests must carry: required off loopback, where anyone who reaches the
    port could otherwise spend the pool's API keys."""
    if key_env is None:
        if not is_loopback(host):
            raise InputError(
                f"--host {host} is reachable from other machines: give --api-key-env VAR "
                "(requests must then send that key as a bearer token)"
            )
        return None
    key = os.environ.get(key_env, "")
    if len(key) < 16:
        raise InputError(
            f"--api-key-env {key_env}: the variable is unset or shorter than 16 characters; "
            f"export {key_env}=<a long random key>"
        )
    return key


def serve(
    config: Config,
    host: str = "127.0.0.1",
    port: int | None = None,
    on_ready: Callable[[str], None] = lambda url: None,
    *,
    key_env: str | None = None,
) -> None:
    """Serve until interrupted; the models stay loaded between requests."""
    from conductor_cli.server.http_api import ConductorServer

    key = api_key(host, key_env)
    port = config.server.port if port is None else port
    try:
        server = ConductorServer(config, host, port, key=key)
    except OSError as e:
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    try:
        on_ready(server.url)
        server.serve_forever()
    finally:
        server.server_close()
