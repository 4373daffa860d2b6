"""The library entry points: `ask` (plan, then run) and `run_workflow` (run a given workflow).

Data flows one way: config -> pool -> conductor plan -> workflow -> engine -> events, and the
events go to the caller's subscriber (a view) and to the trace writer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from conductor_cli.backends.base import Backend
from conductor_cli.backends.litellm import LiteLLMProcess
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.backends.prefix_state import PrefixStateStore
from conductor_cli.config.settings import CONDUCTOR_WORKER, Config, WorkerConfig
from conductor_cli.errors import ConductorError, InputError, WorkflowError, is_interrupt
from conductor_cli.models.catalog import Catalog, load_catalog
from conductor_cli.run.budget import Budget, Pricing
from conductor_cli.run.engine import Engine, NestedRun, Recurse, StepResult
from conductor_cli.run.events import (
    PlanReady,
    PlanStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    Source,
    Subscriber,
    fan_out,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import Conductor, Plan, ShapeChooser, WorkerInfo
from conductor_cli.run.pool import Pool, Worker, build_pool, conductor_backend, uses_litellm
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.storage.cache import CachedBackend, CacheMode, CallCounter, ResponseCache
from conductor_cli.storage.trace import TraceWriter, config_secrets


@dataclass(frozen=True)
class RunResult:
    question: str
    workflow: Workflow
    plan: Plan | None
    steps: tuple[StepResult, ...]
    answer: str
    seconds: float
    model_calls: int
    cache_hits: int
    trace_path: Path | None = None

    def totals(self) -> dict[str, Any]:
        plan_in = self.plan.tokens_in if self.plan else 0
        plan_out = self.plan.tokens_out if self.plan else 0
        costs = [s.cost for s in self.steps]
        return {
            "seconds": round(self.seconds, 3),
            "model_calls": self.model_calls,
            "cache_hits": self.cache_hits,
            "tokens_in": plan_in + sum(s.tokens_in for s in self.steps),
            "tokens_out": plan_out + sum(s.tokens_out for s in self.steps),
            "cost": None if None in costs else round(sum(c or 0.0 for c in costs), 6),
        }

    def to_dict(self) -> dict[str, Any]:
        plan = None
        if self.plan is not None:
            plan = {
                "reply": self.plan.reply,
                "attempts": self.plan.attempts,
                "tokens_in": self.plan.tokens_in,
                "tokens_out": self.plan.tokens_out,
                "seconds": round(self.plan.seconds, 3),
                "cached": self.plan.cached,
                "fallback": self.plan.fallback,
            }
        return {
            "question": self.question,
            "workflow": self.workflow.to_dict(),
            "repairs": list(self.workflow.repairs),
            "plan": plan,
            "steps": [s.to_dict() for s in self.steps],
            "answer": self.answer,
            "totals": self.totals(),
            "trace": str(self.trace_path) if self.trace_path else None,
        }


def worker_pricing(wc: WorkerConfig, lookup: Callable[[str], list[float] | None]) -> Pricing:
    return Pricing(
        wc.model.removeprefix("litellm:"),
        local=wc.model.startswith("gguf:"),
        input_per_mtok=wc.input_cost_per_mtok,
        output_per_mtok=wc.output_cost_per_mtok,
        lookup=lookup,
    )


def conductor_pricing(config: Config, lookup: Callable[[str], list[float] | None]) -> Pricing:
    model = config.conductor.model
    return Pricing(
        model.removeprefix("litellm:"), local=not model.startswith("litellm:"), lookup=lookup
    )


class Choosers:
    """Trained heads loaded once and kept for many questions: an eval passes one to every
    `execute`, so a trained conductor's GGUF is not loaded again for each problem."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, ...], ShapeChooser] = {}
        self._lock = threading.Lock()  # eval threads may ask for the same head at once

    def get(self, key: tuple[str, ...], load: Callable[[], ShapeChooser]) -> ShapeChooser:
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = load()
            return self._loaded[key]

    def close(self) -> None:
        with self._lock:
            for chooser in self._loaded.values():
                chooser.close()
            self._loaded.clear()


class Runtime:
    """One run's resources: the model registry, the response cache and the call counter."""

    def __init__(
        self,
        config: Config,
        *,
        cache_mode: CacheMode = CacheMode.USE,
        catalog: Catalog | None = None,
        models: LlamaModels | None = None,
        budget: Budget | None = None,
        litellm: LiteLLMProcess | None = None,
        choosers: Choosers | None = None,
    ) -> None:
        self.config = config
        self.budget = budget
        c = config.conductor
        self.catalog = catalog or load_catalog()
        cache_mode = CacheMode(cache_mode)  # accept "use" / "refresh" / "off" from Python callers
        enabled = config.cache.enabled and cache_mode is not CacheMode.OFF
        self.cache_mode = cache_mode if enabled else CacheMode.OFF
        self.cache = ResponseCache(size_limit_mb=config.cache.size_limit_mb) if enabled else None
        self._own_models = models is None
        self.models = models or LlamaModels.for_settings(
            c,
            # Speed only, answers do not depend on it: kept even under --no-cache/--refresh.
            state_store=PrefixStateStore.default() if config.cache.enabled else None,
        )
        self.counter = CallCounter()
        # Started only if a worker or the conductor needs it; a caller running many questions
        # (eval) passes one in, so litellm's seconds-long import is paid once.
        self._own_litellm = litellm is None
        self.litellm = litellm or LiteLLMProcess()
        self._own_choosers = choosers is None
        self.choosers = choosers or Choosers()

    def _wrap(self, backend: Backend, label: str, pricing: Pricing) -> Backend:
        return CachedBackend(
            backend,
            self.cache,
            self.cache_mode,
            self.counter,
            label=label,
            pricing=pricing,
            budget=self.budget,
        )

    def pool(self) -> Pool:
        """Resolve every worker's model (checked, fetched if needed, not yet loaded)."""
        raw = build_pool(self.config, self.catalog, self.models, self.litellm)
        if uses_litellm(self.config):
            # Start litellm's helper process now: its seconds-long import runs on another core
            # while the conductor loads and plans, not in front of the first remote step.
            self.litellm.start()
        return Pool(
            tuple(
                Worker(
                    w.config,
                    self._wrap(w.backend, f"worker {w.name}", self._pricing(w.config)),
                    w.context_tokens,
                )
                for w in raw.workers
            )
        )

    def _pricing(self, wc: WorkerConfig) -> Pricing:
        return worker_pricing(wc, self.litellm.rates)

    def chooser(self) -> ShapeChooser | None:
        """The trained part of a trained conductor (conductor.model names one), else None."""
        from conductor_cli.train.registry import find

        trained = find(self.config.conductor.model)
        if trained is None or trained.method != "head":
            return None  # the LoRA methods' training lives in the adapter
        names = tuple(w.name for w in self.config.workers)

        def load() -> ShapeChooser:
            from conductor_cli.train.chooser import HeadChooser

            base = conductor_backend(self.config, self.catalog, self.models, self.litellm)
            assert isinstance(base, LlamaCppBackend)
            return HeadChooser.load(trained, base.path, names, self.config.conductor)

        return self.choosers.get((trained.name, str(trained.head_path), *names), load)

    def conductor(self) -> Backend:
        pricing = conductor_pricing(self.config, self.litellm.rates)
        backend = conductor_backend(self.config, self.catalog, self.models, self.litellm)
        return self._wrap(backend, "conductor", pricing)

    def close(self) -> None:
        if self._own_choosers:
            self.choosers.close()
        if self._own_litellm:
            self.litellm.close()
        if self._own_models:
            self.models.close()
        if self.cache is not None:
            self.cache.close()


def _check_workers(
    workflow: Workflow, pool: Pool, keep: Mapping[int, StepResult], *, recursion: bool
) -> None:
    known = {*pool.names, CONDUCTOR_WORKER} if recursion else set(pool.names)
    missing = sorted({s.worker for i, s in enumerate(workflow.steps) if i not in keep} - known)
    if missing:
        raise WorkflowError(
            f"the workflow uses workers not in the pool: {', '.join(missing)} "
            f"(pool: {', '.join(pool.names)}). Add them to the config or map them with "
            "--worker OLD=NEW."
        )


def execute(
    question: str,
    *,
    config: Config | None = None,
    attachments: Sequence[Attachment] = (),
    workflow: Workflow | None = None,
    keep: Mapping[int, StepResult] | None = None,
    on_event: Subscriber | None = None,
    cache_mode: CacheMode = CacheMode.USE,
    trace: bool = True,
    trace_dir: Path | None = None,
    trace_base: dict[str, Any] | None = None,
    trace_extra: dict[str, Any] | None = None,
    stream: bool = False,
    workflow_source: Source = "model",
    seed: int | None = None,
    max_cost: float | None = None,
    max_calls: int | None = None,
    catalog: Catalog | None = None,
    models: LlamaModels | None = None,
    litellm: LiteLLMProcess | None = None,
    choosers: Choosers | None = None,
) -> RunResult:
    """Run one question: plan with the conductor unless `workflow` is given, then run it.

    `keep` holds step results to reuse (resume, from-step); every event goes to `on_event`
    and to the trace file, which is rewritten after the plan and after every step.
    """
    if not question.strip():
        raise InputError('the question is empty; ask something, e.g. conductor ask "..."')
    config = config or Config()
    keep = keep or {}
    budget = Budget(max_cost=max_cost, max_calls=max_calls)
    runtime = Runtime(
        config,
        cache_mode=cache_mode,
        catalog=catalog,
        models=models,
        budget=budget,
        litellm=litellm,
        choosers=choosers,
    )
    start = time.monotonic()
    try:
        # Resolve (and fetch) every model before loading any: a bad config costs no load.
        pool = runtime.pool()
        conductor_for = _lazy(runtime.conductor)
        identity = conductor_for().identity if workflow is None else "(given workflow)"
        writer = None
        if trace:
            writer = TraceWriter(
                question=question,
                attachments=attachments,
                config=config,
                conductor_identity=identity,
                secrets=config_secrets(config),
                directory=trace_dir,
                extra=trace_extra,
                base=trace_base,
            )
        # The trace first: what is on disk matters more than what is on screen.
        emit = fan_out(writer, on_event)
        try:
            emit(RunStarted(question))
            plan = None
            c = config.conductor
            if workflow is None:
                plan = _plan(
                    conductor_for(),
                    config,
                    question,
                    attachments,
                    worker_infos(pool.workers, 0, c.max_depth),
                    emit,
                    runtime.chooser(),
                )
                workflow = plan.workflow
                if writer is not None:
                    writer.set_plan(_plan_record(plan))
            else:
                emit(PlanReady(workflow, 0.0, workflow_source))
            _check_workers(workflow, pool, keep, recursion=c.max_depth > 0)
            run_seed = c.seed if seed is None else seed
            engine = Engine(
                pool,
                emit,
                seed=run_seed,
                stream=stream,
                recurse=_recursion(
                    config, pool, conductor_for, question, attachments, run_seed, stream, depth=0
                ),
            )
            steps = engine.run(question, workflow, attachments, keep)
            result = RunResult(
                question,
                workflow,
                plan,
                tuple(steps),
                steps[-1].output,
                time.monotonic() - start,
                runtime.counter.model_calls,
                runtime.counter.cache_hits,
                writer.path if writer else None,
            )
            if writer is not None:
                writer.set_totals(result.totals())  # written with the RunFinished below
            emit(RunFinished(result.answer))
            return result
        except ConductorError as e:
            emit(RunFailed(str(e)))
            raise
        except BaseException as e:
            # Ctrl-C (maybe wrapped by Python, see is_interrupt) or a bug: the trace must not
            # stay "running". If even this write fails, the error that ended the run is the
            # one to report.
            ending = (
                RunFailed("interrupted", interrupted=True)
                if is_interrupt(e)
                else RunFailed(f"internal error: {type(e).__name__}: {e}")
            )
            with contextlib.suppress(Exception):
                emit(ending)
            raise
    finally:
        runtime.close()


T = TypeVar("T")


def _lazy(make: Callable[[], T]) -> Callable[[], T]:
    """Build on first call only (the conductor's model is resolved only if it is used)."""
    made: list[T] = []

    def get() -> T:
        if not made:
            made.append(make())
        return made[0]

    return get


class _Described(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...


def worker_infos(workers: Sequence[_Described], depth: int, max_depth: int) -> list[WorkerInfo]:
    """The pool as the conductor's planning prompt lists it (training uses the same)."""
    infos = [WorkerInfo(w.name, w.description) for w in workers]
    left = max_depth - depth
    if left > 0:
        times = "once more" if left == 1 else f"{left} more levels deep"
        infos.append(
            WorkerInfo(
                CONDUCTOR_WORKER,
                "you, the conductor, again: reads the outputs it sees, judges whether the team "
                f"failed, and writes a new corrective workflow (may be used {times})",
            )
        )
    return infos


def _plan(
    backend: Backend,
    config: Config,
    question: str,
    attachments: Sequence[Attachment],
    infos: Sequence[WorkerInfo],
    emit: Subscriber,
    chooser: ShapeChooser | None = None,
) -> Plan:
    c = config.conductor
    emit(PlanStarted(backend.identity))
    plan = Conductor(backend, temperature=c.temperature, seed=c.seed, chooser=chooser).plan(
        question, infos, attachments, c.max_steps
    )
    emit(
        PlanReady(
            plan.workflow,
            plan.seconds,
            "cache" if plan.cached else "model",
            plan.tokens_in,
            plan.tokens_out,
        )
    )
    return plan


def _recursion(
    config: Config,
    pool: Pool,
    conductor_for: Callable[[], Backend],
    question: str,
    attachments: Sequence[Attachment],
    seed: int,
    stream: bool,
    *,
    depth: int,
) -> Recurse | None:
    """How a step given to the conductor runs at this depth; None past the depth limit."""
    max_depth = config.conductor.max_depth
    if depth >= max_depth:
        return None

    def recurse(index: int, step: Step, outputs: Mapping[int, str], emit: Subscriber) -> NestedRun:
        # The nested conductor sees the question, its instruction, and the outputs it may see.
        seen = [Attachment(f"output of step {j}", text) for j, text in sorted(outputs.items())]
        sub_attachments = [*attachments, *seen]
        sub_question = f"{question}\n\nInstruction for this part of the work: {step.task}"
        emit(RunStarted(sub_question))
        plan = _plan(
            conductor_for(),
            config,
            sub_question,
            sub_attachments,
            worker_infos(pool.workers, depth + 1, max_depth),
            emit,
        )
        sub_seed = seed + 1000 * (index + 1)
        engine = Engine(
            pool,
            emit,
            seed=sub_seed,
            stream=stream,
            recurse=_recursion(
                config,
                pool,
                conductor_for,
                sub_question,
                sub_attachments,
                sub_seed,
                stream,
                depth=depth + 1,
            ),
        )
        steps = engine.run(sub_question, plan.workflow, sub_attachments)
        emit(RunFinished(steps[-1].output))
        costs = [s.cost for s in steps]
        return NestedRun(
            steps[-1].output,
            plan.tokens_in + sum(s.tokens_in for s in steps),
            plan.tokens_out + sum(s.tokens_out for s in steps),
            None if None in costs else sum(c or 0.0 for c in costs),
        )

    return recurse


def _plan_record(plan: Plan) -> dict[str, Any]:
    return {
        "reply": plan.reply,
        "messages": list(plan.messages),
        "attempts": plan.attempts,
        "repairs": list(plan.workflow.repairs),
        "tokens_in": plan.tokens_in,
        "tokens_out": plan.tokens_out,
        "seconds": round(plan.seconds, 3),
        "cached": plan.cached,
        "fallback": plan.fallback,
    }


def ask(question: str, **options: Any) -> RunResult:
    """Plan a workflow for `question` with the configured conductor and run it on the pool.

    Options are those of `execute`: config, attachments, on_event, cache_mode, trace, stream…
    """
    return execute(question, **options)


def run_workflow(workflow: Workflow, question: str, **options: Any) -> RunResult:
    """Run a given (hand-written or recorded) workflow on `question`, skipping the conductor."""
    return execute(question, workflow=workflow, **options)
