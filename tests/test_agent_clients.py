"""The real agent clients from npm against `conductor serve` (issue 42): Codex CLI (Responses
API), qwen-code (chat completions, streamed) and Claude Code (Anthropic's Messages API,
streamed) each run the shell command the team's worker asked for and print the answer made
after it. Each client is
installed with npm once per session (npm's cache keeps it); the test is skipped, with one line
saying why, where npm or the package cannot be had. The worker that calls tools is
FakeToolCallingWorker (a fake model server); SmolLM2 really plans."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.run.agent import LOOP_TASK
from conductor_cli.server.http_api import ConductorServer

from .fake_tool_worker import FakeToolCallingWorker

CODEX = "@openai/codex@0.171.0"
QWEN_CODE = "@qwen-code/qwen-code@0.15.10"
CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.197"
MARK = "conductor-was-here"


def npm_install(package: str, where: Path) -> Path:
    """`package` installed under `where`; its bin directory. Skips the test when it cannot be."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed here: cannot install {package}")
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(where), package],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["npm failed"])[-1]
        pytest.skip(f"npm could not install {package}: {last}")
    return where / "node_modules" / ".bin"


@pytest.fixture(scope="session")
def codex_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return npm_install(CODEX, tmp_path_factory.mktemp("codex")) / "codex"


@pytest.fixture(scope="session")
def qwen_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return npm_install(QWEN_CODE, tmp_path_factory.mktemp("qwen-code")) / "qwen"


@pytest.fixture(scope="session")
def claude_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return npm_install(CLAUDE_CODE, tmp_path_factory.mktemp("claude-code")) / "claude"


@pytest.fixture
def worker() -> Iterator[FakeToolCallingWorker]:
    """Codex's shell tool is exec_command {"cmd"}; qwen-code's run_shell_command {"command"}."""
    fake = FakeToolCallingWorker(arguments=json.dumps({"cmd": f"echo {MARK}"}))
    yield fake
    fake.close()


@pytest.fixture
def served(
    tmp_path: Path, gguf_path: Path, worker: FakeToolCallingWorker
) -> Iterator[tuple[ConductorServer, FakeToolCallingWorker]]:
    config = tmp_path / "agent.toml"
    config.write_text(
        "[conductor]\nmax_steps = 1\n\n[[workers]]\n"
        f'name = "agent"\nmodel = "openai/fake-tools"\napi_base = "{worker.api_base}"\n'
        'description = "calls tools"\n',
        encoding="utf-8",
    )
    srv = ConductorServer(load_config(config), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, worker
    srv.shutdown()
    srv.server_close()


def _traced_tasks(home: Path) -> list[list[str]]:
    traces = sorted((home / "data" / "conductor" / "traces").glob("*.json"))
    return [[s["task"] for s in json.loads(t.read_text())["steps"]] for t in traces]


def test_codex_exec_runs_the_command_the_team_asked_for(
    codex_bin: Path,
    served: tuple[ConductorServer, FakeToolCallingWorker],
    tmp_path: Path,
    isolated_home: Path,
) -> None:
    server, worker = served
    home = tmp_path / "codex-home"
    home.mkdir()
    # docs/serve.md gives this provider block.
    (home / "config.toml").write_text(
        'model = "conductor"\nmodel_provider = "conductor"\n\n'
        "[model_providers.conductor]\n"
        f'name = "conductor"\nbase_url = "{server.url}/v1"\n'
        'env_key = "CONDUCTOR_API_KEY"\nwire_api = "responses"\n',
        encoding="utf-8",
    )
    env = dict(os.environ, CODEX_HOME=str(home), CONDUCTOR_API_KEY="unused")
    done = subprocess.run(
        [str(codex_bin), "exec", "--skip-git-repo-check", "List the files here."],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Codex ran the worker's call and sent its output back; the worker's answer after it is
    # what `codex exec` prints last.
    assert len(worker.requests) == 2, [r["messages"][-1] for r in worker.requests]
    result = worker.requests[1]["messages"][-1]
    assert result["role"] == "tool" and MARK in result["content"]
    assert done.stdout.strip().startswith("done:") and MARK in done.stdout
    tasks = _traced_tasks(isolated_home)
    assert tasks[-1] == [LOOP_TASK] and len(tasks) == 2


def test_qwen_code_runs_the_command_the_team_asked_for(
    qwen_bin: Path,
    served: tuple[ConductorServer, FakeToolCallingWorker],
    tmp_path: Path,
    isolated_home: Path,
) -> None:
    server, worker = served
    worker.tool, worker.arguments = "run_shell_command", json.dumps({"command": f"echo {MARK}"})
    env = dict(
        os.environ,
        HOME=str(tmp_path),  # qwen-code keeps its settings in ~/.qwen
        OPENAI_BASE_URL=f"{server.url}/v1",
        OPENAI_API_KEY="unused",
        OPENAI_MODEL="conductor",
    )
    done = subprocess.run(
        [str(qwen_bin), "--yolo", "--auth-type", "openai", "List the files here."],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert worker.requests[0]["stream"] is True  # qwen-code streams: the tool call was streamed
    result = worker.requests[1]["messages"][-1]
    assert result["role"] == "tool" and MARK in json.dumps(result["content"])
    assert done.stdout.strip().startswith("done:") and MARK in done.stdout
    assert _traced_tasks(isolated_home)[1] == [LOOP_TASK]


def test_claude_code_runs_the_command_the_team_asked_for(
    claude_bin: Path,
    served: tuple[ConductorServer, FakeToolCallingWorker],
    tmp_path: Path,
    isolated_home: Path,
) -> None:
    server, worker = served
    worker.tool, worker.arguments = "Bash", json.dumps({"command": f"echo {MARK}"})
    env = dict(
        os.environ,
        HOME=str(tmp_path),  # Claude Code keeps its settings in ~/.claude
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_AUTH_TOKEN="unused",
        ANTHROPIC_MODEL="conductor",
        ANTHROPIC_DEFAULT_HAIKU_MODEL="conductor",  # its background calls
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    done = subprocess.run(
        [str(claude_bin), "--allowedTools", "Bash", "-p", "List the files here."],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = worker.requests[1]["messages"][-1]
    assert result["role"] == "tool" and MARK in result["content"]
    assert done.stdout.strip() == f"done: {MARK}"
    assert _traced_tasks(isolated_home)[-1] == [LOOP_TASK]
