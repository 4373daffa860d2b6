"""The library entry points: `ask` (plan, then run) and `run_workflow` (run a given workflow).

Data flows one way: config -> pool -> conductor plan -> workflow -> engine -> events, and the
events go to the caller's subscriber (a view) and to the trace writer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from conductor_cli.backends.base import Backend, ToolCall
from conductor_cli.config.settings import CONDUCTOR_WORKER, NESTED_RETIRED, Config
from conductor_cli.errors import (
    ConductorError,
    InputError,
    RunCancelled,
    WorkflowError,
    is_interrupt,
)
from conductor_cli.run.agent import AgentTurn
from conductor_cli.run.budget import Budget
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
    fan_out,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import Conductor, Plan, ShapeChooser, WorkerInfo, worker_infos
from conductor_cli.run.pool import Pool
from conductor_cli.run.workflow import Workflow
from conductor_cli.runtime import Runtime, runtime_for
from conductor_cli.storage.cache import CacheMode
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
    rounds: tuple[RoundResult, ...] = ()  # rounds 2, 3, ... (re-planning), if any ran
    notes: tuple[str, ...] = ()  # what the user should know: a round that could not run

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The agent's tools the answering step called (RunOptions.agent), for the client."""
        return self.steps[-1].tool_calls if self.steps and not self.rounds else ()

    def totals(self) -> dict[str, Any]:
        plans = [p for p in (self.plan, *(r.plan for r in self.rounds)) if p is not None]
        steps = [*self.steps, *(s for r in self.rounds for s in r.steps)]
        costs = [s.cost for s in steps]
        return {
            "seconds": round(self.seconds, 3),
            "model_calls": self.model_calls,
            "cache_hits": self.cache_hits,
            "tokens_in": sum(p.tokens_in for p in plans) + sum(s.tokens_in for s in steps),
            "tokens_out": sum(p.tokens_out for p in plans) + sum(s.tokens_out for s in steps),
            "cost": None if None in costs else round(sum(c or 0.0 for c in costs), 6),
            "rounds": 1 + len(self.rounds),
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
            **({"rounds": [r.to_dict() for r in self.rounds]} if self.rounds else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
        }


@dataclass(frozen=True)
class RoundResult:
    """A later round: the conductor's re-plan, and the corrective workflow's steps (none when
    it kept the answer or the round failed)."""

    number: int
    plan: Plan | None  # None: the workflow came from a trace (replay, resume), or none came
    steps: tuple[StepResult, ...]
    answer: str  # the run's answer after this round
    decision: str  # "kept", "corrected" or "failed"
    workflow: Workflow | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.number,
            "decision": self.decision,
            "workflow": self.workflow.to_dict() if self.workflow else None,
            "steps": [s.to_dict() for s in self.steps],
            "answer": self.answer,
        }


def _check_workers(workflow: Workflow, pool: Pool, keep: Mapping[int, StepResult]) -> None:
    known = set(pool.names)
    missing = sorted({s.worker for i, s in enumerate(workflow.steps) if i not in keep} - known)
    if CONDUCTOR_WORKER in missing:  # a trace from before rounds
        i = next(i for i, s in enumerate(workflow.steps) if s.worker == CONDUCTOR_WORKER)
        raise WorkflowError(
            f"step {i} is given to 'conductor': {NESTED_RETIRED}. Run it with a worker: "
            f"--worker conductor=NAME (pool: {', '.join(pool.names)})."
        )
    if missing:
        raise WorkflowError(
            f"the workflow uses workers not in the pool: {', '.join(missing)} "
            f"(pool: {', '.join(pool.names)}). Add them to the config or map them with "
            "--worker OLD=NEW."
        )


@dataclass(frozen=True)
class PriorRound:
    """A later round as a trace recorded it, for replay and resume: its workflow (None: it
    stopped while re-planning, so it plans again; no steps: it kept the answer) and the steps
    of it that finished (kept as they are)."""

    workflow: Workflow | None
    keep: Mapping[int, StepResult] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOptions:
    """How one run behaves: its use of the cache, streaming, seed and limits."""

    cache_mode: CacheMode = CacheMode.USE
    stream: bool = False  # steps report their text as it is generated (StepOutput events)
    seed: int | None = None  # None: the config's conductor.seed
    max_cost: float | None = None  # USD; the run stops before a call that would pass it
    max_calls: int | None = None  # model calls, the conductor's included
    # A budget shared by many runs (training): counted across them, and it wins over the two
    # limits above.
    budget: Budget | None = None
    # Set from another thread to end the run as interrupted (a server's client went away).
    cancel: threading.Event | None = None
    # An agent's turn (its tools and conversation): the answering step's worker may call the
    # tools, and its calls are then the run's answer (RunResult.tool_calls) for the client to
    # run. Such a run has one round: the client acts before anyone reads the answer again.
    agent: AgentTurn | None = None


@dataclass(frozen=True)
class TraceOptions:
    """Whether and where the run's trace is written."""

    enabled: bool = True
    directory: Path | None = None  # None: DATA_DIR/traces
    base: dict[str, Any] | None = None  # the trace a resumed run continues
    extra: dict[str, Any] | None = None  # more top-level fields (an eval's annotation)


NO_TRACE = TraceOptions(enabled=False)


def execute(
    question: str,
    *,
    config: Config | None = None,
    attachments: Sequence[Attachment] = (),
    workflow: Workflow | None = None,
    keep: Mapping[int, StepResult] | None = None,
    on_event: Subscriber | None = None,
    options: RunOptions = RunOptions(),
    trace: TraceOptions = TraceOptions(),
    workflow_source: Source = "model",
    runtime: Runtime | None = None,
    prior_rounds: Sequence[PriorRound] = (),
) -> RunResult:
    """Run one question: plan with the conductor unless `workflow` is given, then run it.

    `keep` holds step results to reuse (resume, from-step); `prior_rounds` are a trace's
    later rounds (2, 3, ...) to run again with their recorded workflows, up to
    `conductor.max_rounds`, instead of re-planning them; every event goes to `on_event`
    and to the trace file, which is rewritten after the plan and after every step. Models,
    the litellm helper and the cache come from `runtime` (a fresh one when None).
    """
    if not question.strip():
        raise InputError('the question is empty; ask something, e.g. conductor ask "..."')
    config = config or (runtime.config if runtime is not None else Config())
    with runtime_for(config, runtime) as root:
        # The one visible download step (first use of a catalog model), before any pool.
        c = config.conductor
        replans = workflow_source == "trace" and c.max_rounds > 1
        root.pull_missing(config, conductor=workflow is None or replans)
        run = _Run(root, config, options, trace, on_event, tuple(prior_rounds))
        return run.execute(question, attachments, workflow, keep or {}, workflow_source)


@dataclass
class _Run:
    root: Runtime
    config: Config
    options: RunOptions
    trace: TraceOptions
    on_event: Subscriber | None
    prior_rounds: tuple[PriorRound, ...] = ()

    def execute(
        self,
        question: str,
        attachments: Sequence[Attachment],
        workflow: Workflow | None,
        keep: Mapping[int, StepResult],
        workflow_source: Source,
    ) -> RunResult:
        root, config, options = self.root, self.config, self.options
        budget = options.budget or Budget(max_cost=options.max_cost, max_calls=options.max_calls)
        scope = root.scope(options.cache_mode, budget)
        start = time.monotonic()
        # Resolve every model before loading any: a bad config costs no load.
        pool = root.pool(scope, config)
        conductor_for = _lazy(lambda: root.conductor(scope, config))
        identity = conductor_for().identity if workflow is None else "(given workflow)"
        writer = None
        if self.trace.enabled:
            writer = TraceWriter(
                question=question,
                attachments=attachments,
                config=config,
                conductor_identity=identity,
                secrets=config_secrets(config),
                directory=self.trace.directory,
                extra=self.trace.extra,
                base=self.trace.base,
            )
        # The trace first: what is on disk matters more than what is on screen.
        emit = _sealed(fan_out(writer, self.on_event))
        try:
            emit(RunStarted(question))
            plan = None
            c = config.conductor
            self._check_cancel()
            chooser = None
            if workflow is None:
                chooser = root.chooser(config)
                plan = plan_question(
                    conductor_for(),
                    config,
                    question,
                    attachments,
                    worker_infos(pool.workers),
                    emit,
                    chooser,
                )
                workflow = plan.workflow
                if writer is not None:
                    writer.set_plan(_plan_record(plan))
            else:
                emit(PlanReady(workflow, 0.0, workflow_source))
            _check_workers(workflow, pool, keep)
            self._check_cancel()
            run_seed = c.seed if options.seed is None else options.seed
            engine = Engine(
                pool,
                emit,
                seed=run_seed,
                stream=options.stream,
                cancel=options.cancel,
                agent=options.agent,
            )
            steps = engine.run(question, workflow, attachments, keep)
            answer, rounds = steps[-1].output, []
            notes: list[str] = list(chooser.notes) if chooser is not None else []
            # A given workflow (`conductor run`) has no rounds; a trace's (replay, resume) do.
            rounds_on = plan is not None or workflow_source == "trace"
            if rounds_on and c.max_rounds > 1 and options.agent is None:
                answer = self._later_rounds(
                    question, attachments, pool, conductor_for, workflow, answer, run_seed,
                    emit, rounds, notes,
                )  # fmt: skip
            result = RunResult(
                question,
                workflow,
                plan,
                tuple(steps),
                answer,
                time.monotonic() - start,
                scope.counter.model_calls,
                scope.counter.cache_hits,
                writer.path if writer else None,
                tuple(rounds),
                tuple(notes),
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

    def _check_cancel(self) -> None:
        if self.options.cancel is not None and self.options.cancel.is_set():
            raise RunCancelled

    def _later_rounds(
        self,
        question: str,
        attachments: Sequence[Attachment],
        pool: Pool,
        conductor_for: Callable[[], Backend],
        workflow: Workflow,
        answer: str,
        seed: int,
        emit: Subscriber,
        rounds: list[RoundResult],
        notes: list[str],
    ) -> str:
        """Rounds 2..max_rounds: the conductor reads its workflow and the team's answer, then
        keeps the answer (an empty workflow: no more rounds) or writes a corrective workflow,
        whose steps see that answer. A round that cannot run (an invalid re-plan twice, the
        budget, a failed step) leaves the answer so far standing, with a note."""
        c = self.config.conductor
        infos = worker_infos(pool.workers)

        def make_planner() -> Conductor:
            chooser = self.root.chooser(self.config)  # a head trained with --rounds decides
            backend = conductor_for()
            return Conductor(
                backend,
                temperature=c.temperature,
                seed=c.seed,
                chooser=chooser,
                step_penalty=c.step_penalty,
            )

        # Made on the first re-plan: a replayed round runs its recorded workflow.
        planner = _lazy(make_planner)

        for k in range(2, c.max_rounds + 1):
            self._check_cancel()

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
                    in_round(PlanStarted(conductor_for().identity))
                    plan = planner().replan(
                        question, infos, attachments, c.max_steps, workflow, answer
                    )
                    chosen = plan.workflow
                    source: Source = "cache" if plan.cached else "model"
                    in_round(
                        PlanReady(chosen, plan.seconds, source, plan.tokens_in, plan.tokens_out)
                    )
                if not chosen.steps:
                    in_round(RunFinished(answer))
                    rounds.append(RoundResult(k, plan, (), answer, "kept", chosen))
                    break
                self._check_cancel()
                seen = Attachment(f"answer of round {k - 1}", answer)
                engine = Engine(
                    pool,
                    in_round,
                    seed=seed,
                    stream=self.options.stream,
                    cancel=self.options.cancel,
                )
                keep = prior.keep if prior is not None else {}
                steps = engine.run(question, chosen, [*attachments, seen], keep)
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


T = TypeVar("T")


def _sealed(emit: Subscriber) -> Subscriber:
    """Hand the run's events on one at a time, and drop what a step's thread still reports
    after the run ended (a cancelled run's steps may finish later): the trace keeps the run as
    it ended. One at a time across threads: the main thread's ending, written while a step's
    thread was still writing its StepFinished, was overwritten by that older text (a trace
    left "running" after Ctrl-C). Reentrant: Ctrl-C inside a write still writes the ending."""
    ended = threading.Event()
    lock = threading.RLock()

    def send(event: Any) -> None:
        with lock:
            if ended.is_set():
                return
            emit(event)
            # Only once handed on: Ctrl-C inside the write of RunFinished must let the
            # RunFailed that follows it through.
            if isinstance(event, RunFinished | RunFailed):
                ended.set()

    return send


def _lazy(make: Callable[[], T]) -> Callable[[], T]:
    """Build on first call only (the conductor's model is resolved only if it is used)."""
    made: list[T] = []

    def get() -> T:
        if not made:
            made.append(make())
        return made[0]

    return get


def plan_question(
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
    conductor = Conductor(
        backend,
        temperature=c.temperature,
        seed=c.seed,
        chooser=chooser,
        step_penalty=c.step_penalty,
    )
    plan = conductor.plan(question, infos, attachments, c.max_steps)
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


def ask(
    question: str,
    *,
    config: Config | None = None,
    attachments: Sequence[Attachment] = (),
    on_event: Subscriber | None = None,
    options: RunOptions = RunOptions(),
    trace: TraceOptions = TraceOptions(),
    runtime: Runtime | None = None,
) -> RunResult:
    """Plan a workflow for `question` with the configured conductor and run it on the pool."""
    return execute(
        question,
        config=config,
        attachments=attachments,
        on_event=on_event,
        options=options,
        trace=trace,
        runtime=runtime,
    )


def run_workflow(
    workflow: Workflow,
    question: str,
    *,
    config: Config | None = None,
    attachments: Sequence[Attachment] = (),
    keep: Mapping[int, StepResult] | None = None,
    on_event: Subscriber | None = None,
    options: RunOptions = RunOptions(),
    trace: TraceOptions = TraceOptions(),
    source: Source = "model",
    runtime: Runtime | None = None,
) -> RunResult:
    """Run a given (hand-written or recorded) workflow on `question`, skipping the conductor."""
    return execute(
        question,
        config=config,
        attachments=attachments,
        workflow=workflow,
        keep=keep,
        on_event=on_event,
        options=options,
        trace=trace,
        workflow_source=source,
        runtime=runtime,
    )
