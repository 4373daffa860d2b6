"""`conductor serve`: one long-lived Runtime behind an OpenAI-compatible HTTP API.

`serve()` listens on TCP (OpenAI's API and the CLI's) and on a local socket (the CLI's,
0600 in a 0700 runtime dir); `client` is the CLI's side, `daemon` starts, stops and asks a
background server. Loopback only unless requests must carry a bearer key; at most
`server.max_concurrent_runs` runs at once.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conductor_cli.config.settings import Config
from conductor_cli.errors import InputError
from conductor_cli.exports import lazy_exports


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
    config_file: Path | None = None,
    local_socket: bool = True,
    idle_exit: bool = False,
    detached: bool = False,
    any_port: bool = False,
    tcp: bool = True,
    env_id: str | None = None,
) -> None:
    """Serve until interrupted, stopped (`serve --stop`) or, with `idle_exit`, idle for
    server.idle_timeout_s; the models stay loaded between requests.

    `config_file` (as given; None: the default place) is watched and re-read when it changes.
    `any_port`: when the configured port is taken, take any free one (a background server
    must start; its pid file says where it listens). `tcp=False`: the local socket only (a
    server `[server] auto` starts). `env_id`: the environment hash the starting CLI computed
    (server/local.py), which names the local files.
    """
    from conductor_cli.server import local
    from conductor_cli.server.app import ConfigWatch, ServerApp
    from conductor_cli.server.http_api import LocalSocketServer

    key = api_key(host, key_env)
    port = config.server.port if port is None else port
    files = local.prepare(local.files_for(config_file, env_id)) if local_socket else None
    app = ServerApp(
        config,
        watch=ConfigWatch(config_file),
        idle_timeout_s=config.server.idle_timeout_s if idle_exit else None,
    )
    listeners: list[Any] = []
    running: list[Any] = []  # shutdown() waits forever for a listener never started
    try:
        if files is not None:
            _claim(files)
            listeners.append(LocalSocketServer(files.socket, app))
            app.urls["socket"] = str(files.socket)
        if tcp or files is None:
            listeners.append(_bind_tcp(host, port, key, app, any_port))
            app.urls["tcp"] = listeners[-1].url
        if files is not None:
            info = local.ServerInfo(
                os.getpid(),
                str(files.socket),
                app.urls.get("tcp"),
                files.config,
                app.started,
                detached,
            )
            local.write_info(files, info)
        for listener in listeners:
            threading.Thread(target=listener.serve_forever, daemon=True).start()
            running.append(listener)
        # The first run after a start as fast as the second (issue 59): a server started by
        # hand is ready when it says so; a background one says so at once and loads behind.
        app.warm(wait=not idle_exit)
        on_ready(app.urls.get("tcp") or app.urls["socket"])
        _wait(app)
    finally:
        _shut_down(running)
        for listener in listeners:
            listener.server_close()
        if files is not None:
            local.remove_if_ours(files, os.getpid())
        app.close()


def _shut_down(listeners: list[Any]) -> None:
    """Each listener sees a shutdown within its poll interval (half a second): asked all at
    once, not one after another."""
    threads = [threading.Thread(target=listener.shutdown) for listener in listeners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _claim(files: Any) -> None:
    from conductor_cli.server import local

    if local.socket_answers(files.socket):
        info = local.read_info(files)
        pid = f" (pid {info.pid})" if info else ""
        raise InputError(
            f"a server for this config already runs{pid}: see `conductor serve --status`, "
            "stop it with `conductor serve --stop`"
        )
    local.clean_stale(files)


def _bind_tcp(host: str, port: int, key: str | None, app: Any, any_port: bool) -> Any:
    from conductor_cli.server.http_api import ConductorServer

    try:
        return ConductorServer(host=host, port=port, key=key, app=app)
    except OSError as e:
        if any_port and e.errno == errno.EADDRINUSE:
            return ConductorServer(host=host, port=0, key=key, app=app)
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def _wait(app: Any) -> None:
    """Until a stop request, or the idle limit (short waits: Ctrl-C must get through)."""
    while not app.stop_requested.wait(0.2):
        limit = app.idle_timeout_s
        if limit is not None and app.idle_for() > limit:
            return


# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "Endpoint": "client",
    "RemoteResult": "client",
    "ServerGone": "client",
}
__all__ = ["Endpoint", "RemoteResult", "ServerGone", "client", "daemon", "serve"]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.server.client import (
        Endpoint,
        RemoteResult,
        ServerGone,
    )
