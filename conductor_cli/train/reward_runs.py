"""Measuring rewards: (question, shape, repeat) runs through the project's engine under the
training's budget, each kept in the measured store (measured.py) as it finishes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths
from conductor_cli.errors import BudgetError
from conductor_cli.evals.records import Problem
from conductor_cli.policy.shapes import Shape
from conductor_cli.run.budget import Budget
from conductor_cli.train.checkpoint import read_checkpoint, run_checkpointed
from conductor_cli.train.measured import (
    Key,
    Measurement,
    parse_row,
    question_key,
    row_of,
    shape_key,
)
from conductor_cli.train.reward import run_cost
from conductor_cli.train.rollout import SEED_STRIDE, Runner

Job = tuple[int, int, int]  # (training question, shape, repeat)


@dataclass
class RewardRuns:
    runner: Runner
    training: Sequence[Problem]
    shapes: Sequence[Shape]
    fingerprints: dict[str, str]  # worker name -> registry.worker_fingerprint
    store: Path
    run_id: str  # this training's, on each row it measures
    budget: Budget
    concurrency: int

    def __post_init__(self) -> None:
        paths.private_dir(self.store.parent)
        rows: dict[Key, Measurement] = read_checkpoint(self.store, parse_row)
        # An earlier training's failed runs are measured again: the worker may be fixed since.
        self.rows = {k: m for k, m in rows.items() if not m.failed or m.run == self.run_id}
        self.question_keys = [question_key(p) for p in self.training]
        self.shape_keys = [shape_key(s, self.fingerprints) for s in self.shapes]
        self.stopped = False  # the budget ended the measuring

    def add_shapes(self, shapes: Sequence[Shape]) -> None:
        """More shapes to measure (learned words: train/head_words.py), after those there."""
        self.shapes = [*self.shapes, *shapes]
        self.shape_keys += [shape_key(s, self.fingerprints) for s in shapes]

    def key(self, job: Job) -> Key:
        q, s, r = job
        return self.question_keys[q], self.shape_keys[s], r

    def get(self, job: Job) -> Measurement | None:
        return self.rows.get(self.key(job))

    def own_calls(self) -> int:
        """Calls made by rows of this training (a resumed one's included)."""
        return sum(m.calls for m in self.rows.values() if m.run == self.run_id)

    def measure(self, jobs: Sequence[Job], on_done: Callable[[Job, Measurement], None]) -> None:
        """Run the jobs not yet measured; stop (setting `stopped`) at the budget's limit. Ctrl-C
        cancels the jobs not started; the rows written stay."""
        todo = [j for j in jobs if self.key(j) not in self.rows]
        if not todo or self.stopped:
            return
        seed0 = self.runner.config.conductor.seed

        def one(job: Job) -> dict[str, Any] | None:
            q, s, r = job
            shape = self.shapes[s]
            try:
                run, correct = self.runner.run(
                    self.training[q], shape.workflow(), seed0 + SEED_STRIDE * r, budget=self.budget
                )
            except BudgetError:
                self.stopped = True
                return None
            if run is None:
                return row_of(self.key(job), Measurement(False, 0.0, 0, True, self.run_id))
            totals = run.totals()
            cost = run_cost(totals["cost"], totals["tokens_in"] + totals["tokens_out"])
            m = Measurement(correct, cost, run.model_calls, False, self.run_id)
            return row_of(self.key(job), m)

        # Rows come back in the jobs' order; two questions of the same content share a key.
        jobs_of: dict[Key, list[Job]] = {}
        for j in todo:
            jobs_of.setdefault(self.key(j), []).append(j)

        def on_row(row: dict[str, Any]) -> None:
            key, m = parse_row(row)
            self.rows[key] = m
            on_done(jobs_of[key].pop(0), m)

        run_checkpointed(todo, one, self.store, self.concurrency, on_row)
