"""One run of a question on a pool, from first event to result: plan (unless a workflow is
given), run the steps, then the later rounds; every event through one sealed subscriber, the
trace told the plan and the totals, and a cancel flag checked between phases.

What the run is made of (pool, conductor, chooser, counter) and where its record goes come
from the caller (`api.execute` builds them from the runtime), so this layer loads nothing.
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
from conductor_cli.config.settings import CONDUCTOR_WORKER, NESTED_RETIRED, Config
from conductor_cli.errors import ConductorError, RunCancelled, WorkflowError, is_interrupt
from conductor_cli.run import template_slot
from conductor_cli.run.agent import AgentTurn
from conductor_cli.run.answer_form import as_asked
from conductor_cli.run.engine import Engine, StepResult
from conductor_cli.run.events import (
    PlanReady,
    PlanStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    Source,
    Subscriber,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import Conductor, Plan, ShapeChooser, WorkerInfo, worker_infos
from conductor_cli.run.pool import Pool
from conductor_cli.run.results import PriorRound, RunResult
from conductor_cli.run.rounds import LaterRounds
from conductor_cli.run.workflow import Workflow

T = TypeVar("T")


class Counts(Protocol):
    """Model calls made and answers the cache served, so far (storage.cache.CallCounter)."""

    model_calls: int
    cache_hits: int


class RunRecord(Protocol):
    """Where the run is recorded besides its events (storage.trace.TraceWriter)."""

    @property
    def path(self) -> Path | None: ...

    def set_plan(self, record: dict[str, Any]) -> None: ...

    def set_totals(self, totals: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class RunParts:
    """What one run uses, resolved before anything loads."""

    pool: Pool
    conductor: Callable[[], Backend]  # made on first use: a given workflow never loads it
    chooser: Callable[[], ShapeChooser | None]  # a trained conductor's, or None
    counts: Counts


@dataclass(frozen=True)
class RunControls:
    """How the run's steps behave, and the flag that ends it from another thread."""

    seed: int
    stream: bool = False
    cancel: threading.Event | None = None
    agent: AgentTurn | None = None  # an agent's turn: the answer may be its tool calls


def lazy(make: Callable[[], T]) -> Callable[[], T]:
    """Build on first call only (the conductor's model is resolved only if it is used)."""
    made: list[T] = []

    def get() -> T:
        if not made:
            made.append(make())
        return made[0]

    return get


def sealed(emit: Subscriber) -> Subscriber:
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


def check_workers(workflow: Workflow, pool: Pool, keep: Mapping[int, StepResult]) -> None:
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


def planner_for(
    backend: Backend,
    config: Config,
    chooser: ShapeChooser | None,
    cancel: threading.Event | None = None,
) -> Conductor:
    c = config.conductor
    return Conductor(
        backend,
        temperature=c.temperature,
        seed=c.seed,
        chooser=chooser,
        step_penalty=c.step_penalty,
        code_retries=c.code_retries,
        cancelled=cancel.is_set if cancel is not None else None,
    )


def plan_question(
    backend: Backend,
    config: Config,
    question: str,
    attachments: Sequence[Attachment],
    infos: Sequence[WorkerInfo],
    emit: Subscriber,
    chooser: ShapeChooser | None = None,
    cancel: threading.Event | None = None,
    *,
    tests: bool = True,
) -> Plan:
    emit(PlanStarted(backend.identity))
    conductor = planner_for(backend, config, chooser, cancel)
    plan = conductor.plan(question, infos, attachments, config.conductor.max_steps, tests=tests)
    source: Source = "cache" if plan.cached else "model"
    emit(PlanReady(plan.workflow, plan.seconds, source, plan.tokens_in, plan.tokens_out))
    return plan


def plan_record(plan: Plan) -> dict[str, Any]:
    """The plan as the trace keeps it."""
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


@dataclass
class Execution:
    """One question's run on `parts`, its events to `emit` (the trace first, then the view)."""

    config: Config
    parts: RunParts
    controls: RunControls
    emit: Subscriber
    record: RunRecord | None = None
    prior_rounds: tuple[PriorRound, ...] = ()
    started: float | None = None  # time.monotonic() when the caller began (resolving counts)

    def conduct(
        self,
        question: str,
        attachments: Sequence[Attachment],
        workflow: Workflow | None,
        keep: Mapping[int, StepResult],
        source: Source,
    ) -> RunResult:
        """Plan and run to the end, between the run's first and last events; a failure or
        Ctrl-C still ends the record (failed, interrupted)."""
        start = time.monotonic() if self.started is None else self.started
        emit = sealed(self.emit)
        try:
            emit(RunStarted(question))
            result = self._plan_and_run(question, attachments, workflow, keep, source, emit, start)
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

    def _plan_and_run(
        self,
        question: str,
        attachments: Sequence[Attachment],
        workflow: Workflow | None,
        keep: Mapping[int, StepResult],
        source: Source,
        emit: Subscriber,
        start: float,
    ) -> RunResult:
        parts, controls, c = self.parts, self.controls, self.config.conductor
        self.check_cancel()
        plan, chooser = None, None
        if workflow is None:
            chooser = parts.chooser()
            plan = plan_question(
                parts.conductor(),
                self.config,
                question,
                attachments,
                worker_infos(parts.pool.workers),
                emit,
                chooser,
                controls.cancel,
                tests=controls.agent is None,  # an agent's last step calls its tools
            )
            workflow = plan.workflow
            if self.record is not None:
                self.record.set_plan(plan_record(plan))
        else:
            emit(PlanReady(workflow, 0.0, source))
        check_workers(workflow, parts.pool, keep)
        self.check_cancel()
        engine = Engine(
            parts.pool,
            emit,
            seed=controls.seed,
            stream=controls.stream,
            cancel=controls.cancel,
            agent=controls.agent,
        )
        steps = engine.run_steps(question, workflow, attachments, keep)
        answer, rounds = template_slot.answer(question, steps, parts.pool), []
        notes: list[str] = list(chooser.notes) if chooser is not None else []
        # A given workflow (`conductor run`) has no rounds; a trace's (replay, resume) do.
        rounds_on = plan is not None or source == "trace"
        if rounds_on and c.max_rounds > 1 and controls.agent is None:
            later = LaterRounds(
                self.config,
                parts.pool,
                lambda: planner_for(
                    parts.conductor(), self.config, parts.chooser(), controls.cancel
                ),
                lambda: parts.conductor().identity,
                self.prior_rounds,
                controls.seed,
                controls.stream,
                self.check_cancel,
                controls.cancel,
            )
            answer = later.play(question, attachments, workflow, answer, emit, rounds, notes)
        # An agent's turn may answer with tool calls: its text is not shaped.
        if controls.agent is None:
            answer = as_asked(question, answer)
        result = RunResult(
            question,
            workflow,
            plan,
            tuple(steps),
            answer,
            time.monotonic() - start,
            parts.counts.model_calls,
            parts.counts.cache_hits,
            self.record.path if self.record is not None else None,
            tuple(rounds),
            tuple(notes),
        )
        if self.record is not None:
            self.record.set_totals(result.totals())  # written with the RunFinished after
        return result

    def check_cancel(self) -> None:
        if self.controls.cancel is not None and self.controls.cancel.is_set():
            raise RunCancelled
