"""Running and scoring workflows for training through the project's own engine, and the
held-out score of a conductor through the planning path `ask` uses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from conductor_cli.api import NO_TRACE, RunOptions, RunResult, execute
from conductor_cli.config.settings import Config
from conductor_cli.errors import BudgetError, ConductorError
from conductor_cli.evals import scoring
from conductor_cli.evals.kinds import runs_code, scoring_sandbox
from conductor_cli.evals.records import Problem
from conductor_cli.run.budget import Budget
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import Workflow
from conductor_cli.runtime import Runtime
from conductor_cli.train.reward import reward, run_cost
from conductor_cli.train.shared import OnProgress, Progress, TrainOptions

# Repeat r of a run uses the conductor's seed + SEED_STRIDE * r (the reward tables and the
# first rounds a round head reads must draw the same runs, so they come from the cache).
SEED_STRIDE = 7919


@dataclass(frozen=True)
class HeldOut:
    """A conductor's score on the held-out questions."""

    accuracy: float
    reward: float
    n: int
    by_category: dict[str, float]
    shapes: dict[str, int]  # workflow shape label -> how many questions got it
    max_rounds: int = 1
    rounds: float = 1.0  # mean rounds whose workflow ran (a round that kept the answer ran none)
    # max_rounds >= 2: round 2's decisions after a right and after a wrong first answer
    second_round: dict[str, dict[str, int]] | None = None
    budget_stopped: bool = False  # --max-calls/--max-cost ended it before the last question

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "accuracy": round(self.accuracy, 4),
            "reward": round(self.reward, 4),
            "n": self.n,
            "by_category": {k: round(v, 4) for k, v in self.by_category.items()},
            "shapes": self.shapes,
        }
        if self.budget_stopped:
            out["budget_stopped"] = True
        if self.max_rounds > 1:
            out |= {
                "max_rounds": self.max_rounds,
                "rounds": round(self.rounds, 3),
                "second_round": self.second_round,
            }
        return out


class Runner:
    """Runs workflows and scores their answers, sharing models and litellm's helper."""

    def __init__(self, config: Config, problems: Sequence[Problem]) -> None:
        self.config = config
        self.runtime = Runtime(config)
        self.sandbox = scoring_sandbox() if runs_code(problems) else None

    def run(
        self,
        problem: Problem,
        workflow: Workflow | None,
        seed: int,
        config: Config | None = None,
        attachments: Sequence[Attachment] = (),
        budget: Budget | None = None,
    ) -> tuple[RunResult | None, bool]:
        """(the run, whether its answer is right); (None, False) when the run failed. A call
        that would cross `budget` raises BudgetError: that run measured nothing."""
        given = [Attachment(name, text) for name, text in problem.attachments]
        run = self._execute(
            problem.question, workflow, seed, budget, config, [*given, *attachments]
        )
        if run is None:
            return None, False  # a failed run is a wrong answer
        correct, _, _ = scoring.score(problem, run.answer, self.sandbox)
        return run, correct

    def reply(self, question: str, workflow: Workflow, seed: int, budget: Budget | None) -> str:
        """The answer of one run that is not scored (a proposal of words); '' where it failed."""
        run = self._execute(question, workflow, seed, budget)
        return "" if run is None else run.answer

    def _execute(
        self,
        question: str,
        workflow: Workflow | None,
        seed: int,
        budget: Budget | None,
        config: Config | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> RunResult | None:
        """One run without a trace; None where it failed. A call that would cross `budget`
        raises BudgetError."""
        try:
            return execute(
                question,
                config=config or self.config,
                attachments=attachments,
                workflow=workflow,
                options=RunOptions(seed=seed, budget=budget),
                trace=NO_TRACE,
                runtime=self.runtime,
            )
        except BudgetError:
            raise
        except ConductorError:
            return None

    def close(self) -> None:
        self.runtime.close()


def reward_of(run: RunResult | None, correct: bool, cost_weight: float) -> float:
    if run is None:
        return reward(parsed=True, correct=False)
    totals = run.totals()
    cost = run_cost(totals["cost"], totals["tokens_in"] + totals["tokens_out"])
    return reward(parsed=True, correct=correct, cost=cost, cost_weight=cost_weight)


def held_out_score(
    runner: Runner,
    held_out: Sequence[Problem],
    conductor_model: str,
    options: TrainOptions,
    label: str,
    on_progress: OnProgress,
    max_rounds: int = 1,
    budget: Budget | None = None,
) -> HeldOut | None:
    """The conductor `conductor_model` planning (greedy, as `ask` does) on every question, in
    at most `max_rounds` rounds; None when nothing is held out (`--holdout 0`) or the budget
    allowed no question."""
    if not held_out:
        return None
    settings = replace(runner.config.conductor, model=conductor_model, max_rounds=max_rounds)
    config = replace(runner.config, conductor=settings)
    rewards: list[float] = []
    right: list[bool] = []
    used: list[int] = []
    shapes: Counter[str] = Counter()
    by_category: dict[str, list[bool]] = {}
    second: dict[str, Counter[str]] = {"first_right": Counter(), "first_wrong": Counter()}
    stopped = False
    for i, problem in enumerate(held_out):
        try:
            run, correct = runner.run(problem, None, config.conductor.seed, config, budget=budget)
        except BudgetError:
            stopped = True
            break
        rewards.append(reward_of(run, correct, options.cost_weight))
        right.append(correct)
        if run is not None:
            shapes[run.workflow.shape] += 1
            used.append(1 + sum(r.decision == "corrected" for r in run.rounds))
            if run.rounds and run.steps:
                first, _, _ = scoring.score(problem, run.steps[-1].output, runner.sandbox)
                side = second["first_right" if first else "first_wrong"]
                side["n"] += 1
                side[run.rounds[0].decision] += 1
        by_category.setdefault(problem.category or "all", []).append(correct)
        on_progress(Progress("held-out", i + 1, len(held_out), label))
    if not right:
        return None
    return HeldOut(
        accuracy=float(np.mean(right)),
        reward=float(np.mean(rewards)),
        n=len(right),
        by_category={k: float(np.mean(v)) for k, v in sorted(by_category.items())},
        shapes=dict(shapes.most_common()),
        max_rounds=max_rounds,
        rounds=float(np.mean(used)) if used else 0.0,
        second_round={k: dict(v) for k, v in second.items()} if max_rounds > 1 else None,
        budget_stopped=stopped,
    )
