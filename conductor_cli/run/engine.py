"""Runs a workflow: each step's worker gets the question, its task and the outputs it may see
(in the messages run/messages.py writes)."""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conductor_cli import waiting
from conductor_cli.backends.base import Completion, Request, ToolCall, calls_tools
from conductor_cli.errors import (
    BudgetError,
    ConductorError,
    ConfigError,
    RunCancelled,
    WorkerError,
)
from conductor_cli.run.agent import AgentTurn, agent_messages
from conductor_cli.run.events import (
    Source,
    StepFailed,
    StepFinished,
    StepRetry,
    StepSkipped,
    StepStarted,
    StepToken,
    Subscriber,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.messages import feeds_python, programs_run, restates, step_messages
from conductor_cli.run.pool import Pool, Worker
from conductor_cli.run.workflow import Workflow
from conductor_cli.tools import examples
from conductor_cli.tools.examples import REPAIR, RETRY, TEST


@dataclass(frozen=True)
class StepResult:
    index: int
    worker: str
    task: str
    sees: tuple[int, ...]
    messages: tuple[dict[str, Any], ...]
    output: str
    tokens_in: int
    tokens_out: int
    seconds: float
    source: Source = "model"
    cost: float | None = None
    finish: str = "stop"  # the backend's finish_reason: "stop", "length" or "loop"
    confinement: str | None = None  # a tool's sandbox, as Completion.confinement
    tool_calls: tuple[ToolCall, ...] = ()  # the agent's tools the worker called
    offered_tools: bool = False  # an agent's tools were offered to this step's worker

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "index": self.index,
                "worker": self.worker,
                "task": self.task,
                "sees": list(self.sees),
                "messages": list(self.messages),
                "output": self.output,
                "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out,
                "seconds": round(self.seconds, 3),
                "source": self.source,
                "cost": self.cost,
                "finish_reason": self.finish,
            }
            | ({"confinement": self.confinement} if self.confinement else {})
            | ({"tool_calls": [c.to_dict() for c in self.tool_calls]} if self.tool_calls else {})
        )

    def finished(self) -> StepFinished:
        """The event that announces this result."""
        return StepFinished(
            self.index,
            self.worker,
            self.output,
            self.tokens_in,
            self.tokens_out,
            self.seconds,
            self.source,
            self.cost,
            self.finish,
            self.confinement,
            tuple(c.to_dict() for c in self.tool_calls) or None,
        )

    @classmethod
    def from_trace(cls, record: dict[str, Any]) -> StepResult:
        return cls(
            index=int(record["index"]),
            worker=str(record["worker"]),
            task=str(record["task"]),
            sees=tuple(record.get("sees", ())),
            messages=tuple(record.get("messages", ())),
            output=str(record.get("output", "")),
            tokens_in=int(record.get("tokens_in", 0)),
            tokens_out=int(record.get("tokens_out", 0)),
            seconds=float(record.get("seconds", 0.0)),
            source="trace",
            cost=record.get("cost"),
            finish=str(record.get("finish_reason") or "stop"),
            confinement=record.get("confinement"),
            tool_calls=tuple(ToolCall.from_dict(c) for c in record.get("tool_calls") or ()),
        )


@dataclass
class Engine:
    """Runs the workflow as a DAG: a step starts as soon as every step it sees is done.

    Each step runs in its own daemon thread (so Ctrl-C never waits for a model call), bounded
    by its worker's max_concurrency; local GGUF workers sharing one model are serialised by
    that model's lock. Results keep the workflow's order.
    """

    pool: Pool
    emit: Subscriber
    seed: int = 0
    stream: bool = False  # emit StepToken events as outputs arrive (for a live view)
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    cancel: threading.Event | None = None  # set by a server when the run's client left
    # An agent's tools and conversation: the last step's worker gets them if it calls tools.
    agent: AgentTurn | None = None

    def run_steps(
        self,
        question: str,
        workflow: Workflow,
        attachments: Sequence[Attachment],
        done: Mapping[int, StepResult] | None = None,
    ) -> list[StepResult]:
        """Run every step not in `done` (kept as recorded); raise if any step failed.

        A failed step's dependents are skipped with a reason; independent steps still run.
        """
        lock = threading.Lock()
        outer = self.emit

        def emit(event: Any) -> None:
            with lock:  # subscribers see one event at a time, whatever thread sends it
                outer(event)

        results: dict[int, StepResult] = {}
        for i, kept in sorted((done or {}).items()):
            emit(StepStarted(i, kept.worker, kept.task, kept.messages))
            emit(kept.finished())
            results[i] = kept
        errors: dict[int, ConductorError] = {}
        skipped: dict[int, str] = {}
        pending = [i for i in range(len(workflow.steps)) if i not in results]
        running: set[int] = set()
        finished: queue.Queue[tuple[int, StepResult | BaseException]] = queue.Queue()
        limits = {
            w.name: threading.BoundedSemaphore(w.config.max_concurrency) for w in self.pool.workers
        }
        stop: str | None = None

        def work(i: int) -> None:
            try:
                outcome: StepResult | BaseException = self._run_step(
                    question, workflow, i, attachments, results, emit, limits
                )
            except BaseException as e:  # handed to the main thread, which decides
                outcome = e
            finished.put((i, outcome))

        while pending or running:
            for i in list(pending):
                step = workflow.steps[i]
                failed_dep = next((j for j in step.sees if j in errors or j in skipped), None)
                if stop is not None or failed_dep is not None:
                    reason = stop or f"step {failed_dep} did not finish"
                    pending.remove(i)
                    skipped[i] = reason
                    emit(StepSkipped(i, step.worker, reason))
                elif all(j in results for j in step.sees):
                    pending.remove(i)
                    running.add(i)
                    threading.Thread(target=work, args=(i,), daemon=True).start()
            if not running:
                break
            i, outcome = waiting.get(finished, self._check_cancel)
            running.discard(i)
            if isinstance(outcome, StepResult):
                results[i] = outcome
            elif isinstance(outcome, ConductorError):
                errors[i] = outcome
                if isinstance(outcome, BudgetError):
                    stop = "the budget was reached"
            else:
                raise outcome
        if errors:
            first = min(errors)
            worker = workflow.steps[first].worker
            others = len(errors) - 1
            more = f" ({others} more step{'s' if others > 1 else ''} failed)" if others else ""
            if skipped:
                more += f" ({len(skipped)} step{'s' if len(skipped) > 1 else ''} skipped)"
            error = errors[first]
            raise type(error)(f"step {first} ({worker}): {error}{more}") from None
        return [results[i] for i in range(len(workflow.steps))]

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise RunCancelled

    def _run_step(
        self,
        question: str,
        workflow: Workflow,
        i: int,
        attachments: Sequence[Attachment],
        results: Mapping[int, StepResult],
        emit: Subscriber,
        limits: Mapping[str, threading.BoundedSemaphore],
    ) -> StepResult:
        step = workflow.steps[i]
        outputs = {j: results[j].output for j in step.sees}
        worker = self.pool.get(step.worker)
        kept = self._kept(workflow, i, results)
        if kept is not None:
            return self._keep(question, attachments, workflow, i, outputs, worker, kept, emit)
        with limits[worker.name]:
            python = feeds_python(workflow, i, self.pool)

            def prepared(worker: Worker) -> tuple[tuple[dict[str, Any], ...], bool]:
                answers = self.agent is not None and i == len(workflow.steps) - 1
                if answers and self.agent is not None and calls_tools(worker.backend):
                    team = [(results[j].task, outputs[j]) for j in step.sees]
                    task = None if restates(step.task, question) else step.task
                    return agent_messages(self.agent, team, task), True
                # The code pipeline's repair and retry keep the layout they were measured
                # with (a retry must not see its own failed code).
                own = {} if step.task in (REPAIR, RETRY) else {
                    j: results[j].messages
                    for j in step.sees
                    if results[j].worker == worker.name and not results[j].offered_tools
                    and results[j].source != "kept"
                }  # fmt: skip
                messages = step_messages(
                    question, attachments, workflow, i, outputs, worker, for_python=python,
                    programs=programs_run(workflow, i, self.pool), own=own,
                )  # fmt: skip
                return messages, False

            messages, tools = prepared(worker)
            emit(StepStarted(i, worker.name, step.task, messages))
            start = time.monotonic()
            try:
                done = self._call(i, worker, messages, emit, tools, program=python)
            except (WorkerError, ConfigError) as e:
                fallback = worker.config.fallback
                if fallback is None or fallback not in self.pool.names:
                    emit(StepFailed(i, worker.name, str(e)))
                    raise
                emit(StepRetry(i, fallback, 1, str(e), 0.0, fallback=True))
                worker = self.pool.get(fallback)
                messages, tools = prepared(worker)
                try:
                    done = self._call(i, worker, messages, emit, tools, program=python)
                except ConductorError as e2:
                    emit(StepFailed(i, worker.name, str(e2)))
                    raise type(e2)(f"{e}; fallback {worker.name}: {e2}") from None
            except ConductorError as e:
                emit(StepFailed(i, worker.name, str(e)))
                raise
        seconds = time.monotonic() - start
        source: Source = "cache" if done.cached else "model"
        result = StepResult(
            i,
            worker.name,
            step.task,
            step.sees,
            messages,
            done.text,
            done.tokens_in,
            done.tokens_out,
            seconds,
            source,
            done.cost,
            done.finish_reason,
            done.confinement,
            done.tool_calls,
            tools,
        )
        emit(result.finished())
        return result

    def _kept(self, workflow: Workflow, i: int, results: Mapping[int, StepResult]) -> str | None:
        """What a step gives without a call, where a call could only repeat or break it:

        - a repair or retry step that sees a test step whose code passed every example the
          question shows (or which found none) keeps that code; a repair step also sees the
          code it keeps, a retry step is shown only the test (tools/examples.RETRY);
        - a retry step whose tested step wrote no code keeps that answer: words, where code
          was not what was asked ("what does this print?" beside a doctest line);
        - a test step of a retry step that kept the code tested before gives that test's
          report again (the same code, the same examples)."""
        step = workflow.steps[i]
        if step.task == TEST:
            return self._retested(workflow, step.sees, results)
        if step.task not in (REPAIR, RETRY):
            return None
        for k in step.sees:
            tester = workflow.steps[k]
            if tester.task != TEST:
                continue
            report = results[k].output
            no_code = step.task == RETRY and report.strip() == examples.NO_CODE
            if not (no_code or examples.nothing_to_repair(report)):
                continue
            writers = [j for j in tester.sees if step.task == RETRY or j in step.sees]
            if writers:
                return results[writers[-1]].output
        return None

    def _retested(
        self, workflow: Workflow, sees: tuple[int, ...], results: Mapping[int, StepResult]
    ) -> str | None:
        if len(sees) != 1 or results[sees[0]].source != "kept":
            return None
        retry = workflow.steps[sees[0]]
        earlier = [k for k in retry.sees if workflow.steps[k].task == TEST]
        if retry.task != RETRY or not earlier:
            return None
        return results[earlier[-1]].output

    def _keep(
        self,
        question: str,
        attachments: Sequence[Attachment],
        workflow: Workflow,
        i: int,
        outputs: Mapping[int, str],
        worker: Worker,
        kept: str,
        emit: Subscriber,
    ) -> StepResult:
        step = workflow.steps[i]
        messages = step_messages(question, attachments, workflow, i, outputs, worker)
        emit(StepStarted(i, worker.name, step.task, messages))
        result = StepResult(
            i, worker.name, step.task, step.sees, messages, kept, 0, 0, 0.0, source="kept",
            cost=0.0,
        )  # fmt: skip
        emit(result.finished())
        return result

    def _call(
        self,
        i: int,
        worker: Worker,
        messages: tuple[dict[str, Any], ...],
        emit: Subscriber,
        tools: bool = False,
        program: bool = False,
    ) -> Completion:
        """One worker's answer, retrying retryable failures with exponential backoff + jitter.
        `program`: the python tool runs what it writes (a local model stops after the program)."""
        tool = worker.config.spec.tool
        agent = self.agent if tools else None
        request = Request(
            messages=messages,
            max_tokens=worker.config.max_tokens,
            # A tool is deterministic: cached by its input alone, never by a seed.
            temperature=0.0 if tool else worker.config.temperature,
            seed=0 if tool else self.seed + i + 1,
            stop_loops=worker.config.stop_loops and worker.config.spec.local,
            stop_after_program=program and worker.config.spec.local and not tools,
            tools=agent.tools_json if agent is not None else None,
            tool_choice=agent.tool_choice_json if agent is not None else None,
            cancelled=self.cancel.is_set if self.cancel is not None else None,
        )

        def on_text(piece: str) -> None:
            self._check_cancel()  # a cancelled run stops generating at the next token
            if self.stream and piece:
                emit(StepToken(i, piece))

        # A run that can be cancelled (a server's, whose client may leave) streams every step,
        # shown or not: a generation is abandoned between two tokens, not at max_tokens.
        sink = on_text if self.stream or self.cancel is not None else None
        tries = worker.config.retries + 1
        for attempt in range(1, tries + 1):
            try:
                return worker.backend.complete(request, sink)
            except WorkerError as e:
                if not e.retryable or attempt == tries:
                    raise
                delay = min(30.0, 0.5 * 2 ** (attempt - 1)) * (1 + 0.25 * self.rng.random())
                emit(StepRetry(i, worker.name, attempt + 1, str(e), round(delay, 3)))
                self.sleep(delay)
        raise AssertionError("unreachable")
