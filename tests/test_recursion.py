"""Recursion: a step given to the conductor becomes a nested workflow, planned by the real
default GGUF under its grammar; workers are a FakeOpenAIServer so answers are traceable."""

from __future__ import annotations

import json
from pathlib import Path

from conductor_cli.api import worker_infos
from conductor_cli.config.settings import Config
from conductor_cli.run.pool import Pool
from conductor_cli.storage.trace import load_trace

from .conftest import assert_one_line_error, run_cli
from .fake_openai import FakeOpenAIServer

WORKFLOW = {
    "steps": [
        {"worker": "w", "task": "Draft an answer to the question.", "sees": []},
        {"worker": "conductor", "task": "Check the draft and correct it.", "sees": [0]},
        {"worker": "w", "task": "Give the final answer in one line.", "sees": [1]},
    ]
}


def write(tmp_path: Path, api_base: str, max_depth: int) -> tuple[Path, Path]:
    config = tmp_path / "c.toml"
    config.write_text(
        f"[conductor]\nmax_depth = {max_depth}\nmax_steps = 2\n\n"
        f'[[workers]]\nname = "w"\nmodel = "openai/fake"\napi_base = "{api_base}"\n'
        'description = "a worker that answers questions"\nretries = 0\n',
        encoding="utf-8",
    )
    workflow = tmp_path / "wf.json"
    workflow.write_text(json.dumps(WORKFLOW), encoding="utf-8")
    return config, workflow


def test_recursive_step_runs_a_nested_workflow(tmp_path: Path, gguf_path: Path) -> None:
    server = FakeOpenAIServer(["ok"], answer="answer number {n}")
    try:
        config, workflow = write(tmp_path, server.api_base, max_depth=1)
        proc = run_cli("run", "--config", str(config), "--json", str(workflow), "What is 2 + 2?")
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    record = load_trace(Path(doc["trace"]))
    nested = record["steps"][1]["nested"]
    # The nested workflow is recorded as the child of its step, and it ran to the end.
    assert nested["status"] == "done" and nested["workflow"]["steps"]
    # The depth limit holds: at depth 1 of max_depth 1 the conductor cannot pick itself.
    assert {s["worker"] for s in nested["workflow"]["steps"]} == {"w"}
    assert all(s["status"] == "done" for s in nested["steps"])
    # The nested conductor saw step 0's output; the parent's next step sees the nested answer.
    assert "answer number 1" in nested["question"] or any(
        "answer number 1" in s["messages"][-1]["content"] for s in nested["steps"]
    )
    assert record["steps"][1]["output"] == nested["answer"] == nested["steps"][-1]["output"]
    assert nested["answer"] in record["steps"][2]["messages"][-1]["content"]
    n_nested = len(nested["steps"])
    assert record["answer"] == f"answer number {n_nested + 2}"
    # The static tree shows the nested workflow under its step.
    shown = run_cli("traces", "show", record["id"]).stdout
    lines = shown.splitlines()
    top = next(i for i, line in enumerate(lines) if "step 1" in line and "conductor" in line)
    # Until the parent's next step (long tasks wrap at 80 columns, off a terminal).
    end = next(i for i, line in enumerate(lines) if "step 2" in line and " w " in line)
    assert any("step 0" in line and " w " in line for line in lines[top + 1 : end])
    assert all(line.startswith("│ ") for line in lines[top + 1 : end])  # drawn under step 1


def test_conductor_worker_needs_recursion_enabled(tmp_path: Path, gguf_path: Path) -> None:
    config, workflow = write(tmp_path, "http://127.0.0.1:9/v1", max_depth=0)
    proc = run_cli("run", "--config", str(config), str(workflow), "q")
    assert_one_line_error(proc, 1, "unknown worker 'conductor'")


def test_depth_left_is_offered_to_the_conductor() -> None:
    pool = Pool(())
    assert worker_infos(pool.workers, 0, 0) == []
    (one,) = worker_infos(pool.workers, 0, 1)
    assert one.name == "conductor" and "once more" in one.description
    assert "2 more levels deep" in worker_infos(pool.workers, 0, 2)[0].description
    assert worker_infos(pool.workers, 1, 1) == [] and Config().conductor.max_depth == 0
