"""A run ended mid-generation stops the model within a token or two (issue 59): its client's
Ctrl-C, SIGTERM or death, and a hung-up HTTP client of each API, streamed or not. Measured
from outside: the background server's CPU time stops growing. On the real embedded model."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conductor_cli.config.settings import CODER_MODEL
from conductor_cli.server import local

from .conftest import run_cli, start_cli

# A worker that writes for half a minute or more on 2 cores if nothing stops it (SmolLM2 stops
# after a few hundred tokens whatever it is asked).
CONFIG = f"""
[conductor]
max_steps = 1

[[workers]]
name = "writer"
model = "gguf:{CODER_MODEL}"
description = "writes long stories"
max_tokens = 3000
stop_loops = false

[server]
port = 0
"""
# Asked this, the coder writes about 1,000 tokens of code, some 40 s here.
TASK = (
    "Write a complete Python module implementing a text adventure game with 30 rooms, items, "
    "a parser and save/load, with docstrings for every function. Write all of the code."
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_generating(pid: int, timeout: float = 120.0) -> None:
    """Until the server has spent over half a second of CPU in each of four 1-second windows
    in a row: past planning (the models are loaded before the run), the writer generates."""
    deadline = time.monotonic() + timeout
    busy = 0
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(1.0)
        busy = busy + 1 if cpu_seconds(pid) - before > 0.5 else 0
        if busy == 4:
            return
    raise AssertionError("the server never generated for 4 s")


def idle_after(pid: int) -> float:
    """CPU seconds the server spends in 2 s, measured from 1 s after the run was ended."""
    time.sleep(1.0)
    before = cpu_seconds(pid)
    time.sleep(2.0)
    return cpu_seconds(pid) - before


@pytest.fixture
def server(tmp_path: Path, gguf_path: Path, coder_pulled: Path) -> Iterator[tuple[Path, int]]:
    """A background server of this test's own home (conftest's), its models loaded."""
    config = tmp_path / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    workflow = tmp_path / "wf.json"
    step = {"worker": "writer", "task": "Answer the question.", "sees": []}
    workflow.write_text(json.dumps({"steps": [step]}))
    assert run_cli("--config", str(config), "serve", "--detach").returncode == 0
    info = local.read_info(local.files_for(config))
    assert info is not None
    try:
        yield config, info.pid
    finally:
        run_cli("--config", str(config), "serve", "--stop")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_ending_the_cli_client_stops_the_generation(
    server: tuple[Path, int], sig: signal.Signals
) -> None:
    config, pid = server
    workflow = config.parent / "wf.json"
    proc = start_cli("--config", str(config), "run", "--no-cache", str(workflow), TASK)
    try:
        wait_generating(pid)
    finally:
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    spent = idle_after(pid)
    assert spent < 0.4, f"the server spent {spent:.2f} s of CPU after its client left"


def _post(url: str, path: str, body: dict[str, object]) -> socket.socket:
    parts = urlsplit(url)
    conn = socket.create_connection((parts.hostname, parts.port), timeout=30)
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {parts.hostname}\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(data)}\r\nAuthorization: Bearer x\r\nx-api-key: x\r\n\r\n"
    conn.sendall(head.encode() + data)
    return conn


@pytest.fixture(scope="module")
def http_server(
    tmp_path_factory: pytest.TempPathFactory, models_dir: Path, coder_pulled: Path
) -> Iterator[tuple[str, int]]:
    """One background server for the API tests (their runs end one at a time, and each is
    measured idle first): its own home and runtime folder, as conftest gives each test."""
    home = tmp_path_factory.mktemp("cancel-home")
    config = home / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    env = {**os.environ, "CONDUCTOR_MODELS_DIR": str(models_dir), "CONDUCTOR_SERVER_AUTO": "0"}
    for name in ("CONDUCTOR_CONFIG", "CONDUCTOR_DATA_DIR", "CONDUCTOR_CACHE_DIR"):
        env.pop(name, None)
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"XDG_{name}_HOME"] = str(home / name.lower())
    env["CONDUCTOR_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="cr-", dir="/tmp")
    command = [sys.executable, "-m", "conductor_cli", "--config", str(config), "serve"]
    started = subprocess.run([*command, "--detach"], env=env, capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    shown = subprocess.run([*command, "--status", "--json"], env=env, capture_output=True)
    status = json.loads(shown.stdout)
    try:
        yield status["listening"]["tcp"], status["pid"]
    finally:
        subprocess.run([*command, "--stop"], env=env, capture_output=True)
        shutil.rmtree(env["CONDUCTOR_RUNTIME_DIR"], ignore_errors=True)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": TASK}]}),
        ("/v1/responses", {"input": TASK}),
        ("/v1/messages", {"max_tokens": 3000, "messages": [{"role": "user", "content": TASK}]}),
    ],
    ids=["chat", "responses", "messages"],
)
def test_a_hung_up_http_client_stops_the_generation(
    http_server: tuple[str, int], path: str, body: dict[str, object], stream: bool
) -> None:
    url, pid = http_server
    assert idle_after(pid) < 0.4  # nothing left running from the test before
    conn = _post(url, path, {"model": "conductor", "stream": stream, **body})
    try:
        wait_generating(pid)
    finally:
        conn.close()  # the client hangs up mid-answer
    spent = idle_after(pid)
    assert spent < 0.4, f"the server spent {spent:.2f} s of CPU after its client left ({path})"
