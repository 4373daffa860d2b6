"""`conductor train --method head`: real llama.cpp hidden states, real engine runs through
litellm to a simulation of specialist workers (tests/simulated_pool.py), real CMA-ES.

The simulation is the testbed where the right policy is known: two kinds of question, each
with one specialist (right 95 %, the other worker 20 %). The workers' names and descriptions
are the same, so only learning can tell them apart.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conductor_cli.backends.base import Request
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.conductor import WorkerInfo, plan_messages
from conductor_cli.train.features import PromptFeatures
from conductor_cli.train.head import Head
from conductor_cli.train.registry import conductors_dir
from conductor_cli.train.reward import reward
from conductor_cli.train.shapes import enumerate_shapes, shape_grammar
from conductor_cli.workflow import parse_workflow

from .conftest import assert_one_line_error, run_cli, start_cli
from .simulated_pool import TWO_SPECIALISTS, SimulatedPool, make_questions


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(make_questions(["arith", "words"], 12), TWO_SPECIALISTS)
    yield sim
    sim.close()


@pytest.fixture
def sim_files(simulation: SimulatedPool, tmp_path: Path, gguf_path: Path) -> tuple[Path, Path]:
    return simulation.files(tmp_path)


def test_the_reward_is_the_papers_and_cost_lowers_it() -> None:
    assert reward(parsed=True, correct=True) == 1.0
    assert reward(parsed=True, correct=False) == 0.5
    assert reward(parsed=False, correct=False) == 0.0
    cheap = reward(parsed=True, correct=True, cost=0.2, cost_weight=0.5)
    dear = reward(parsed=True, correct=True, cost=2.0, cost_weight=0.5)
    assert dear < cheap < 1.0


def test_shapes_are_enumerated_and_a_forced_shape_is_what_llama_cpp_writes(
    gguf_path: Path,
) -> None:
    shapes = enumerate_shapes(["a", "b", "c"])
    assert len(shapes) == 21 and len({s.label for s in shapes}) == 21
    assert [s.label for s in enumerate_shapes(["a"], max_steps=1)] == ["a"]
    models = LlamaModels(n_ctx=2048, note=pytest.fail)
    backend = LlamaCppBackend(models, gguf_path, "test")
    pool = [WorkerInfo("a", "one"), WorkerInfo("b", "two"), WorkerInfo("c", "three")]
    try:
        for shape in (shapes[1], shapes[8]):  # "b" alone; "a > c<0"
            done = backend.complete(
                Request(
                    plan_messages("What is 12 times 12?", pool, (), 2),
                    max_tokens=300,
                    temperature=0.0,
                    seed=0,
                    grammar=shape_grammar(shape),
                )
            )
            workflow = parse_workflow(done.text, ["a", "b", "c"], 2)
            assert shape.matches(workflow), (shape.label, done.text)
            assert all(len(s.task.split()) >= 3 for s in workflow.steps)
    finally:
        models.close()


def test_hidden_states_reuse_the_shared_prompt_exactly(gguf_path: Path) -> None:
    pool = [WorkerInfo("w0", "a general assistant"), WorkerInfo("w1", "a general assistant")]
    first = PromptFeatures(gguf_path, n_ctx=2048)
    fresh = PromptFeatures(gguf_path, n_ctx=2048)
    try:
        a = first(plan_messages("What is 2 plus 2?", pool, (), 2))
        b = first(plan_messages("Spell stone backwards.", pool, (), 2))  # reuses the prefix
        assert a.shape == (576,) and not np.allclose(a, b)
        np.testing.assert_allclose(b, fresh(plan_messages("Spell stone backwards.", pool, (), 2)))
    finally:
        first.close()
        fresh.close()


def test_training_learns_the_specialists_and_the_trained_conductor_plans(
    simulation: SimulatedPool, sim_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = sim_files
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "sim",
        "--holdout", "0.34", "--generations", "30", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    before, after = (e for e in record["evaluations"])
    table = record["reward_table"]
    # Learning, not a tuned figure: the head beats every fixed workflow on its training
    # questions, and the trained conductor beats the untrained one on held-out questions.
    assert table["head_train_reward"] > table["best_fixed_shape_reward"]
    assert after["reward"] > before["reward"], (before, after)
    assert after["accuracy"] > before["accuracy"], (before, after)
    assert table["workflow_runs"] == 16 * 10 * 2
    head = Head.load(conductors_dir() / "sim" / "head.json")
    assert np.abs(head.weights).sum() > 0
    assert not (conductors_dir() / ".sim.training").exists()

    # The trained conductor is a model name like any other.
    use = tmp_path / "use.toml"
    use.write_text(config.read_text().replace("max_steps = 2", 'max_steps = 2\nmodel = "sim"'))
    asked = run_cli("ask", "--config", str(use), "--json", simulation.questions[1].text)
    assert asked.returncode == 0, asked.stderr
    steps = json.loads(asked.stdout)["workflow"]["steps"]
    assert 1 <= len(steps) <= 2 and steps[-1]["worker"] == "w0"  # Q1 is arithmetic: w0's
    listed = json.loads(run_cli("models", "list", "--json").stdout)
    assert any(r.get("trained") and r["name"] == "sim" for r in listed)
    info = json.loads(run_cli("models", "info", "sim", "--json").stdout)
    assert info["evaluations"] == record["evaluations"]
    rows = {
        r["what"]: r for r in json.loads(run_cli("doctor", "--json", "--config", str(use)).stdout)
    }
    assert rows["conductor model"]["status"] == "ok"
    other = tmp_path / "other.toml"
    other.write_text(use.read_text().replace('"a general assistant"', '"a coder"', 1))
    rows = {
        r["what"]: r for r in json.loads(run_cli("doctor", "--json", "--config", str(other)).stdout)
    }
    assert rows["conductor model"]["status"] == "warn"

    again = run_cli("train", "qa", str(data), "--config", str(config), "--out", "sim")
    assert_one_line_error(again, 2, "exists", "--force")


def test_ctrl_c_keeps_the_runs_and_resume_trains_none_twice(
    simulation: SimulatedPool, sim_files: tuple[Path, Path]
) -> None:
    config, data = sim_files
    args = ["train", "qa", str(data), "--config", str(config), "--out", "cut", "--json"]
    args += ["--holdout", "0.34", "--generations", "5", "--concurrency", "1"]
    proc = start_cli(*args)
    checkpoint = conductors_dir() / ".cut.training" / "rewards.jsonl"
    deadline = time.monotonic() + 120
    while not (checkpoint.exists() and len(checkpoint.read_text().splitlines()) >= 20):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "--resume" in err
    kept = len(checkpoint.read_text().splitlines())
    assert kept >= 20
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    table = json.loads(resumed.stdout)["reward_table"]
    assert table["resumed_runs"] >= kept - 1  # a line torn by the signal is run again
    assert not checkpoint.exists()  # done: the work dir is gone, the conductor installed
    assert (conductors_dir() / "cut" / "head.json").exists()


def test_bad_training_input_is_one_line(
    simulation: SimulatedPool, sim_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = sim_files
    calls = simulation.calls
    keyed = tmp_path / "keyed.toml"
    keyed.write_text(
        config.read_text().replace("retries = 0", 'retries = 0\napi_key_env = "SIM_NO_KEY"', 1)
    )
    proc = run_cli("train", "qa", str(data), "--config", str(keyed), "--out", "k")
    assert_one_line_error(proc, 2, "SIM_NO_KEY is not set")
    assert simulation.calls == calls, "no rollout may start before the keys are checked"
    proc = run_cli("train", "qa", str(data), "--config", str(config), "--method", "magic")
    assert_one_line_error(proc, 2, "--method", "head")
    proc = run_cli("train", "qa", str(data), "--config", str(config), "--out", "../x")
    assert_one_line_error(proc, 2, "name")
    served = tmp_path / "served.toml"
    served.write_text(
        config.read_text().replace("max_steps = 2", 'max_steps = 2\nmodel = "litellm:openai/w0"')
    )
    proc = run_cli("train", "qa", str(data), "--config", str(served), "--out", "s")
    assert_one_line_error(proc, 2, "litellm", "local GGUF")
    proc = run_cli("train", "qa", "--config", str(config))
    assert_one_line_error(proc, 2, "JSONL file")
    without_cma = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['cma'] = None; sys.argv[0] = 'conductor'; "
            "from conductor_cli.cli.entry import main; main()",
            *("train", "qa", str(data), "--config", str(config), "--out", "n"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(without_cma, 2, "pip install 'conductor-cli[train-head]'")
