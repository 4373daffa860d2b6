"""The first remote call is as fast as the second (issue 71): an OpenAI-compatible endpoint is
called directly, without waiting for litellm's import, in process and on a server that just
started; a provider litellm translates still goes through litellm's helper; `serve --status`
and `doctor` say whether each remote worker's first call would wait.

The endpoint is the fault-injection fake (conductor_cli/testing/fake_openai.py), each call
taking 1.0 s; the real CLI runs in its own processes and the real server on a real socket.
The bounds are the issue's (three 1-second steps at once and a join: 2.0 s of waiting), read
from the trace's own event times."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.backends.litellm import LiteLLMBackend
from conductor_cli.backends.openai_compat import OpenAICompatBackend
from conductor_cli.config.settings import ConductorSettings, Config, WorkerConfig
from conductor_cli.run.pool import calls_remote, uses_litellm
from conductor_cli.runtime import Runtime
from conductor_cli.storage import load_trace
from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import run_cli

WORKFLOW = {
    "steps": [
        {"worker": "w0", "task": "Name a fruit.", "sees": []},
        {"worker": "w1", "task": "Name a colour.", "sees": []},
        {"worker": "w2", "task": "Name a tree.", "sees": []},
        {"worker": "w0", "task": "Join them.", "sees": [0, 1, 2]},
    ]
}


@pytest.fixture
def slow() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer(["slow"], answer="An answer.", delay=1.0)
    yield server
    server.close()


@pytest.fixture
def files(slow: FakeOpenAIServer, tmp_path: Path, isolated_home: Path) -> tuple[Path, Path]:
    config = tmp_path / "config.toml"
    config.write_text(
        "".join(
            f'[[workers]]\nname = "w{i}"\nmodel = "openai/fake"\napi_base = "{slow.api_base}"\n'
            "retries = 0\n\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    workflow = tmp_path / "wf.json"
    workflow.write_text(json.dumps(WORKFLOW), encoding="utf-8")
    return config, workflow


def span(stdout: str) -> float:
    """From the run's start to its end, by the trace's event times."""
    doc = json.loads(stdout)
    events = load_trace(Path(doc["trace"]))["events"]
    at = {e["type"]: e["at"] for e in events if e["type"] in ("RunStarted", "RunFinished")}
    assert doc["answer"].strip() == "An answer."
    return at["RunFinished"] - at["RunStarted"]


def run(config: Path, workflow: Path, *extra: str) -> float:
    done = run_cli(
        "--config", str(config), "run", "--no-cache", "--json", *extra, str(workflow), "Go.",
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return span(done.stdout)


def test_an_openai_compatible_pool_waits_for_no_import(files: tuple[Path, Path]) -> None:
    config, workflow = files
    # In process: every call direct, litellm's helper never started.
    first = run(config, workflow, "--no-server")
    assert first <= 2.3, first
    # The first run after a server starts, against the second.
    started = run_cli("--config", str(config), "serve", "--detach", timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        status = run_cli("--config", str(config), "serve", "--status", "--json")
        remote = json.loads(status.stdout)["remote"]
        assert remote == {f"w{i}": "ready (called directly)" for i in range(3)}
        after_start, second = run(config, workflow), run(config, workflow)
    finally:
        run_cli("--config", str(config), "serve", "--stop")
    assert after_start <= 2.3, after_start
    assert after_start <= 1.1 * second + 0.05, (after_start, second)


def test_which_remote_workers_go_through_litellm() -> None:
    base = "http://127.0.0.1:9/v1"
    direct = WorkerConfig("d", "openai/served", api_base=base)
    hosted = WorkerConfig("h", "openai/gpt-4o")  # OpenAI itself: litellm adapts its params
    vllm = WorkerConfig("v", "hosted_vllm/served", api_base=base)  # litellm translates
    with Runtime(Config(workers=(direct,))) as runtime:
        (worker,) = runtime.raw_pool().workers
        assert type(worker.backend) is OpenAICompatBackend
        # The same identity as through litellm: cache entries and trained heads stay valid.
        assert worker.backend.identity == "litellm:openai/served@" + base
        assert not runtime.litellm.started and runtime.litellm.state == "not started"
    config = Config(workers=(direct,))
    assert calls_remote(config) and not uses_litellm(config)
    for other in (hosted, vllm):
        assert uses_litellm(Config(workers=(direct, other)))
        with Runtime(Config(workers=(other,))) as runtime:
            (worker,) = runtime.raw_pool().workers
            assert type(worker.backend) is LiteLLMBackend
            assert runtime.litellm.started and runtime.litellm.state in ("starting", "ready")
    conductor = ConductorSettings(model="litellm:openai/served", api_base=base)
    assert not uses_litellm(Config(conductor=conductor, workers=(direct,)))


def test_the_helper_says_when_litellm_is_imported() -> None:
    from conductor_cli.backends.litellm import LiteLLMProcess

    helper = LiteLLMProcess()
    try:
        helper.start()
        deadline = time.monotonic() + 60
        while helper.state == "starting":
            assert time.monotonic() < deadline, "litellm's import never ended"
            time.sleep(0.05)
        assert helper.state == "ready"
    finally:
        helper.close()


def test_doctor_says_a_direct_worker_is_ready_at_once(files: tuple[Path, Path]) -> None:
    config, _ = files
    done = run_cli("--config", str(config), "doctor")
    rows = [line for line in done.stdout.splitlines() if "worker w0" in line]
    assert rows and "ready at once: called directly" in rows[0], done.stdout


def test_tool_calls_are_read_whole_and_from_their_streamed_fragments() -> None:
    """OpenAI's chat completion format, as servers send it (a parse, no server)."""
    from conductor_cli.backends import openai_compat

    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    whole = {
        "choices": [
            {"finish_reason": "tool_calls", "message": {"content": None, "tool_calls": [call]}}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    done = openai_compat._whole(json.dumps(whole).encode())
    assert done["tool_calls"] == [{"id": "c1", "name": "f", "arguments": '{"a": 1}'}]
    assert (done["tokens_in"], done["tokens_out"], done["text"]) == (7, 3, "")
    pieces = [
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1",
                      "function": {"name": "f", "arguments": '{"a"'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0,
                      "function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
    ]  # fmt: skip
    lines = [f"data: {json.dumps(p)}\n".encode() for p in pieces] + [b"data: [DONE]\n"]
    streamed = openai_compat._streamed(iter(lines), lambda piece: None)
    assert streamed["tool_calls"] == done["tool_calls"]
    assert streamed["finish_reason"] == "tool_calls" and streamed["tokens_in"] == 7
    with pytest.raises(openai_compat._Failed, match="before the answer was complete"):
        openai_compat._streamed(iter(lines[:1]), lambda piece: None)
