"""Runs a workflow: each step's worker gets the question, its task and the outputs it may see."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .backends.base import Request
from .errors import ConductorError
from .events import StepFailed, StepFinished, StepStarted, Subscriber
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
        }


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

    def run(
        self, question: str, workflow: Workflow, attachments: Sequence[Attachment]
    ) -> list[StepResult]:
        """Run the steps in order; a failed step ends the run with its error, naming the step."""
        outputs: list[str] = []
        results: list[StepResult] = []
        for i, step in enumerate(workflow.steps):
            worker = self.pool.get(step.worker)
            messages = step_messages(question, attachments, workflow, i, outputs, worker)
            self.emit(StepStarted(i, worker.name, step.task, messages))
            start = time.monotonic()
            try:
                done = worker.backend.complete(
                    Request(
                        messages=messages,
                        max_tokens=worker.config.max_tokens,
                        temperature=worker.config.temperature,
                        seed=self.seed + i + 1,
                    )
                )
            except ConductorError as e:
                self.emit(StepFailed(i, worker.name, str(e)))
                raise type(e)(f"step {i} ({worker.name}): {e}") from None
            seconds = time.monotonic() - start
            outputs.append(done.text)
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
            )
            results.append(result)
            self.emit(
                StepFinished(i, worker.name, done.text, done.tokens_in, done.tokens_out, seconds)
            )
        return results
