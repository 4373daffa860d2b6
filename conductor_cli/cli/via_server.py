"""`ask` and `run` through a running server (warm models, litellm imported once), else
in-process. `[server] auto` starts a background server when none runs; a dead one is noted in
one line and its files removed. Imports no model code: the server holds it."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from conductor_cli.cli.present import watching
from conductor_cli.errors import ConductorError
from conductor_cli.server.client import Endpoint, RemoteResult, ServerGone
from conductor_cli.server.wire import RunRequest


def note(line: str) -> None:
    sys.stderr.write(f"conductor: note: {line}\n")
    sys.stderr.flush()


def pick_endpoint(config_path: Path | None, auto: bool, no_server: bool) -> Endpoint | None:
    """The server this run goes to, or None for in-process."""
    if no_server:
        return None
    from conductor_cli.server import daemon

    endpoint, gone = daemon.find(config_path)
    if endpoint is not None:
        return endpoint
    if auto:
        try:
            return daemon.ensure(config_path)
        except ConductorError as e:
            note(f"could not start a server ({e}); running in-process")
            return None
    if gone is not None:
        note(f"{gone}; running in-process")
    return None


def pull_first(cfg: Any, *, conductor: bool) -> None:
    """Download missing catalog models here, where the progress bar shows, before the server
    would fetch them silently."""
    from conductor_cli.models.catalog import load_catalog
    from conductor_cli.run.pool import missing_catalog_models

    missing = missing_catalog_models(cfg, load_catalog(), conductor=conductor)
    if missing:
        from conductor_cli.models import fetch

        fetch.pull_missing(missing)


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
