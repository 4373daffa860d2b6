"""The library entry point: `ask` runs config -> pool -> plan -> workflow -> engine -> answer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .backends.llamacpp import LlamaModels
from .catalog import Catalog, load_catalog
from .conductor import Conductor, Plan, WorkerInfo
from .config import Config
from .engine import Engine, StepResult
from .errors import InputError
from .events import PlanReady, PlanStarted, RunFinished, Subscriber, fan_out
from .inputs import Attachment
from .pool import build_pool, conductor_backend


@dataclass(frozen=True)
class RunResult:
    question: str
    plan: Plan
    steps: tuple[StepResult, ...]
    answer: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "workflow": self.plan.workflow.to_dict(),
            "repairs": list(self.plan.workflow.repairs),
            "plan": {
                "reply": self.plan.reply,
                "attempts": self.plan.attempts,
                "tokens_in": self.plan.tokens_in,
                "tokens_out": self.plan.tokens_out,
                "seconds": round(self.plan.seconds, 3),
            },
            "steps": [s.to_dict() for s in self.steps],
            "answer": self.answer,
            "totals": {
                "seconds": round(self.seconds, 3),
                "model_calls": self.plan.attempts + len(self.steps),
                "tokens_in": self.plan.tokens_in + sum(s.tokens_in for s in self.steps),
                "tokens_out": self.plan.tokens_out + sum(s.tokens_out for s in self.steps),
            },
        }


def ask(
    question: str,
    *,
    config: Config | None = None,
    attachments: Sequence[Attachment] = (),
    on_event: Subscriber | None = None,
    catalog: Catalog | None = None,
    models: LlamaModels | None = None,
) -> RunResult:
    """Plan a workflow for `question` with the configured conductor and run it on the pool."""
    if not question.strip():
        raise InputError('the question is empty; ask something, e.g. conductor ask "...".')
    config = config or Config()
    catalog = catalog or load_catalog()
    own_models = models is None
    c = config.conductor
    models = models or LlamaModels(
        n_ctx=c.n_ctx, n_gpu_layers=c.n_gpu_layers, n_threads=c.n_threads
    )
    emit = fan_out(on_event)
    start = time.monotonic()
    try:
        # Resolve (and fetch) every model before loading any, so a bad config costs no load.
        pool = build_pool(config, catalog, models)
        backend = conductor_backend(config, catalog, models)
        emit(PlanStarted(backend.identity))
        conductor = Conductor(backend, temperature=c.temperature, seed=c.seed)
        infos = [WorkerInfo(w.name, w.description) for w in pool.workers]
        plan = conductor.plan(question, infos, attachments, c.max_steps)
        emit(PlanReady(plan.workflow, plan.seconds))
        steps = Engine(pool, emit, seed=c.seed).run(question, plan.workflow, attachments)
        answer = steps[-1].output
        emit(RunFinished(answer))
        return RunResult(question, plan, tuple(steps), answer, time.monotonic() - start)
    finally:
        if own_models:
            models.close()
