"""Training past one process: `conductor train --method grpo --engine trl` on TRL's
GRPOTrainer, in two CPU processes over gloo (`--processes 2`: accelerate's launcher), with the
real SmolLM2 GGUF as the conductor (sampled in llama.cpp, trained in torch) and a simulation of
specialist workers as the pool (testing/simulated_pool.py); and the ledger that holds
`--max-calls` for all processes together."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl", reason="--engine trl needs the scale extra")

from conductor_cli.errors import BudgetError
from conductor_cli.policy.registry import conductors_dir
from conductor_cli.testing.simulated_pool import TWO_SPECIALISTS, SimulatedPool, make_questions
from conductor_cli.train.launch import strip_processes
from conductor_cli.train.ledger import SharedBudget, read_totals

from .conftest import assert_one_line_error, run_cli
from .test_train_lora import adapter_weights


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(make_questions(["arith", "words"], 6), TWO_SPECIALISTS)
    yield sim
    sim.close()


def _reserve_many(folder: str, tries: int, process: int) -> int:
    """Reserve up to `tries` calls once every process is ready (they race for the ledger)."""
    import time

    Path(folder, f"ready-{process}").touch()
    while not Path(folder, "go").exists():
        time.sleep(0.005)
    budget = SharedBudget(max_calls=50, ledger=Path(folder, "spent.json"), process=process)
    made = 0
    for _ in range(tries):
        try:
            budget.reserve("w", None)
        except BudgetError:
            break
        made += 1
    return made


def test_the_ledger_holds_the_limit_for_processes_reserving_at_once(tmp_path: Path) -> None:
    import time

    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pending = pool.starmap_async(_reserve_many, [(str(tmp_path), 40, p) for p in range(4)])
        while len(list(tmp_path.glob("ready-*"))) < 4:
            time.sleep(0.01)
        (tmp_path / "go").touch()
        made = pending.get(timeout=120)
    assert sum(made) == 50  # 160 tried at once, exactly the limit granted, none lost to a race
    calls, dollars, by_process = read_totals(tmp_path / "spent.json")
    assert calls == 50 and dollars == 0.0
    assert {int(k): v for k, v in by_process.items()} == {p: n for p, n in enumerate(made) if n}


def test_two_processes_train_within_one_budget_then_resume_and_install(
    simulation: SimulatedPool, tmp_path: Path, gguf_path: Path
) -> None:
    config, data = simulation.files(tmp_path)
    # One llama.cpp thread a process: two processes on every core slow each other many times.
    config.write_text(config.read_text().replace("max_steps = 2", "max_steps = 2\nn_threads = 1"))
    args = [
        "train", "qa", str(data), "--config", str(config), "--out", "scaled",
        "--method", "grpo", "--engine", "trl", "--processes", "2", "--steps", "2",
        "--samples", "2", "--questions-per-step", "2", "--repeats", "1", "--holdout", "0.34",
        "--json",
    ]  # fmt: skip
    # 9 calls cannot cover 2 steps (2 questions x 2 workflows x up to 2 steps each); with these
    # seeds the sum of both processes' calls crosses it in step 2: one line, and step 1's
    # checkpoint and the ledger are kept.
    stopped = run_cli(*args, "--max-calls", "9", timeout=900)
    line = stopped.stderr.strip().splitlines()[-1]
    assert stopped.returncode == 2, stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert line.startswith("conductor: error: ") and "--max-calls 9" in line and "--resume" in line
    assert stopped.stdout == ""
    work = conductors_dir() / ".scaled.training"
    calls, _, by_process = read_totals(work / "spent.json")
    assert calls == 9 and set(by_process) == {"0", "1"}  # both processes called workers
    assert (work / "trl" / "checkpoint-1").is_dir()

    # The summary a person reads (no --json) prints TRL's curve too.
    resumed = run_cli(*args[:-1], "--max-calls", "40", "--resume", timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert "held-out after step 2: accuracy" in resumed.stdout, resumed.stdout
    directory = conductors_dir() / "scaled"
    record = json.loads((directory / "record.json").read_text(encoding="utf-8"))
    assert record["engine"] == "trl"
    assert [e["step"] for e in record["curve"]] == [1, 2]  # none fitted twice, none lost
    assert "held_out" in record["curve"][-1]
    cost = record["cost"]
    assert cost["processes"] == 2
    assert 9 < cost["worker_calls"] <= 40  # the resumed run went on from the ledger, within it
    assert all(cost["worker_calls_by_process"][p] > 0 for p in ("0", "1"))
    assert record["export_check"]["identical"] == 5
    weights = adapter_weights(directory / "adapter.gguf")
    assert any(np.abs(b).sum() > 0 for name, b in weights.items() if name.endswith("lora_b"))
    assert not work.exists()

    # Installed as a model name (llama.cpp loaded its adapter in the export check above; `ask`
    # with an installed adapter is test_train_lora's).
    info = json.loads(run_cli("models", "info", "scaled", "--json").stdout)
    assert info["engine"] == "trl" and info["curve"] == record["curve"]


def test_expert_iteration_on_trls_sft_fits_exports_and_installs(
    simulation: SimulatedPool, tmp_path: Path, gguf_path: Path
) -> None:
    config, data = simulation.files(tmp_path)
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "sft",
        "--method", "expert-iteration", "--engine", "trl", "--iterations", "1",
        "--samples", "2", "--epochs", "1", "--repeats", "1", "--holdout", "0",
        "--limit", "6", "--json",
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["engine"] == "trl" and record["method"] == "expert-iteration"
    (entry,) = record["curve"]
    assert entry["iteration"] == 1 and entry["samples"] == 12 and entry["fitted"] > 0
    assert record["hyperparameters"]["fit"].startswith("TRL SFTTrainer")
    assert record["hyperparameters"]["gradient_checkpointing"] is False  # a CPU: no recompute
    assert record["export_check"]["identical"] == 5
    weights = adapter_weights(conductors_dir() / "sft" / "adapter.gguf")
    assert any(np.abs(b).sum() > 0 for name, b in weights.items() if name.endswith("lora_b"))


def test_bad_scale_input_is_one_line(simulation: SimulatedPool, tmp_path: Path) -> None:
    config, data = simulation.files(tmp_path)
    base = ("train", "qa", str(data), "--config", str(config), "--method")
    proc = run_cli(*base, "grpo", "--processes", "2")
    assert_one_line_error(proc, 2, "--processes 2", "--engine trl")
    proc = run_cli(*base, "grpo", "--engine", "trl", "--tasks", "fixed")
    assert_one_line_error(proc, 2, "--tasks", "--engine trl")
    without_trl = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['trl'] = None; sys.argv[0] = 'conductor'; "
            "from conductor_cli.cli.entry import main; main()",
            *(*base, "grpo", "--engine", "trl", "--processes", "2"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(without_trl, 2, "needs trl", "conductor-cli[scale]")


def test_the_launched_processes_train_and_do_not_launch_again() -> None:
    argv = ["train", "qa", "f.jsonl", "--processes", "2", "--engine", "trl", "--processes=3"]
    assert strip_processes(argv) == ["train", "qa", "f.jsonl", "--engine", "trl"]
