"""The CLI as a thin client of a running server (issue 18): `serve --detach/--status/--stop`,
ask/run through the local socket, `[server] auto` with its start lock and idle exit, Ctrl-C
through the server, a dead server's in-process fallback, config reload, CONDUCTOR_SERVER with a
key, and the `llm` CLI calling the server as an OpenAI model. All on the real embedded model."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.server import local
from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import FAST_CONFIG, run_cli, start_cli

QUESTION = "What is the capital of France?"


def write_config(path: Path, extra: str = "") -> Path:
    path.write_text(FAST_CONFIG + "\n[server]\nport = 0\n" + extra, encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path, gguf_path: Path) -> Path:
    return write_config(tmp_path / "c.toml")


@pytest.fixture
def detached(config: Path) -> Iterator[local.ServerInfo]:
    done = run_cli("--config", str(config), "serve", "--detach")
    assert done.returncode == 0, done.stderr
    info = local.read_info(local.files_for(config))
    assert info is not None
    yield info
    run_cli("--config", str(config), "serve", "--stop")


def one_step_on(fake: FakeOpenAIServer, tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    """A config whose one worker `w` is `fake` (a FakeOpenAIServer), and a one-step workflow."""
    config = tmp_path / "remote.toml"
    config.write_text(
        "[server]\nport = 0\n\n"
        f'[[workers]]\nname = "w"\nmodel = "openai/w"\napi_base = "{fake.api_base}"\n'
        f"retries = 0\n{extra}",
        encoding="utf-8",
    )
    workflow = tmp_path / "wf.json"
    workflow.write_text(json.dumps({"steps": [{"worker": "w", "task": "Answer.", "sees": []}]}))
    return config, workflow


def traces() -> list[dict]:
    directory = Path(os.environ["XDG_DATA_HOME"]) / "conductor" / "traces"
    files = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in files]


def status(config: Path) -> dict:
    done = run_cli("--config", str(config), "serve", "--status", "--json")
    return json.loads(done.stdout)


def test_ask_goes_through_a_detached_server_and_answers_as_in_process(
    config: Path, detached: local.ServerInfo
) -> None:
    files = local.files_for(config)
    # Only the owner may connect: the socket 0600 in a 0700 directory.
    assert stat.S_IMODE(files.directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(files.socket.stat().st_mode) == 0o600
    assert status(config)["runs_served"] == 0

    served = run_cli("--config", str(config), "ask", "--json", QUESTION)
    assert served.returncode == 0, served.stderr
    here = run_cli("--config", str(config), "ask", "--json", "--no-server", QUESTION)
    assert here.returncode == 0, here.stderr
    a, b = json.loads(served.stdout), json.loads(here.stdout)
    assert a["answer"] == b["answer"] and a["workflow"] == b["workflow"]
    assert b["totals"]["cache_hits"] > 0  # the server's run filled the same cache

    now = status(config)
    assert now["pid"] == detached.pid and now["runs_served"] == 1  # --no-server never came
    assert now["models_loaded"] == ["SmolLM2-135M-Instruct.Q4_1.gguf"]
    # The server wrote the run's trace where an in-process run writes it.
    assert [t["status"] for t in traces()] == ["done", "done"]

    stopped = run_cli("--config", str(config), "serve", "--stop")
    assert stopped.returncode == 0 and f"pid {detached.pid}" in stopped.stderr
    assert not files.socket.exists() and not files.pid.exists()
    assert run_cli("--config", str(config), "serve", "--status").returncode == 1


def test_the_client_imports_no_model_code(config: Path, detached: local.ServerInfo) -> None:
    probe = (
        "import atexit, sys\n"
        "heavy = ('litellm', 'llama_cpp', 'fastapi', 'pydantic', 'diskcache', 'numpy')\n"
        "atexit.register(lambda: sys.stderr.write("
        "'LOADED=%s\\n' % [m for m in heavy if m in sys.modules]))\n"
        f"sys.argv = ['conductor', '--config', {str(config)!r}, 'ask', {QUESTION!r}]\n"
        "from conductor_cli.cli.entry import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED=[]" in done.stderr
    assert status(config)["runs_served"] == 1


def test_ctrl_c_cancels_the_run_on_the_server(tmp_path: Path) -> None:
    hang = FakeOpenAIServer(["hang"])  # a worker that never answers: only Ctrl-C ends it
    config, workflow = one_step_on(hang, tmp_path, "timeout_s = 120\n")
    assert run_cli("--config", str(config), "serve", "--detach").returncode == 0
    try:
        proc = start_cli(
            "--config", str(config), "run", "--no-cache", str(workflow), "What is 2 + 2?"
        )
        deadline = time.monotonic() + 120
        while not hang.requests:  # the step is at its worker
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.strip().splitlines()[-1] == "conductor: interrupted"
        # The server ended the run as interrupted before the client left, and lives on.
        [trace] = traces()
        assert trace["status"] == "interrupted"
        assert trace["events"][-1]["type"] == "RunFailed"
        now = status(config)
        assert now["active_runs"] == 0 and now["runs_served"] == 1
    finally:
        run_cli("--config", str(config), "serve", "--stop")
        hang.close()


def test_a_dead_server_is_noted_cleaned_up_and_the_run_goes_in_process(
    config: Path, detached: local.ServerInfo
) -> None:
    files = local.files_for(config)
    os.kill(detached.pid, signal.SIGKILL)
    while local.pid_alive(detached.pid):
        time.sleep(0.05)
    assert files.socket.exists() and files.pid.exists()  # what a killed server leaves
    done = run_cli("--config", str(config), "ask", QUESTION)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    notes = [line for line in done.stderr.splitlines() if line.startswith("conductor: note:")]
    assert len(notes) == 1 and "in-process" in notes[0], done.stderr
    assert not files.socket.exists() and not files.pid.exists()


def test_auto_starts_one_server_for_two_clis_and_it_exits_when_idle(
    tmp_path: Path, gguf_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONDUCTOR_SERVER_AUTO")  # the default: server.auto is on
    config = write_config(tmp_path / "auto.toml", "idle_timeout_s = 3\n")
    files = local.files_for(config)
    first = start_cli("--config", str(config), "ask", QUESTION)
    second = start_cli("--config", str(config), "ask", "What is 2 + 2?")
    outs = [p.communicate(timeout=300) for p in (first, second)]
    assert first.returncode == second.returncode == 0, outs
    info = local.read_info(files)
    assert info is not None and info.detached
    assert info.url is None  # an auto server listens on its socket only
    # Both runs went to the one server the lock let start; the CLI that started it said so.
    assert status(config)["runs_served"] == 2
    started = [line for _, err in outs for line in err.splitlines() if "background server" in line]
    assert len(started) == 1 and f"(pid {info.pid})" in started[0], outs
    assert started[0].startswith("conductor: note: ") and "3 s idle" in started[0]
    deadline = time.monotonic() + 60
    while local.pid_alive(info.pid):  # idle for 3 s: it leaves, and takes its files along
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert not files.socket.exists() and not files.pid.exists()


def test_a_changed_config_is_reloaded_by_the_running_server(
    config: Path, detached: local.ServerInfo
) -> None:
    done = run_cli("--config", str(config), "ask", "--json", QUESTION)
    assert {s["worker"] for s in json.loads(done.stdout)["steps"]} == {"local"}
    config.write_text(config.read_text().replace('name = "local"', 'name = "tiny"'))
    done = run_cli("--config", str(config), "ask", "--json", QUESTION)
    assert done.returncode == 0, done.stderr
    assert {s["worker"] for s in json.loads(done.stdout)["steps"]} == {"tiny"}
    now = status(config)
    assert now["pid"] == detached.pid and now["config_reloads"] == 1


def test_conductor_server_env_reaches_a_keyed_server_elsewhere(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 127.0.0.2 stands in for a LAN address (tests talk to 127.0.0.0/8 only).
    key = "k3y-" + "z" * 28
    monkeypatch.setenv("CONDUCTOR_TEST_KEY", key)
    proc = start_cli(
        "--config", str(config), "serve", "--host", "127.0.0.2", "--port", "0",
        "--api-key-env", "CONDUCTOR_TEST_KEY",
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = line.split("serving ")[1].split("/v1")[0]
        monkeypatch.setenv("CONDUCTOR_SERVER", url)
        refused = run_cli("ask", QUESTION)
        assert refused.returncode == 1 and "CONDUCTOR_SERVER_KEY" in refused.stderr
        monkeypatch.setenv("CONDUCTOR_SERVER_KEY", key)
        done = run_cli("ask", QUESTION)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() and "note" not in done.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_the_llm_cli_calls_the_server_as_an_openai_model(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conductor_cli.config.settings import load_config
    from conductor_cli.server.http_api import ConductorServer
    from conductor_cli.storage.trace import list_traces, load_trace

    llm = Path(sys.executable).with_name("llm")
    assert llm.exists(), "the test extra installs the llm CLI"
    srv = ConductorServer(load_config(config), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    home = tmp_path / "llm"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        f'- model_id: conductor\n  model_name: conductor\n  api_base: "{srv.url}/v1"\n'
    )
    monkeypatch.setenv("LLM_USER_PATH", str(home))
    try:
        for extra in ([], ["--no-stream"]):
            done = subprocess.run(
                [str(llm), "-m", "conductor", *extra, "What is 2+2?"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr
            # What llm prints is the run's answer, as the server's trace of it holds it (what
            # a 135M model answers to 2+2 depends on the CPU's arithmetic, so no "4" here).
            newest = list_traces()[0]
            assert newest["question"] == "What is 2+2?"
            answer = load_trace(newest["path"])["answer"]
            assert answer.strip() and done.stdout.strip() == answer.strip(), done.stdout
        assert srv.runs_served == 2
    finally:
        srv.shutdown()
        srv.server_close()


def test_replay_live_runs_the_recorded_workflow_on_the_server(
    config: Path, detached: local.ServerInfo
) -> None:
    first = run_cli("--config", str(config), "ask", "--json", "--no-server", QUESTION)
    assert first.returncode == 0, first.stderr
    recorded = json.loads(first.stdout)
    trace_id = Path(recorded["trace"]).stem
    again = run_cli("--config", str(config), "replay", "--live", "--json", trace_id)
    assert again.returncode == 0, again.stderr
    replayed = json.loads(again.stdout)
    assert replayed["workflow"] == recorded["workflow"]
    assert replayed["totals"]["cache_hits"] == 0  # --live calls every worker again
    assert status(config)["runs_served"] == 1
    [new] = [t for t in traces() if t.get("replay_of") == trace_id]
    assert new["status"] == "done"


def test_a_server_killed_mid_run_leaves_the_run_to_the_cli(tmp_path: Path) -> None:
    # The server's call hangs; after the server dies, the CLI's own call is answered.
    fake = FakeOpenAIServer(["hang", "ok"], answer="answered in-process")
    config, workflow = one_step_on(fake, tmp_path)
    assert run_cli("--config", str(config), "serve", "--detach").returncode == 0
    info = local.read_info(local.files_for(config))
    assert info is not None
    try:
        proc = start_cli("--config", str(config), "run", str(workflow), "What is 2 + 2?")
        deadline = time.monotonic() + 120
        while not fake.requests:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        os.kill(info.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "answered in-process"
        notes = [line for line in err.splitlines() if line.startswith("conductor: note:")]
        assert len(notes) == 1 and "stopped during the run" in notes[0], err
        assert len(fake.requests) == 2
    finally:
        fake.close()


def test_a_detached_server_is_warm_when_it_says_it_is_ready(config: Path) -> None:
    """Issue 59: `serve --detach` returns once the config's models are loaded and a rehearsal
    run has saved the planning prompt's state, so the first run pays for neither."""
    done = run_cli("--config", str(config), "serve", "--detach")
    assert done.returncode == 0, done.stderr
    try:
        now = status(config)
        assert now["warm"] == "ready", now
        assert any("SmolLM2" in m for m in now["models_loaded"]), now
        assert now["runs_served"] == 0  # the rehearsal is no run of anyone's
        assert not traces()
    finally:
        run_cli("--config", str(config), "serve", "--stop")
