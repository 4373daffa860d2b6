"""`conductor eval` end to end with the embedded model: HumanEval problems and MCQ rows,
every strategy, the table, JSON, CSV, the plot, a resume after Ctrl-C, and the GRPO export."""

from __future__ import annotations

import csv
import json
import os
import signal
import time
from pathlib import Path

from conductor_cli.evals.store import evals_dir

from .conftest import REPO, run_cli, start_cli

DATA = REPO / "tests" / "data"
STRATEGIES = [
    "conductor",
    "single:local",
    "vote:local",
    "moa",
    "router",
    "knn-router",
    "knn-router:vote",
    "oracle",
]

# One-step plans and short answers keep the whole eval within a minute on 2 cores.
CONFIG = """
[conductor]
max_steps = 1

[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
description = "tiny local model"
max_tokens = {tokens}
"""


def _config(tmp_path: Path, tokens: int) -> Path:
    path = tmp_path / f"eval-{tokens}.toml"
    path.write_text(CONFIG.format(tokens=tokens), encoding="utf-8")
    return path


def _stored(path: Path) -> dict[tuple[str, str], str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(d["strategy"], d["problem_id"]): line for line in lines if (d := json.loads(line))}


def test_humaneval_every_strategy_table_json_csv_plot(tmp_path: Path, gguf_path: Path) -> None:
    config = _config(tmp_path, 32)
    out_json, out_csv, out_png = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "r.png"
    proc = run_cli(
        "eval", "humaneval", str(DATA / "humaneval5.jsonl"), "--config", str(config),
        "--limit", "2", "--json-out", str(out_json), "--csv-out", str(out_csv),
        "--plot", str(out_png),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # Two of the five problems (the suite's time). Piped: a tab-separated table, one row
    # per strategy in the order asked.
    rows = [line.split("\t") for line in proc.stdout.strip().splitlines()]
    assert rows[0][:3] == ["strategy", "n", "accuracy %"]
    assert [r[0] for r in rows[1:]] == STRATEGIES
    assert all(r[1] == "2" for r in rows[1:])

    doc = json.loads(out_json.read_text())
    by = {s["strategy"]: s for s in doc["strategies"]}
    assert list(by) == STRATEGIES
    for s in by.values():
        assert 0.0 <= s["ci_low"] <= s["accuracy"] <= s["ci_high"] <= 1.0
        assert s["n"] == 2 and s["errors"] == 0
        assert s["cost"] == 0.0  # local models are free
    assert by["single:local"]["model_calls"] == 2
    assert by["vote:local"]["model_calls"] == 6  # three samples each
    assert by["moa"]["model_calls"] == 4  # one worker, then the aggregator
    assert by["oracle"]["accuracy"] >= by["single:local"]["accuracy"]
    # With one worker the router can only pick it.
    assert by["router"]["correct"] == by["single:local"]["correct"]
    assert doc["meta"]["n_problems"] == 2
    # Each problem's outcome per strategy, derived ones too: what a paired test needs.
    assert list(doc["correct"]) == STRATEGIES
    for s, outcome in doc["correct"].items():
        assert len(outcome) == 2 and sum(outcome.values()) == by[s]["correct"], s

    with out_csv.open(newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["strategy"] for r in table] == STRATEGIES
    assert [float(r["accuracy"]) for r in table] == [by[s]["accuracy"] for s in STRATEGIES]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Every answer was really run against the problem's tests in the sandbox.
    stored = [json.loads(line) for line in _stored(Path(doc["meta"]["results"])).values()]
    assert len(stored) == 2 * 4  # the base strategies; router and oracle are derived
    assert all(r["detail"]["sandbox"] in {"passed", "failed", "timeout", "memory",
                                          "file_size", "error"} for r in stored)  # fmt: skip
    for r in stored:
        assert r["correct"] == (r["detail"]["sandbox"] == "passed")

    # The conductor's runs are traces with their reward: the GRPO export has one row each.
    export = tmp_path / "grpo.jsonl"
    done = run_cli("traces", "export", "--format", "grpo", str(export))
    assert done.returncode == 0, done.stderr
    rows_out = [json.loads(line) for line in export.read_text().splitlines()]
    assert len(rows_out) == 2
    conductor_right = {r["problem_id"] for r in stored if r["strategy"] == "conductor"
                       and r["correct"]}  # fmt: skip
    for row in rows_out:
        assert row["dataset"] == "humaneval"
        assert row["prompt"][0]["role"] == "system" and row["prompt"][-1]["role"] == "user"
        assert row["completion"] and row["workflow"]["steps"]
        assert row["reward"] == (1.0 if row["problem_id"] in conductor_right else 0.0)


def test_mcq_eval_resumes_after_ctrl_c_without_recomputing(tmp_path: Path, gguf_path: Path) -> None:
    config = _config(tmp_path, 12)
    # Six of the ten rows (the suite's time), drawn so that each half holds both categories.
    args = ["eval", "mcq", str(DATA / "mcq10.jsonl"), "--config", str(config), "-v"]
    args += ["--sample", "6", "--seed", "4"]
    proc = start_cli(*args)
    assert proc.stderr is not None
    seen, head = 0, []
    deadline = time.monotonic() + 240
    while seen < 8 and time.monotonic() < deadline:
        # os-level reads, not the file object's: communicate() below reads the pipe directly,
        # and lines held in a file object's read-ahead buffer would never reach `rest`.
        chunk = os.read(proc.stderr.fileno(), 65536).decode()
        if not chunk:
            break
        head.append(chunk)
        seen = "".join(head).count("conductor: [")
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    everything = "".join(head) + rest
    assert proc.returncode == 130, everything
    assert "run the same command again to continue" in everything, everything
    stores = list(evals_dir().glob("*.jsonl"))
    assert len(stores) == 1
    before = _stored(stores[0])
    assert 8 <= len(before) < 24

    again = run_cli(*args, "--no-cache", "--json-out", str(tmp_path / "m.json"))
    assert again.returncode == 0, again.stderr
    assert f"{len(before)} of 24 results came from an earlier run" in again.stderr
    after = _stored(stores[0])
    assert len(after) == 24
    # Finished rows were kept byte for byte, not computed again.
    assert all(after[k] == line for k, line in before.items())
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["meta"]["resumed"] == len(before)
    assert doc["meta"]["computed"] == 24 - len(before)
    by = {s["strategy"]: s for s in doc["strategies"]}
    assert list(by) == STRATEGIES and all(s["n"] == 6 for s in by.values())
    # The router learned on the other half, per category (both halves hold both).
    routed = [json.loads(v) for k, v in after.items() if k[0] == "single:local"]
    assert len(routed) == 6
