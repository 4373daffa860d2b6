"""The library entry points: `ask` (plan, then run) and `run_workflow` (run a given workflow),
with their options and results.

Data flows one way: config -> pool -> conductor plan -> workflow -> engine -> events, and the
events go to the caller's subscriber (a view) and to the trace writer. The run itself is
`run/execution`; here the runtime gives it its parts and the trace its record.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conductor_cli.config.settings import Config
from conductor_cli.errors import InputError
from conductor_cli.run.agent import AgentTurn
from conductor_cli.run.budget import Budget
from conductor_cli.run.engine import StepResult
from conductor_cli.run.events import Source, Subscriber, fan_out
from conductor_cli.run.execution import Execution, RunControls, RunParts, lazy, plan_question
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.results import PriorRound, RoundResult, RunResult
from conductor_cli.run.workflow import Workflow
from conductor_cli.runtime import Runtime, runtime_for
from conductor_cli.storage.cache import CacheMode
from conductor_cli.storage.trace import TraceWriter, config_secrets

if TYPE_CHECKING:
    from conductor_cli.wire import RunRequest

__all__ = [
    "NO_TRACE",
    "PriorRound",
    "RoundResult",
    "RunOptions",
    "RunResult",
    "TraceOptions",
    "ask",
    "execute",
    "execute_request",
    "plan_question",
    "run_workflow",
]


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
        return run.compose(question, attachments, workflow, keep or {}, workflow_source)


@dataclass
class _Run:
    """One run's composition: the runtime's pool, conductor and chooser for this config, a
    trace writer, then `run/execution` runs it."""

    root: Runtime
    config: Config
    options: RunOptions
    trace: TraceOptions
    on_event: Subscriber | None
    prior_rounds: tuple[PriorRound, ...] = ()

    def compose(
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
        conductor_for = lazy(lambda: root.conductor(scope, config))
        identity = conductor_for().identity if workflow is None else "(given workflow)"
        writer = self._writer(question, attachments, identity)
        seed = config.conductor.seed if options.seed is None else options.seed
        run = Execution(
            config,
            RunParts(pool, conductor_for, lambda: root.chooser(config), scope.counter),
            RunControls(seed, options.stream, options.cancel, options.agent),
            # The trace first: what is on disk matters more than what is on screen.
            fan_out(writer, self.on_event),
            writer,
            self.prior_rounds,
            started=start,
        )
        return run.conduct(question, attachments, workflow, keep, workflow_source)

    def _writer(
        self, question: str, attachments: Sequence[Attachment], identity: str
    ) -> TraceWriter | None:
        if not self.trace.enabled:
            return None
        return TraceWriter(
            question=question,
            attachments=attachments,
            config=self.config,
            conductor_identity=identity,
            secrets=config_secrets(self.config),
            directory=self.trace.directory,
            extra=self.trace.extra,
            base=self.trace.base,
        )


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


def execute_request(
    request: RunRequest,
    *,
    config: Config,
    runtime: Runtime | None = None,
    on_event: Subscriber | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """A run as a `RunRequest` (conductor_cli.wire) says it, on `config` with the request's
    overrides applied: the one road of `conductor ask`/`run`/`replay --live`, in this process
    and on a server alike (a server gives its warm `runtime` and a `cancel` its client's
    hang-up sets)."""
    from conductor_cli.config import MAX_STEPS_LIMIT, apply_overrides
    from conductor_cli.run.workflow import parse_workflow

    config = apply_overrides(config, request.overrides)

    def parsed(raw: dict[str, Any], allow_empty: bool = False) -> Workflow:
        # Its form checked here; a worker the pool lacks is said by the run, with the way out
        # (--worker OLD=NEW: run/execution.check_workers).
        steps = raw.get("steps") if isinstance(raw.get("steps"), list) else []
        named = {s.get("worker") for s in steps if isinstance(s, dict)}
        names = [w.name for w in config.workers]
        names += sorted(n for n in named if isinstance(n, str) and n not in names)
        return parse_workflow(json.dumps(raw), names, MAX_STEPS_LIMIT, allow_empty=allow_empty)

    options = RunOptions(
        CacheMode(request.cache_mode),
        stream=request.stream,
        max_cost=request.max_cost,
        max_calls=request.max_calls,
        cancel=cancel,
    )
    source: Source = "trace" if request.source == "trace" else "model"
    return execute(
        request.question,
        config=config,
        attachments=[Attachment(name, text) for name, text in request.attachments],
        workflow=None if request.workflow is None else parsed(request.workflow),
        on_event=on_event,
        options=options,
        trace=TraceOptions(extra={"replay_of": request.replay_of} if request.replay_of else None),
        workflow_source=source,
        runtime=runtime,
        prior_rounds=[PriorRound(parsed(r, allow_empty=True)) for r in request.rounds],
    )
