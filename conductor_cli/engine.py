"""Runs a workflow: each step's worker gets the question, its task and the outputs it may see."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .backends.base import Request
from .errors import ConductorError
from .events import Source, StepFailed, StepFinished, StepStarted, StepToken, Subscriber
from .inputs import Attachment
from .pool import Pool, Worker
from .workflow import Workflow


@dataclass(frozen=True)
class StepResult:
    index: int
    worker: str
    task: str
    sees: tuple[int, ...]
    messages: tuple[dict[str, str], ...]
    output: str
    tokens_in: int
    tokens_out: int
    seconds: float
    source: Source = "model"
    cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
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
        }

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
        )


def worker_system_prompt(worker: Worker) -> str:
    about = f" {worker.description}." if worker.description else ""
    return (
        f"You are {worker.name}, one worker in a team of AI models.{about} "
        "Do your task and reply with its result only."
    )


def step_messages(
    question: str,
    attachments: Sequence[Attachment],
    workflow: Workflow,
    index: int,
    outputs: Sequence[str],
    worker: Worker,
) -> tuple[dict[str, str], ...]:
    step = workflow.steps[index]
    parts = [f"Question: {question}"]
    for a in attachments:
        parts.append(f"Attached {a.name}:\n```\n{a.text.rstrip()}\n```")
    for j in step.sees:
        earlier = workflow.steps[j]
        parts.append(
            f"Output of step {j} ({earlier.worker}: {earlier.task}):\n{outputs[j].strip()}"
        )
    parts.append(f"Your task: {step.task}")
    return (
        {"role": "system", "content": worker_system_prompt(worker)},
        {"role": "user", "content": "\n\n".join(parts)},
    )


@dataclass
class Engine:
    pool: Pool
    emit: Subscriber
    seed: int = 0
    stream: bool = False  # emit StepToken events as outputs arrive (for a live view)

    def run(
        self,
        question: str,
        workflow: Workflow,
        attachments: Sequence[Attachment],
        done: Mapping[int, StepResult] | None = None,
    ) -> list[StepResult]:
        """Run the steps in order; steps in `done` are kept as recorded, not run again.

        A failed step ends the run with its error, naming the step.
        """
        done = done or {}
        outputs: list[str] = []
        results: list[StepResult] = []
        for i in range(len(workflow.steps)):
            if i in done:
                kept = done[i]
                self.emit(StepStarted(i, kept.worker, kept.task, kept.messages))
                self.emit(
                    StepFinished(
                        i,
                        kept.worker,
                        kept.output,
                        kept.tokens_in,
                        kept.tokens_out,
                        kept.seconds,
                        "trace",
                        kept.cost,
                    )
                )
                outputs.append(kept.output)
                results.append(kept)
                continue
            results.append(self._run_step(question, workflow, i, attachments, outputs))
            outputs.append(results[-1].output)
        return results

    def _run_step(
        self,
        question: str,
        workflow: Workflow,
        i: int,
        attachments: Sequence[Attachment],
        outputs: Sequence[str],
    ) -> StepResult:
        step = workflow.steps[i]
        worker = self.pool.get(step.worker)
        messages = step_messages(question, attachments, workflow, i, outputs, worker)
        self.emit(StepStarted(i, worker.name, step.task, messages))
        start = time.monotonic()

        def on_text(piece: str) -> None:
            self.emit(StepToken(i, piece))

        try:
            done = worker.backend.complete(
                Request(
                    messages=messages,
                    max_tokens=worker.config.max_tokens,
                    temperature=worker.config.temperature,
                    seed=self.seed + i + 1,
                ),
                on_text if self.stream else None,
            )
        except ConductorError as e:
            self.emit(StepFailed(i, worker.name, str(e)))
            raise type(e)(f"step {i} ({worker.name}): {e}") from None
        seconds = time.monotonic() - start
        source: Source = "cache" if done.cached else "model"
        cost = 0.0 if worker.config.model.startswith("gguf:") else None
        self.emit(
            StepFinished(
                i, worker.name, done.text, done.tokens_in, done.tokens_out, seconds, source, cost
            )
        )
        return StepResult(
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
            cost,
        )
