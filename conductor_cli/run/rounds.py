"""Rounds 2..max_rounds of a run: the conductor reads its workflow and the team's answer, then
keeps the answer (an empty workflow: no more rounds) or writes a corrective workflow whose
steps see that answer. A trace's recorded rounds (replay, resume) run again as recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conductor_cli.config.settings import Config
from conductor_cli.errors import ConductorError
from conductor_cli.run.engine import Engine, StepResult
from conductor_cli.run.events import (
    PlanReady,
    PlanStarted,
    RoundEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    Source,
    Subscriber,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import Conductor, Plan, worker_infos
from conductor_cli.run.pool import Pool
from conductor_cli.run.results import PriorRound, RoundResult
from conductor_cli.run.workflow import Workflow


@dataclass
class LaterRounds:
    config: Config
    pool: Pool
    make_planner: Callable[[], Conductor]  # called on the first re-plan only
    conductor_identity: Callable[[], str]
    prior_rounds: tuple[PriorRound, ...]
    seed: int
    stream: bool
    check_cancel: Callable[[], None]
    cancel: threading.Event | None = None

    def play(
        self,
        question: str,
        attachments: Sequence[Attachment],
        workflow: Workflow,
        answer: str,
        emit: Subscriber,
        rounds: list[RoundResult],
        notes: list[str],
    ) -> str:
        """The answer after the last round; each round is appended to `rounds`. A round that
        cannot run (an invalid re-plan twice, the budget, a failed step) leaves the answer so
        far standing, with a note."""
        planner: list[Conductor] = []  # a replayed round runs its recorded workflow
        for k in range(2, self.config.conductor.max_rounds + 1):
            self.check_cancel()

            def in_round(event: Any, k: int = k) -> None:
                emit(RoundEvent(k, event))

            in_round(RunStarted(question))
            prior = self.prior_rounds[k - 2] if k - 2 < len(self.prior_rounds) else None
            plan: Plan | None = None
            try:
                if prior is not None and prior.workflow is not None:
                    chosen = prior.workflow
                    in_round(PlanReady(chosen, 0.0, "trace"))
                else:
                    in_round(PlanStarted(self.conductor_identity()))
                    if not planner:
                        planner.append(self.make_planner())
                    plan = self._replan(planner[0], question, attachments, workflow, answer)
                    chosen = plan.workflow
                    source: Source = "cache" if plan.cached else "model"
                    in_round(
                        PlanReady(chosen, plan.seconds, source, plan.tokens_in, plan.tokens_out)
                    )
                if not chosen.steps:
                    in_round(RunFinished(answer))
                    rounds.append(RoundResult(k, plan, (), answer, "kept", chosen))
                    break
                steps = self._run_round(k, question, attachments, answer, chosen, prior, in_round)
            except ConductorError as e:
                in_round(RunFailed(str(e)))
                notes.append(f"round {k} did not finish ({e}); the answer of round {k - 1} stands")
                failed = plan.workflow if plan is not None else None
                rounds.append(RoundResult(k, plan, (), answer, "failed", failed))
                break
            answer = steps[-1].output
            in_round(RunFinished(answer))
            rounds.append(RoundResult(k, plan, tuple(steps), answer, "corrected", chosen))
            workflow = chosen
        return answer

    def _replan(
        self,
        planner: Conductor,
        question: str,
        attachments: Sequence[Attachment],
        workflow: Workflow,
        answer: str,
    ) -> Plan:
        infos = worker_infos(self.pool.workers)
        max_steps = self.config.conductor.max_steps
        return planner.replan(question, infos, attachments, max_steps, workflow, answer)

    def _run_round(
        self,
        k: int,
        question: str,
        attachments: Sequence[Attachment],
        answer: str,
        chosen: Workflow,
        prior: PriorRound | None,
        in_round: Subscriber,
    ) -> list[StepResult]:
        self.check_cancel()
        seen = Attachment(f"answer of round {k - 1}", answer)
        engine = Engine(self.pool, in_round, seed=self.seed, stream=self.stream, cancel=self.cancel)
        keep = prior.keep if prior is not None else {}
        return engine.run_steps(question, chosen, [*attachments, seen], keep)
