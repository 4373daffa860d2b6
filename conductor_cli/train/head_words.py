"""The head training's words phase (`train --learn-words ROUNDS`): train/word_shapes.py's
search run through the training's runner and budget, and the shapes it keeps measured on
every training question, so the head chooses among them as among the others.

A trial runs with repeat 0's seed, so the runs of words that were already measured (the
searched shape's own) are cache hits, and the kept shape's runs on its kind are again."""

from __future__ import annotations

from typing import Any

import numpy as np

from conductor_cli.errors import BudgetError
from conductor_cli.evals.records import Problem
from conductor_cli.policy.shapes import Shape
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.train.measured import Measurement
from conductor_cli.train.reward_runs import Job, RewardRuns
from conductor_cli.train.shared import OnProgress, Progress
from conductor_cli.train.word_shapes import learn_word_shapes, learned_step, step_context

PROPOSE = "Write the new instruction."


def learn_words_phase(
    runs: RewardRuns,
    table: np.ndarray,
    step_cost: float,
    cost_weight: float,
    rounds: int,
    tools: frozenset[str],
    on_progress: OnProgress,
) -> tuple[list[Shape], np.ndarray, dict[str, Any]]:
    """(the new shapes, their columns of rewards on every training question, what the search
    did for record.json); no shapes where no words won or the budget ended the search."""
    runner, training = runs.runner, runs.training
    seed0 = runner.config.conductor.seed
    steps = np.array([len(s.workers) for s in runs.shapes], dtype=np.float64)

    def trial(shape: Shape, problem: Problem) -> tuple[bool, str]:
        run, correct = runner.run(problem, shape.workflow(), seed0, budget=runs.budget)
        if run is None:
            return False, "(the run failed)"
        if len(run.steps) == 1:
            return correct, run.answer
        outputs = [(s.worker, s.output) for s in run.steps]
        return correct, step_context(outputs, learned_step(shape, tools) or 0)

    def propose(worker: str, prompt: str, k: int) -> str:
        workflow = Workflow((Step(worker, prompt),))
        return runner.reply(PROPOSE, workflow, seed0 + k, runs.budget)

    def on_kind(done: int, total: int, kind: str) -> None:
        on_progress(Progress("words", done, total, kind))

    notes: dict[str, Any] = {"rounds": rounds}
    try:
        learned = learn_word_shapes(
            runs.shapes, table, table - step_cost * steps, training, tools, trial, propose,
            rounds=rounds, on_kind=on_kind,
        )  # fmt: skip
    except BudgetError:
        notes["stopped"] = "the budget ended the search; no words kept"
        return [], np.zeros((len(training), 0)), notes
    notes["searches"] = [item.to_dict() for item in learned]
    kept = list(dict.fromkeys(item.shape for item in learned if item.shape is not None))
    if not kept:
        return [], np.zeros((len(training), 0)), notes
    first = len(runs.shapes)
    runs.add_shapes(kept)
    jobs: list[Job] = [(q, first + j, 0) for j in range(len(kept)) for q in range(len(training))]
    runs.measure(jobs, lambda job, m: on_progress(Progress("words", job[0] + 1, len(training))))
    columns = np.full((len(training), len(kept)), np.nan)
    for q, s, r in jobs:
        m: Measurement | None = runs.get((q, s, r))
        if m is not None:
            columns[q, s - first] = min(1.0, max(0.0, m.reward(cost_weight)))
    whole = ~np.isnan(columns).any(axis=0)  # the budget may stop a column half measured
    if not whole.all():
        notes["unmeasured"] = [kept[j].label for j in range(len(kept)) if not whole[j]]
    shapes = [s for s, ok in zip(kept, whole, strict=True) if ok]
    if len(shapes) < len(kept):
        del runs.shapes[first:], runs.shape_keys[first:]
        runs.add_shapes(shapes)
    notes["kept"] = [s.label for s in shapes]
    return shapes, columns[:, whole], notes
