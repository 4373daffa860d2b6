"""Eight `conductor ask` processes at once on one cache and one trace directory."""

from __future__ import annotations

import json
from pathlib import Path

from conductor_cli.storage.cache import ResponseCache
from conductor_cli.storage.trace import load_trace, traces_dir

from .conftest import run_cli, start_cli

# One llama.cpp thread per process: eight processes with a thread per core each would
# oversubscribe a small machine many times over.
CONFIG = """
[conductor]
max_steps = 1
n_threads = 1

[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
description = "tiny local model"
max_tokens = 12
"""
# Two processes ask the same question: they race to write the same cache keys.
QUESTIONS = [
    "What is the capital of Spain?",
    "What is the capital of Spain?",
    "Name a fruit that is yellow.",
    "What is 3 plus 4?",
    "Which planet is the largest?",
    "What do bees make?",
    "Name a colour of the rainbow.",
    "What is the opposite of hot?",
]


def test_eight_concurrent_asks_all_finish_and_corrupt_nothing(
    tmp_path: Path, gguf_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG, encoding="utf-8")
    # One run first saves the conductor's prompt state, which the eight then share (and read
    # at once); without it each would spend seconds computing the same state.
    warm = run_cli("ask", "--config", str(config), "Hello?", timeout=120)
    assert warm.returncode == 0, warm.stderr
    procs = [start_cli("ask", "--config", str(config), q) for q in QUESTIONS]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert out.strip(), err

    traces = sorted(traces_dir().glob("*.json"))
    assert len(traces) == len(QUESTIONS) + 1
    records = [r for r in (load_trace(t) for t in traces) if r["question"] != "Hello?"]
    assert sorted(r["question"] for r in records) == sorted(QUESTIONS)
    assert all(r["status"] == "done" for r in records)
    for r in records:
        assert all(s["status"] == "done" and s["output"] for s in r["steps"])
    cache = ResponseCache()
    try:
        entries = cache.verify()
    finally:
        cache.close()
    # Every distinct call is stored: a plan and a step per distinct question (and the warm-up).
    distinct = {r["question"] for r in records}
    assert entries >= 2 * (len(distinct) + 1)
    # A rerun of each question is answered from the cache alone, with the same answer.
    again = run_cli("ask", "--config", str(config), "--json", QUESTIONS[2], timeout=120)
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["totals"]["model_calls"] == 0
    assert doc["answer"] == next(r["answer"] for r in records if r["question"] == QUESTIONS[2])
