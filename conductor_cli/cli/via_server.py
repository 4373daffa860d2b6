"""`ask` and `run` through a running server (warm models, litellm imported once), else
in-process. `[server] auto` (on by default; CONDUCTOR_SERVER_AUTO beats it) starts a background
server when none runs, and the command that starts it says so in one note; one that cannot
start, or a dead one, is noted in one line and the command runs in-process. Imports no model
code: the server holds it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conductor_cli.cli.output import note, watching
from conductor_cli.errors import ConductorError
from conductor_cli.server import Endpoint, RemoteResult, ServerGone
from conductor_cli.wire import RunRequest

if TYPE_CHECKING:
    from conductor_cli.config import ServerSettings


def pick_endpoint(
    config_path: Path | None, settings: ServerSettings, no_server: bool, *, quiet: bool = False
) -> Endpoint | None:
    """The server this run goes to, or None for in-process. A server this call starts is
    announced in one note (not with -q); one that cannot start leaves the run in-process, with
    one note."""
    if no_server:
        return None
    from conductor_cli.server import daemon

    auto = daemon.auto_wanted(settings.auto)
    try:
        endpoint, gone = daemon.find(config_path)
    except OSError:  # an unusable runtime dir: starting one there fails, with its note
        endpoint, gone = None, None
    if endpoint is not None:
        return endpoint
    if not auto:
        if gone is not None:
            note(f"{gone}; running in-process")
        return None
    try:
        endpoint, started = daemon.ensure(config_path)
    except (ConductorError, OSError) as e:
        note(f"could not start a background server ({e}); running in-process")
        return None
    if started is not None and not quiet:
        why = ""
        if daemon.other_servers(config_path):
            why = " (the one already running has other keys, endpoints or proxies; it idles out)"
        note(
            f"started a background server for this config{why} (pid {started.pid}); it keeps "
            f"models loaded between commands and exits after "
            f"{idle_text(settings.idle_timeout_s)} idle. Stop it: `conductor serve --stop`; "
            "turn it off: `conductor config set server.auto false` (or --no-server for one "
            "command)"
        )
    return endpoint


def idle_text(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:g} s"


def pull_first(cfg: Any, *, conductor: bool) -> None:
    """Download missing catalog models here, where the progress bar shows, before the server
    would fetch them silently."""
    from conductor_cli.models import load_catalog
    from conductor_cli.runtime import pull_models_for

    pull_models_for(cfg, load_catalog(), conductor=conductor)


def run(
    endpoint: Endpoint, request: RunRequest, *, quiet: bool, verbose: bool, as_json: bool
) -> RemoteResult | None:
    """The run on the server, drawn as an in-process run would be; None when the server is
    unreachable or died (the caller then runs in-process)."""
    from conductor_cli.server import client

    try:
        with watching(quiet=quiet, verbose=verbose, as_json=as_json) as (view, stream):
            return client.run(
                endpoint,
                dataclasses.replace(request, stream=stream),
                view,
                on_busy=lambda: note("the server runs server.max_concurrent_runs runs; waiting"),
            )
    except ServerGone as e:
        note(f"{e}; running in-process")
        return None
