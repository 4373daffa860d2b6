"""What happens during a run, as records that views and traces subscribe to."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .workflow import Workflow


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class PlanStarted:
    conductor: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class PlanReady:
    workflow: Workflow
    seconds: float
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepStarted:
    index: int
    worker: str
    task: str
    messages: tuple[dict[str, str], ...]
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepFinished:
    index: int
    worker: str
    output: str
    tokens_in: int
    tokens_out: int
    seconds: float
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepFailed:
    index: int
    worker: str
    error: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunFinished:
    answer: str
    at: float = field(default_factory=_now)


Event = PlanStarted | PlanReady | StepStarted | StepFinished | StepFailed | RunFinished
Subscriber = Callable[[Any], None]


def fan_out(*subscribers: Subscriber | None) -> Subscriber:
    """One callback that hands each event to every subscriber in turn."""
    active = [s for s in subscribers if s is not None]

    def emit(event: Any) -> None:
        for s in active:
            s(event)

    return emit
