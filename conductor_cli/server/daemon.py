"""A background server: find the one for this config, start one (`serve --detach`, `auto`),
ask it how it is (`--status`) and stop it (`--stop`). Standard library only."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conductor_cli.errors import ConductorError
from conductor_cli.server import client, local
from conductor_cli.server.client import Endpoint, ServerGone

# A server starts in well under a second (models load on first use); a slow disk or a cold
# Python may take longer, and the CLI falls back to in-process past this.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


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


def start(config_path: Path | None, *, idle_exit: bool = True) -> local.ServerInfo:
    """Start a background server for this config unless one runs; return its pid file."""
    files = local.prepare(local.files_for(config_path))
    with local.start_lock(files):
        if local.socket_answers(files.socket):
            info = local.read_info(files)
            if info is not None:
                return info
        local.clean_stale(files)
        command = [sys.executable, "-m", "conductor_cli"]
        if config_path is not None:
            command += ["--config", str(config_path.absolute())]
        command += ["serve", "--background"]
        if not idle_exit:
            command.append("--no-idle-exit")
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
                return info
            time.sleep(0.05)
        proc.terminate()
        raise ConductorError(
            f"the background server did not start within {START_TIMEOUT_S:.0f} s (log: {files.log})"
        )


def ensure(config_path: Path | None) -> Endpoint:
    """`[server] auto`: the running server, or a newly started one."""
    endpoint, _ = find(config_path)
    if endpoint is not None:
        return endpoint
    info = start(config_path)
    return Endpoint(socket=Path(info.socket))


def server_status(config_path: Path | None) -> dict[str, Any] | None:
    """What the server for this config reports about itself; None when none runs."""
    endpoint, _ = find(config_path)
    if endpoint is None:
        return None
    try:
        return client.status(endpoint)
    except ServerGone:
        return None


def stop(config_path: Path | None) -> int | None:
    """Stop the local server for this config; its pid, or None when none ran."""
    files = local.files_for(config_path)
    info = local.read_info(files)
    if not local.socket_answers(files.socket):
        local.clean_stale(files)
        return None
    pid = info.pid if info else None
    try:
        client.stop(Endpoint(socket=files.socket))
    except ServerGone:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if pid is None or not local.pid_alive(pid):
            break
        _reap(pid)
        time.sleep(0.05)
    else:
        if pid is not None:
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
