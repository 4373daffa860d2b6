"""A background server: find the one for this config, start one (`serve --detach`, `auto`),
ask it how it is (`--status`) and stop it (`--stop`). Standard library only.

A CLI uses the server of its config, data place and run environment (server/local.py); one
started since its keys or endpoints changed is another server, and `--stop` stops them all."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conductor_cli.errors import ConductorError, InputError
from conductor_cli.server import client, local
from conductor_cli.server.client import Endpoint, ServerGone

# A server starts in well under a second (models load on first use); a slow disk or a cold
# Python may take longer, and the CLI falls back to in-process past this.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
# Beats the config's server.auto: 1/true/yes/on or 0/false/no/off (the tests set 0).
AUTO_ENV = "CONDUCTOR_SERVER_AUTO"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def auto_wanted(configured: bool) -> bool:
    """Whether ask/run/replay --live may start a server: CONDUCTOR_SERVER_AUTO when set,
    else the config's server.auto."""
    raw = os.environ.get(AUTO_ENV, "").strip().lower()
    if not raw:
        return configured
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise InputError(f"{AUTO_ENV}={os.environ[AUTO_ENV]!r}: give 1 (start a server) or 0 (never)")


def find(config_path: Path | None) -> tuple[Endpoint | None, str | None]:
    """The server to use for this config: CONDUCTOR_SERVER's, or a live local one. Else None,
    with a note when a dead server's files were there (they are removed)."""
    remote = client.remote_endpoint()
    if remote is not None:
        return remote, None
    files = local.files_for(config_path)
    if not files.socket.exists() and not files.pid.exists():
        return None, None
    if local.socket_answers(files.socket):
        return Endpoint(socket=files.socket), None
    local.clean_stale(files)
    return None, "the server for this config is gone (its stale socket and pid file removed)"


def start(
    config_path: Path | None, *, idle_exit: bool = True, tcp: bool = True
) -> tuple[local.ServerInfo, bool]:
    """Start a background server for this config and environment unless one runs: its pid
    file, and whether this call started it. `tcp=False`: the local socket only (`auto`).
    Raises ConductorError when it cannot start (the runtime dir unusable, the server failing)."""
    try:
        return _start(config_path, idle_exit=idle_exit, tcp=tcp)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        raise ConductorError(f"{where}{e.strerror or e}") from None


def _start(
    config_path: Path | None, *, idle_exit: bool, tcp: bool
) -> tuple[local.ServerInfo, bool]:
    files = local.prepare(local.files_for(config_path))
    with local.start_lock(files):
        if local.socket_answers(files.socket):
            info = local.read_info(files)
            if info is not None:
                return info, False
        local.clean_stale(files)
        command = [sys.executable, "-m", "conductor_cli"]
        if config_path is not None:
            command += ["--config", str(config_path.absolute())]
        # The CLI's environment hash names the server's files: the server inherits this very
        # environment, and nothing it imports later can move it elsewhere.
        command += ["serve", "--background", "--env-id", files.key.rsplit("-", 1)[1]]
        if not idle_exit:
            command.append("--no-idle-exit")
        if not tcp:
            command.append("--socket-only")
        fd = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=fd,
                start_new_session=True,  # the terminal's Ctrl-C is for the CLI, not for it
                close_fds=True,
            )
        finally:
            os.close(fd)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ConductorError(
                    f"the background server exited with status {proc.returncode}: "
                    f"{_last_line(files.log)} (log: {files.log})"
                )
            info = local.read_info(files)
            if info is not None and info.pid == proc.pid and local.socket_answers(files.socket):
                return info, True
            time.sleep(0.05)
        proc.terminate()
        raise ConductorError(
            f"the background server did not start within {START_TIMEOUT_S:.0f} s (log: {files.log})"
        )


def ensure(config_path: Path | None) -> tuple[Endpoint, local.ServerInfo | None]:
    """`[server] auto`: the running server, or a newly started one on the local socket only
    (nothing but this user's CLIs reaches it); the second item is the pid file of a server
    this call started, else None."""
    endpoint, _ = find(config_path)
    if endpoint is not None:
        return endpoint, None
    info, started = start(config_path, tcp=False)
    return Endpoint(socket=Path(info.socket)), info if started else None


def server_status(config_path: Path | None) -> dict[str, Any] | None:
    """What the server for this config and environment reports about itself; None when none
    runs."""
    endpoint, _ = find(config_path)
    if endpoint is None:
        return None
    try:
        return client.status(endpoint)
    except ServerGone:
        return None


def other_servers(config_path: Path | None) -> list[local.ServerInfo]:
    """The live servers of this config started in another environment (their keys, tokens,
    endpoints or proxies differ from this process's): this CLI does not use them."""
    mine = local.files_for(config_path).key
    out = []
    for files in local.servers_of_config(config_path):
        if files.key == mine:
            continue
        info = local.read_info(files)
        if info is not None and local.pid_alive(info.pid) and local.socket_answers(files.socket):
            out.append(info)
    return out


def stop(config_path: Path | None) -> list[int]:
    """Stop every local server of this config and data place, whatever environment each
    started in; the pids stopped (none: none ran). Stale files are removed on the way."""
    stopped = []
    for files in local.servers_of_config(config_path):
        pid = _stop_one(files)
        if pid is not None:
            stopped.append(pid)
    return stopped


def _stop_one(files: local.ServerFiles) -> int | None:
    info = local.read_info(files)
    if not local.socket_answers(files.socket):
        local.clean_stale(files)
        return None
    pid = info.pid if info else None
    try:
        client.stop(Endpoint(socket=files.socket))
    except ServerGone:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if pid is None or not local.pid_alive(pid):
            break
        _reap(pid)
        time.sleep(0.05)
    else:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    local.clean_stale(files)
    return pid


def _reap(pid: int) -> None:
    """A server this process started is its child: collect it, or it lingers as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(the log is empty)"
