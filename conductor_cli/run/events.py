"""What happens during a run, as records that views and traces subscribe to.

The engine and the conductor only emit; the live view, the plain progress lines and the trace
writer only listen. A replay feeds recorded events to the same subscribers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from conductor_cli.errors import WorkflowError
from conductor_cli.run.workflow import Workflow

# Where an output came from: a real model call, the response cache, or a recorded trace.
# "kept": a step told to repair code whose tests all passed keeps it, with no call.
Source = Literal["model", "cache", "trace", "kept"]


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class RunStarted:
    question: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class PlanStarted:
    conductor: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class PlanReady:
    workflow: Workflow
    seconds: float
    source: Source = "model"
    tokens_in: int = 0
    tokens_out: int = 0
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepStarted:
    index: int
    worker: str
    task: str
    # An agent's conversation (run/agent.py) also holds tool calls and null contents.
    messages: tuple[dict[str, Any], ...]
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepToken:
    """A piece of a step's output as it streams (only emitted when someone watches live)."""

    index: int
    text: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepFinished:
    index: int
    worker: str
    output: str
    tokens_in: int
    tokens_out: int
    seconds: float
    source: Source = "model"
    cost: float | None = None
    # Why generation ended: "stop" (done), "length" (cut at max_tokens), "loop" (stopped
    # repeating itself, one copy kept); None in traces written before it was recorded.
    finish: str | None = None
    # A tool that ran a program: the confinements it ran under; None for models.
    confinement: str | None = None
    # The agent's tools the worker called ({"id", "name", "arguments"}); None: it called none.
    tool_calls: tuple[dict[str, str], ...] | None = None
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepFailed:
    index: int
    worker: str
    error: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepRetry:
    """A retryable failure: the step tries again after `delay` seconds, or on `worker`
    (the fallback) when `fallback` is set."""

    index: int
    worker: str
    attempt: int
    error: str
    delay: float
    fallback: bool = False
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepSkipped:
    """Not run, because a step it sees failed or the run stopped."""

    index: int
    worker: str
    reason: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunFinished:
    answer: str
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunFailed:
    error: str
    interrupted: bool = False
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class NestedEvent:
    """An event of the nested workflow that the conductor wrote as step `step`: the retired
    nested conductor step (rounds replaced it). Traces written with it still load, show and
    replay from the record, so the event still reads back.

    Nesting deeper wraps again, so a subscriber can follow the tree to any depth.
    """

    step: int
    event: Any
    at: float = field(default_factory=_now)


@dataclass(frozen=True)
class RoundEvent:
    """An event of round `round` (2, 3, ...): the conductor re-planning after reading its
    team's answer, and the corrective workflow's run. Round 1's events are not wrapped, so a
    one-round run (and every older trace) reads as it always has. An empty PlanReady in a round
    means the conductor kept the answer; the round's RunFinished carries the answer after it."""

    round: int
    event: Any
    at: float = field(default_factory=_now)


Event = (
    RunStarted
    | PlanStarted
    | PlanReady
    | StepStarted
    | StepToken
    | StepFinished
    | StepFailed
    | StepRetry
    | StepSkipped
    | RunFinished
    | RunFailed
    | NestedEvent
    | RoundEvent
)
Subscriber = Callable[[Any], None]


def innermost(event: Any) -> Any:
    """The event inside any NestedEvent / RoundEvent wrappers."""
    while isinstance(event, NestedEvent | RoundEvent):
        event = event.event
    return event


def fan_out(*subscribers: Subscriber | None) -> Subscriber:
    """One callback that hands each event to every subscriber in turn."""
    active = [s for s in subscribers if s is not None]

    def emit(event: Any) -> None:
        for s in active:
            s(event)

    return emit


_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        RunStarted,
        PlanStarted,
        PlanReady,
        StepStarted,
        StepToken,
        StepFinished,
        StepFailed,
        StepRetry,
        StepSkipped,
        RunFinished,
        RunFailed,
        NestedEvent,
        RoundEvent,
    )
}


# Fields added after traces were first written: left out while unset, so that the events of a
# run without them are written as before (a reader takes the field's default).
_WRITTEN_WHEN_SET = frozenset({"confinement", "tool_calls"})


def event_to_dict(event: Any, *, with_messages: bool = False) -> dict[str, Any]:
    """A JSON-able record of an event; prompt messages are left out unless asked for."""
    out: dict[str, Any] = {"type": type(event).__name__}
    for name in event.__dataclass_fields__:
        value = getattr(event, name)
        if name == "messages" and not with_messages:
            continue
        if name in _WRITTEN_WHEN_SET and value is None:
            continue
        if isinstance(value, Workflow):
            value = value.to_dict()
        elif name == "event" and isinstance(event, NestedEvent | RoundEvent):
            value = event_to_dict(value, with_messages=with_messages)
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def event_from_dict(record: dict[str, Any]) -> Any:
    """Rebuild an event recorded by `event_to_dict` (for replay and `traces show`)."""
    from conductor_cli.run.workflow import validate_steps

    if not isinstance(record, dict):
        raise ValueError(f"an event must be an object, got {type(record).__name__}")
    cls = _TYPES.get(str(record.get("type", "")))
    if cls is None:
        raise ValueError(f"unknown event type {record.get('type')!r}")
    kwargs = {k: v for k, v in record.items() if k != "type" and k in cls.__dataclass_fields__}
    for name, value in kwargs.items():
        kind = cls.__dataclass_fields__[name].type
        if not _CHECKS.get(str(kind), _anything)(value):
            raise ValueError(f"{cls.__name__}.{name} is {value!r}, expected {kind}")
    if cls is PlanReady:
        # A trace is data from disk: its workflow is validated as a conductor's would be.
        workflow = kwargs.get("workflow")
        raw_steps = workflow.get("steps") if isinstance(workflow, dict) else None
        if not isinstance(raw_steps, list):
            raise ValueError("PlanReady.workflow has no steps list")
        workers = sorted({str(s.get("worker")) for s in raw_steps if isinstance(s, dict)})
        try:
            kwargs["workflow"] = validate_steps(
                raw_steps, workers, max(len(raw_steps), 1), allow_empty=True
            )
        except WorkflowError as e:
            raise ValueError(f"PlanReady.workflow: {e}") from None
    if cls is StepStarted:
        kwargs["messages"] = tuple(kwargs.get("messages", ()))
    if cls is NestedEvent or cls is RoundEvent:
        kwargs["event"] = event_from_dict(kwargs.get("event"))
    return cls(**kwargs)


def _anything(value: Any) -> bool:
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# Field annotations (strings: the module uses postponed annotations) and their checks.
_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: _is_int(v) and v >= 0,
    "float": _is_number,
    "bool": lambda v: isinstance(v, bool),
    "float | None": lambda v: v is None or _is_number(v),
    "str | None": lambda v: v is None or isinstance(v, str),
    "Source": lambda v: v in ("model", "cache", "trace", "kept"),
    "tuple[dict[str, str], ...]": lambda v: (
        isinstance(v, list | tuple)
        and all(isinstance(m, dict) and all(isinstance(x, str) for x in m.values()) for m in v)
    ),
    "tuple[dict[str, Any], ...]": lambda v: (
        isinstance(v, list | tuple) and all(isinstance(m, dict) for m in v)
    ),
    "tuple[dict[str, str], ...] | None": lambda v: (
        v is None
        or (
            isinstance(v, list | tuple)
            and all(isinstance(m, dict) and all(isinstance(x, str) for x in m.values()) for m in v)
        )
    ),
}
