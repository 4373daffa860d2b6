"""`conductor train --method head`: real llama.cpp hidden states, real engine runs through
litellm to a simulation of specialist workers (testing/simulated_pool.py), real CMA-ES.

The simulation is the testbed where the right policy is known: two kinds of question, each
with one specialist (right 95 %, the other worker 20 %). The workers' names and descriptions
are the same, so only learning can tell them apart.
"""

from __future__ import annotations

import json
import os
import re
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
from conductor_cli.config.settings import load_config
from conductor_cli.evals.datasets import load_qa
from conductor_cli.evals.records import Problem
from conductor_cli.policy.features import PromptFeatures
from conductor_cli.policy.head import Head
from conductor_cli.policy.registry import conductors_dir
from conductor_cli.policy.shapes import ANSWER_TASK, CHECK_TASK, enumerate_shapes, shape_grammar
from conductor_cli.run.planner import WorkerInfo, plan_messages
from conductor_cli.run.workflow import parse_workflow
from conductor_cli.runtime import Runtime
from conductor_cli.testing.simulated_pool import TWO_SPECIALISTS, SimulatedPool, make_questions
from conductor_cli.train.checkpoint import Checkpoint, read_checkpoint, run_checkpointed
from conductor_cli.train.measured import store_path
from conductor_cli.train.reward import reward
from conductor_cli.train.shared import split

from .conftest import assert_one_line_error, run_cli, start_cli


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(make_questions(["arith", "words"], 12), TWO_SPECIALISTS)
    yield sim
    sim.close()


@pytest.fixture
def sim_files(simulation: SimulatedPool, tmp_path: Path, gguf_path: Path) -> tuple[Path, Path]:
    return simulation.files(tmp_path)


def test_the_split_is_seeded_and_holdout_zero_holds_none_out() -> None:
    problems = [Problem(id=f"q{i}", kind="qa", question=f"Q{i}?", answer="A") for i in range(10)]
    training, held = split(problems, 0.2, 0)
    assert len(held) == 2 and len(training) == 8
    assert (training, held) == split(problems, 0.2, 0)
    assert {p.id for p in training} | {p.id for p in held} == {p.id for p in problems}
    assert split(problems, 0.01, 0)[1] != []  # any share above 0 holds one out at least
    assert split(problems, 0.0, 0) == (problems, [])  # --holdout 0: train on every problem


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
    # Not kept on disk: `fresh` must decode the prompt itself (test_feature_store.py).
    first = PromptFeatures(gguf_path, n_ctx=2048, kept=False)
    fresh = PromptFeatures(gguf_path, n_ctx=2048, kept=False)
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
        "--holdout", "0.34", "--generations", "30", "--repeats", "1", "--json",
        "--search", "all",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    # No --tasks: the steps keep the words their rewards were measured with.
    assert record["hyperparameters"]["tasks"] == "fixed"
    # Its features were read from the base model's 16-bit copy (backends/f16_copy.py).
    assert record["hyperparameters"]["features"] == "f16"
    before, after = (e for e in record["evaluations"])
    table = record["reward_table"]
    # Learning, not a tuned figure: the head beats every fixed workflow on its training
    # questions, and the trained conductor beats the untrained one on held-out questions.
    assert table["head_train_reward"] > table["best_fixed_shape_reward"]
    assert after["reward"] > before["reward"], (before, after)
    assert after["accuracy"] > before["accuracy"], (before, after)
    # The search as it was before the adaptive one (its tables reproduce): every shape.
    assert table["workflow_runs"] == 16 * 10 * 1
    assert record["worker_calls"] <= record["estimate"]["max_calls"]
    head = Head.load(conductors_dir() / "sim" / "head.json")
    assert np.abs(head.weights).sum() > 0
    # Its questions have no category: one kind, nothing to withhold, so no familiarity (a
    # question unlike training still gets the head's choice).
    assert "1 kind(s)" in record["familiar"]["none"]
    assert not (conductors_dir() / "sim" / "familiar.npz").exists()
    assert not (conductors_dir() / ".sim.training").exists()

    # The trained conductor is a model name like any other.
    use = tmp_path / "use.toml"
    use.write_text(config.read_text().replace("max_steps = 2", 'max_steps = 2\nmodel = "sim"'))
    asked = run_cli("ask", "--config", str(use), "--json", simulation.questions[1].text)
    assert asked.returncode == 0, asked.stderr
    steps = json.loads(asked.stdout)["workflow"]["steps"]
    assert 1 <= len(steps) <= 2 and steps[-1]["worker"] == "w0"  # Q1 is arithmetic: w0's
    # `conductor eval` compares it with the untrained conductor on the held-out questions
    # (the trainer's own seeded split), as a strategy naming it.
    problems = load_qa(data, "exact")
    _, held = split(problems, 0.34, 0)
    held_file = tmp_path / "held.jsonl"
    ids = {p.id for p in held}
    rows = [r for r in data.read_text().splitlines() if json.loads(r)["id"] in ids]
    held_file.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "eval.json"
    evaluated = run_cli(
        "eval", "qa", str(held_file), "--config", str(config),
        "--strategies", "conductor,conductor:sim", "--json-out", str(out),
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    by = {s["strategy"]: s for s in json.loads(out.read_text())["strategies"]}
    assert by["conductor:sim"]["accuracy"] > by["conductor"]["accuracy"], by
    assert by["conductor:sim"]["accuracy"] == after["accuracy"]  # the same planning path
    # An eval loads a trained head once for all its problems: one runtime serves them all,
    # and hands every run the same loaded head.
    with Runtime(load_config(use)) as runtime:
        head_once = runtime.chooser()
        assert head_once is not None
        assert runtime.chooser() is head_once
    untrained = Runtime(load_config(config))
    assert untrained.chooser() is None
    untrained.close()
    nope = run_cli("eval", "qa", str(held_file), "--config", str(config),
                   "--strategies", "conductor:nope")  # fmt: skip
    assert_one_line_error(nope, 2, "conductor:nope", "models list")

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

    # The default --tasks fixed: at planning time the steps keep the words they were measured
    # with; the head still picks the shape.
    assert [s["task"] for s in steps] == [CHECK_TASK if s["sees"] else ANSWER_TASK for s in steps]

    # An eval's stored results of `conductor:NAME` hold for that training only: once NAME is
    # trained again, the next eval plans those problems again instead of reusing them.
    def evaluate() -> dict:
        out = tmp_path / "again.json"
        proc = run_cli("eval", "qa", str(held_file), "--config", str(config),
                       "--strategies", "conductor:sim", "--json-out", str(out))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(out.read_text())["meta"]

    assert evaluate()["resumed"] == len(held)  # the same training: the stored results hold
    retrained = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "sim", "--force",
        "--holdout", "0.34", "--generations", "30", "--repeats", "1", "--search", "all", "--json",
    )  # fmt: skip
    assert retrained.returncode == 0, retrained.stderr
    assert json.loads(retrained.stdout)["reward_table"]["worker_calls"] == 0  # the cache's
    assert evaluate()["computed"] == len(held)


def test_ctrl_c_keeps_the_runs_and_resume_trains_none_twice(
    simulation: SimulatedPool, sim_files: tuple[Path, Path]
) -> None:
    config, data = sim_files
    args = ["train", "qa", str(data), "--config", str(config), "--out", "cut", "--json"]
    args += ["--holdout", "0.34", "--generations", "5", "--concurrency", "1", "--search", "all"]
    # Trying every shape twice needs 256 calls; the held-out runs may take 32 of the 150.
    args += ["--max-calls", "150"]
    calls = simulation.calls
    proc = start_cli(*args)
    checkpoint = store_path()
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
    record = json.loads(resumed.stdout)
    table = record["reward_table"]
    assert table["resumed_runs"] >= kept - 1  # a line torn by the signal is run again
    # The limit counts across the interruption: both sessions' calls together stay within it.
    assert simulation.calls - calls <= record["worker_calls"] <= 150
    assert table["budget_stopped"] and table["worker_calls"] <= 150 - 32
    assert not (conductors_dir() / ".cut.training").exists()  # done: the work dir is gone
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
    for bad in (["--tasks", "fixed", "--method", "grpo"], ["--tasks", "mine"]):
        proc = run_cli("train", "qa", str(data), "--config", str(config), "--out", "t", *bad)
        assert_one_line_error(proc, 2, "--tasks")
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


PROGRESS = re.compile(r"^conductor: ([a-z -]+ \d+/\d+\b|estimate: )")


def _row_key(row: dict) -> tuple[tuple[str, str, int], dict]:
    return (row["question"], row["shape"], int(row["repeat"])), row


def test_a_torn_checkpoint_line_is_skipped_and_cut_so_no_row_is_glued_to_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rewards.jsonl"
    rows = [{"question": "q1", "shape": f"s{s}", "repeat": 0, "reward": 1.0} for s in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]) + '{"question": "q1", "sh')
    assert list(read_checkpoint(path, _row_key)) == [("q1", "s0", 0), ("q1", "s1", 0)]
    with Checkpoint(path) as out:
        out.append(rows[2])
    assert path.read_text().splitlines() == [json.dumps(r) for r in rows]


def test_ctrl_c_keeps_the_rows_of_runs_that_finish_while_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while runs are in flight: they cannot be stopped mid-call, so the training waits
    for them; what they measured is written, and the jobs not started never run."""
    import threading

    from conductor_cli.train import checkpoint

    path = tmp_path / "rewards.jsonl"
    release, started = threading.Event(), []

    def one(n: int) -> dict:
        started.append(n)
        if n > 0:  # in flight when Ctrl-C comes (job 0's thread may take one more first)
            assert release.wait(10)
        return {"question": "q", "shape": f"s{n}", "repeat": 0, "calls": 1}

    def interrupted(row: dict) -> None:
        raise KeyboardInterrupt

    class Pool(checkpoint.ThreadPoolExecutor):
        def shutdown(self, *args: object, **kwargs: object) -> None:
            release.set()  # the runs in flight finish once the rest are cancelled
            super().shutdown(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpoint, "ThreadPoolExecutor", Pool)
    with pytest.raises(KeyboardInterrupt):
        run_checkpointed(list(range(8)), one, path, 3, interrupted)
    kept = [json.loads(line)["shape"] for line in path.read_text().splitlines()]
    assert len(started) <= 4  # the jobs not started when Ctrl-C came never ran
    assert kept == [f"s{n}" for n in sorted(started)]  # every one that ran is kept, in order


def _fill(disk: Path) -> Path:
    """One file that takes the disk's every free block."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_while_checkpointing_is_one_line_and_resume_runs_none_twice(
    simulation: SimulatedPool,
    sim_files: tuple[Path, Path],
    small_disk: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONDUCTOR_DATA_DIR", str(small_disk / "data"))  # the cache stays off it
    config, data = sim_files
    args = ["train", "qa", str(data), "--config", str(config), "--out", "full", "--json"]
    # 2 training questions (each costs llama.cpp a hidden state per run) x 10 shapes x 5 repeats:
    # 100 rows, over 2 pages of tmpfs, so appending reaches a page the full disk cannot give.
    args += ["--limit", "3", "--holdout", "0.34", "--repeats", "5", "--generations", "5"]
    args += ["--concurrency", "1", "--search", "all"]
    proc = start_cli(*args)
    work = conductors_dir() / ".full.training"
    checkpoint = store_path()
    deadline = time.monotonic() + 240
    while not (checkpoint.exists() and len(checkpoint.read_text().splitlines()) >= 10):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "--resume" in err, err
    before = checkpoint.read_bytes()
    split_before = (work / "split.json").read_bytes()

    filler = _fill(small_disk)
    failed = run_cli(*args, "--resume")
    # Piped, training shows progress lines on stderr; besides them, one line, and the last.
    assert "Traceback" not in failed.stderr
    kept = [line for line in failed.stderr.splitlines() if not PROGRESS.match(line)]
    assert kept and failed.stderr.rstrip().endswith(kept[-1]), failed.stderr
    failed.stderr = "\n".join(kept)
    line = assert_one_line_error(failed, 1, "disk full", str(checkpoint), "--resume")
    assert "No space left" in line, line
    # The rows written before are there byte for byte; what the failed run added is whole rows
    # (a row the disk cut short is taken back), each of a run not checkpointed before.
    after = checkpoint.read_bytes()
    assert after.startswith(before) and after.endswith(b"\n")
    keys = [_row_key(json.loads(row))[0] for row in after.splitlines()]
    assert len(set(keys)) == len(keys) >= len(before.splitlines())
    assert set(read_checkpoint(checkpoint, _row_key)) == set(keys)
    assert (work / "split.json").read_bytes() == split_before

    os.remove(filler)
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    table = json.loads(resumed.stdout)["reward_table"]
    assert table["workflow_runs"] == 2 * 10 * 5
    assert table["resumed_runs"] == len(keys)  # every checkpointed run, and none of them again
    assert not work.exists()
    assert (conductors_dir() / "full" / "head.json").exists()
