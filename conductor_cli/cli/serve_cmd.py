"""`conductor serve`: the server in the foreground, or a background one started, asked, stopped."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from conductor_cli.cli.common import AsJson, ConfigOption, config_path, handle_errors
from conductor_cli.cli.output import print_json

if TYPE_CHECKING:
    from conductor_cli.config import Config


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
    detach: Annotated[
        bool, typer.Option("--detach", help="Start a background server and return.")
    ] = False,
    stop: Annotated[
        bool,
        typer.Option(
            "--stop", help="Stop this config's servers, whatever environment each started in."
        ),
    ] = False,
    status: Annotated[
        bool,
        typer.Option("--status", help="Pid, uptime, loaded models and runs served, or exit 1."),
    ] = False,
    replica: Annotated[
        bool,
        typer.Option(
            "--replica",
            help="One of several servers of this config behind a gateway (LiteLLM): TCP only, "
            "no local socket, so any number run side by side.",
        ),
    ] = False,
    background: Annotated[bool, typer.Option("--background", hidden=True)] = False,
    no_idle_exit: Annotated[bool, typer.Option("--no-idle-exit", hidden=True)] = False,
    socket_only: Annotated[bool, typer.Option("--socket-only", hidden=True)] = False,
    env_id: Annotated[str | None, typer.Option("--env-id", hidden=True)] = None,
    as_json: AsJson = False,
    config: ConfigOption = None,
) -> None:
    """Keep the conductor and its pool loaded and answer OpenAI chat-completion requests."""
    from conductor_cli.errors import InputError

    path = config_path(ctx, config)
    if sum([detach, stop, status]) > 1:
        raise InputError("--detach, --stop and --status exclude each other; pick one.")
    if replica and (detach or stop or status or socket_only):
        raise InputError(
            "--replica serves in the foreground on TCP alone; it excludes --detach, --stop and "
            "--status (a replica has no local socket to ask: use its /v1/models URL)"
        )
    if status:
        _status(path, as_json)
        return
    if stop:
        _stop(path)
        return
    from conductor_cli.config import load_config

    cfg = load_config(path)  # a broken config fails here, not in a background process
    from conductor_cli.policy import pool_note

    note = pool_note(cfg)
    if note is not None:
        sys.stderr.write(f"conductor: note: {note}\n")
    if detach:
        _detach(path, cfg, host, port, api_key_env)
        return
    from conductor_cli.server import serve as run_server

    def ready(url: str) -> None:
        if not background:
            role = ", a replica" if replica else ""
            sys.stderr.write(
                f'conductor: serving {url}/v1 (model "conductor"{role}); Ctrl-C stops\n'
            )
            sys.stderr.flush()

    run_server(
        cfg,
        host,
        port,
        ready,
        key_env=api_key_env,
        config_file=path,
        local_socket=not replica,
        idle_exit=background and not no_idle_exit,
        detached=background,
        any_port=background and port is None,
        tcp=not socket_only,
        env_id=env_id,
    )


def _detach(
    path: Path | None, cfg: Config, host: str, port: int | None, key_env: str | None
) -> None:
    from conductor_cli.errors import InputError
    from conductor_cli.server import daemon

    if host != "127.0.0.1" or port is not None or key_env is not None:
        raise InputError(
            "--detach serves on 127.0.0.1 at server.port; for another address or port run "
            "`conductor serve` in the foreground (under your service manager)"
        )
    info, started = daemon.start(path, idle_exit=True)
    if not started and info.url is None:
        raise InputError(
            f"a background server for this config already runs on its local socket only (pid "
            f"{info.pid}, started by server.auto); `conductor serve --stop` stops it, then "
            "`conductor serve --detach` starts one on TCP too"
        )
    _await_warm(info)
    sys.stderr.write(
        f"conductor: serving {info.url}/v1 in the background (pid {info.pid}); it exits after "
        f"{cfg.server.idle_timeout_s:g} s idle. `conductor serve --stop` stops it\n"
    )


def _await_warm(info: Any, timeout_s: float = 600.0) -> None:
    """Until the server has loaded what its first run uses (`serve --detach` returns ready)."""
    import time

    from conductor_cli.server import client

    endpoint = client.Endpoint(socket=Path(info.socket))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if client.status(endpoint).get("warm", "ready") == "ready":
                return
        except client.ServerGone:
            return  # the next command says what became of it
        time.sleep(0.1)


def _stop(path: Path | None) -> None:
    from conductor_cli.server import daemon

    pids = daemon.stop(path)
    if not pids:
        sys.stderr.write("conductor: no server runs for this config\n")
        raise typer.Exit(1)
    for pid in pids:
        sys.stderr.write(f"conductor: stopped the server (pid {pid})\n")


def _status(path: Path | None, as_json: bool) -> None:
    from conductor_cli.server import daemon

    doc = daemon.server_status(path)
    others = [{"pid": o.pid, "started": o.started} for o in daemon.other_servers(path)]
    elsewhere = (
        f"conductor: {len(others)} other server(s) of this config run (pid "
        f"{', '.join(str(o['pid']) for o in others)}), started with other keys, endpoints or "
        "proxies in the environment; this shell does not use them. `conductor serve --stop` "
        "stops them all\n"
    )
    if doc is None:
        if as_json:
            print_json({"running": False, "other_servers": others})
        else:
            sys.stderr.write("conductor: no server runs for this config and environment\n")
            if others:
                sys.stderr.write(elsewhere)
        raise typer.Exit(1)
    if as_json:
        print_json({"running": True, **doc, "other_servers": others})
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc["started"]))
    models = ", ".join(doc.get("models_loaded") or []) or "none yet"
    lines = [
        f"pid           {doc['pid']}",
        f"listening     {', '.join(doc.get('listening', {}).values())}",
        f"config        {doc.get('config')}",
        f"started       {started} (up {doc['uptime_s']:g} s)",
        f"runs served   {doc['runs_served']} ({doc['active_runs']} under way)",
        f"models loaded {models}",
        f"litellm       {'started' if doc.get('litellm_helper') else 'not started'}",
    ]
    remote = doc.get("remote") or {}
    if remote:
        lines.append("remote        " + "; ".join(f"{n}: {s}" for n, s in remote.items()))
    if doc.get("idle_timeout_s"):
        lines.append(f"idle exit     after {doc['idle_timeout_s']:g} s without a request")
    sys.stdout.write("\n".join(lines) + "\n")
    if others:
        sys.stderr.write(elsewhere)
