"""Measured rewards, kept across trainings: one row per (question, workflow shape, repeat).

A row is keyed by the question's content (text, answer, scorer: not its id or file) and by the
shape written with the fingerprints of its workers (`registry.worker_fingerprint`: model,
endpoint and the settings that change a reply, not the name). So training again after adding,
replacing or retuning a worker finds every row of the shapes it does not touch and measures
only those that involve it; a renamed worker keeps its rows. The store is
`DATA_DIR/train/measured.jsonl`, appended one whole line at a time (`checkpoint.Checkpoint`): a
row torn by Ctrl-C or a full disk is skipped and measured again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths
from conductor_cli.evals.records import Problem
from conductor_cli.policy.shapes import Shape
from conductor_cli.train.reward import reward

STORE = "measured.jsonl"
# The words a shape runs with while measured (shapes.ANSWER_TASK / CHECK_TASK): other words
# would be other runs.
WORDS = "answer-check-v1"


def store_path() -> Path:
    return paths.data_dir() / "train" / STORE


def question_key(problem: Problem) -> str:
    """What a question's reward depends on: everything but its id."""
    # (aliases only where there are some: the keys of questions measured before it stay)
    fields = {k: v for k, v in asdict(problem).items() if k != "id" and (k != "aliases" or v)}
    return _digest(fields)


def shape_key(shape: Shape, fingerprints: Mapping[str, str]) -> str:
    """The shape with each worker replaced by its fingerprint; its words where it names any
    (a shape with the default words keeps the key it had before shapes had words)."""
    key: list[object] = [WORDS, [fingerprints[w] for w in shape.workers]]
    key.append([list(s) for s in shape.sees])
    if shape.words:
        # the words themselves, not names
        key.append([shape.text(i) for i in range(len(shape.workers))])
    return _digest(key)


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True)
class Measurement:
    correct: bool
    cost: float  # reward.run_cost: dollars where priced, else thousands of tokens
    calls: int  # new worker calls the run made (cache hits excluded)
    failed: bool  # the run failed (every try of a step, or a worker refused): scored wrong
    run: str  # the training that measured it (a budget counts its own calls across resumes)

    def reward(self, cost_weight: float) -> float:
        return reward(parsed=True, correct=self.correct, cost=self.cost, cost_weight=cost_weight)


Key = tuple[str, str, int]  # (question_key, shape_key, repeat)


def parse_row(row: dict[str, Any]) -> tuple[Key, Measurement]:
    key = (str(row["question"]), str(row["shape"]), int(row["repeat"]))
    return key, Measurement(
        bool(row["correct"]),
        float(row["cost"]),
        int(row["calls"]),
        bool(row.get("failed", False)),
        str(row.get("run", "")),
    )


def row_of(key: Key, m: Measurement) -> dict[str, Any]:
    return {
        "question": key[0],
        "shape": key[1],
        "repeat": key[2],
        "correct": m.correct,
        "cost": round(m.cost, 8),
        "calls": m.calls,
        "failed": m.failed,
        "run": m.run,
    }
