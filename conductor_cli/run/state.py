"""One typed state of a run, folded from its events: what the trace writes and the views draw.

`RunState.apply` is the only fold of a run's events. The trace file (`storage/trace.py`) is
written from this state and the live tree (`cli/view.py`) is drawn from it, so what a run
records is decided once, here. The fold is pure (no clock, no I/O) and forgiving: an event
that makes no sense in the current state (an unknown step, a late report) is ignored or
applied as it comes, never an error, because replayed traces are data from disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from conductor_cli.run.events import (
    NestedEvent,
    PlanReady,
    PlanStarted,
    RoundEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    Source,
    StepFailed,
    StepFinished,
    StepRetry,
    StepSkipped,
    StepStarted,
    StepToken,
)
from conductor_cli.run.workflow import Workflow

RunStatus = Literal["running", "done", "failed", "interrupted"]
PlanStatus = Literal["waiting", "planning", "planned", "failed"]
# "stopped": still running when the run failed (the trace calls it failed, as it always has);
# "interrupted": still running when the run was interrupted.
StepStatus = Literal[
    "pending", "running", "retrying", "done", "failed", "skipped", "interrupted", "stopped"
]

# Streamed output is only ever shown by its end, so a long generation need not be kept whole
# until StepFinished brings the full text.
TAIL_KEEP = 2000


@dataclass
class StepState:
    """One step of the workflow: as planned, then as it ran."""

    index: int
    worker: str  # as planned; a fallback is `fallback`, the worker now at work `current_worker`
    task: str
    sees: tuple[int, ...] = ()
    status: StepStatus = "pending"
    current_worker: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None  # None: never started
    started_at: float | None = None
    # When it failed or was cut off, for the time it ran (a finished step has `seconds`).
    ended_at: float | None = None
    tail: str = ""  # the end of the output streamed by the current try
    # Set by StepFinished; `source` None means the step never finished.
    output: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None  # None: the price is unknown, not zero
    seconds: float | None = None
    source: Source | None = None
    finish: str | None = None  # set by StepFinished: "stop", "length" or "loop"
    confinement: str | None = None  # set by StepFinished for a tool that ran a program
    tool_calls: tuple[dict[str, str], ...] | None = None  # set by StepFinished: an agent's
    error: str | None = None  # of the failure or skip that ended it; None once it finished
    retries: int = 0  # tries again on the same worker (a fallback is not counted)
    last_error: str | None = None  # None: never retried
    fallback: str | None = None
    nested: RunState | None = None  # the workflow the conductor wrote as this step

    @property
    def live(self) -> bool:
        return self.status in ("running", "retrying")

    def elapsed(self, now: float) -> float | None:
        """Seconds it has run by `now` while live, else the time it took; None if unknown."""
        if self.live:
            return _since(self.started_at, now)
        if self.status == "done":
            return self.seconds
        if self.ended_at is not None:
            return _since(self.started_at, self.ended_at)
        return None


@dataclass
class RunState:
    """A run (or a nested run inside a step) as its events have told it so far."""

    question: str | None = None
    status: RunStatus = "running"
    conductor: str = ""
    planning: PlanStatus = "waiting"
    plan_started: float | None = None
    plan_seconds: float | None = None
    plan_source: Source | None = None
    plan_tokens_in: int = 0
    plan_tokens_out: int = 0
    workflow: Workflow | None = None
    steps: list[StepState] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None
    finished_at: float | None = None
    # The time of the latest event: a recorded run is drawn as of its end, not as of today.
    last_at: float | None = None
    # Rounds 2, 3, ... (the conductor re-planning after reading the answer); rounds[0] is
    # round 2. Round 1 is this state's own plan and steps.
    rounds: list[RunState] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return self.status == "interrupted"

    @property
    def kept(self) -> bool:
        """A later round whose conductor kept the answer (its workflow has no steps)."""
        return self.workflow is not None and not self.workflow.steps

    def apply(self, event: Any) -> bool:
        """Fold one event in; returns whether it settled something (a plan, a step, the run).

        That is when a trace is worth rewriting: streamed text and starts are not.
        """
        at = getattr(event, "at", None)
        if isinstance(at, int | float) and not isinstance(at, bool):
            self.last_at = at if self.last_at is None else max(self.last_at, at)
        match event:
            case RoundEvent():
                if event.round < 2 or event.round > len(self.rounds) + 2:
                    return False  # out of order: not from a run this fold can follow
                if event.round == len(self.rounds) + 2:
                    self.rounds.append(RunState())
                return self.rounds[event.round - 2].apply(event.event)
            case NestedEvent():
                if step := self._step(event.step):
                    if step.nested is None:
                        step.nested = RunState()
                    return step.nested.apply(event.event)
            case RunStarted():
                # A resumed run (or round) starts again where an interrupted one ended.
                self.question, self.status, self.error = event.question, "running", None
            case PlanStarted():
                self.conductor, self.planning, self.plan_started = (
                    event.conductor,
                    "planning",
                    event.at,
                )
            case PlanReady():
                self.planning = "planned"
                self.plan_seconds, self.plan_source = event.seconds, event.source
                self.plan_tokens_in, self.plan_tokens_out = event.tokens_in, event.tokens_out
                self.workflow = event.workflow
                self.steps = [
                    StepState(i, s.worker, s.task, tuple(s.sees))
                    for i, s in enumerate(event.workflow.steps)
                ]
                return True
            case StepStarted():
                if step := self._step(event.index):
                    step.status, step.current_worker = "running", event.worker
                    step.messages = tuple(event.messages)
                    step.started_at, step.ended_at, step.tail = event.at, None, ""
            case StepToken():
                step = self._step(event.index)
                # Tokens arriving after the step ended (a late thread) must not touch it.
                if step and step.live:
                    step.tail = (step.tail + event.text)[-TAIL_KEEP:]
            case StepFinished():
                if step := self._step(event.index):
                    step.status, step.current_worker = "done", event.worker
                    step.output, step.source, step.error = event.output, event.source, None
                    step.tokens_in, step.tokens_out = event.tokens_in, event.tokens_out
                    step.cost, step.seconds = event.cost, event.seconds
                    step.finish = event.finish
                    step.confinement = event.confinement
                    step.tool_calls = event.tool_calls
                    return True
            case StepFailed():
                if step := self._step(event.index):
                    step.status, step.error, step.ended_at = "failed", event.error, event.at
                    return True
            case StepRetry():
                if step := self._step(event.index):
                    # The next try streams its output afresh.
                    step.status, step.current_worker, step.tail = "retrying", event.worker, ""
                    step.last_error = event.error
                    if event.fallback:
                        step.fallback = event.worker
                    else:
                        step.retries += 1
            case StepSkipped():
                if step := self._step(event.index):
                    step.status, step.error = "skipped", event.reason
                    return True
            case RunFinished():
                self.status, self.answer, self.finished_at = "done", event.answer, event.at
                return True
            case RunFailed():
                self._fail(event)
                return True
        return False

    def _fail(self, event: RunFailed) -> None:
        self.status = "interrupted" if event.interrupted else "failed"
        self.error, self.finished_at = event.error, event.at
        if self.planning == "planning":
            self.planning = "failed"
        # Steps cut off by the failure would otherwise stay running for ever, on screen and
        # in the file; so would the nested runs they were waiting for.
        for step in self.steps:
            if step.live:
                step.status = "interrupted" if event.interrupted else "stopped"
                step.ended_at = event.at
            if step.nested is not None and step.nested.status == "running":
                step.nested._fail(event)
        for later in self.rounds:
            if later.status == "running":
                later._fail(event)

    def _step(self, index: int) -> StepState | None:
        return self.steps[index] if 0 <= index < len(self.steps) else None


def _since(start: float | None, end: float) -> float | None:
    return None if start is None else max(0.0, end - start)
