"""The plan -> run path: pool, planning, workflow, engine, events, budget, inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conductor_cli.exports import lazy_exports

# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "NestedEvent": "events",
    "PlanReady": "events",
    "PlanStarted": "events",
    "RoundEvent": "events",
    "Source": "events",
    "StepFailed": "events",
    "StepFinished": "events",
    "StepRetry": "events",
    "StepSkipped": "events",
    "StepStarted": "events",
    "Subscriber": "events",
    "event_from_dict": "events",
    "read_file": "inputs",
    "read_stdin": "inputs",
    "cut_notes": "pool",
    "RunState": "state",
    "StepState": "state",
    "parse_workflow": "workflow",
}
__all__ = [
    "NestedEvent",
    "PlanReady",
    "PlanStarted",
    "RoundEvent",
    "RunState",
    "Source",
    "StepFailed",
    "StepFinished",
    "StepRetry",
    "StepSkipped",
    "StepStarted",
    "StepState",
    "Subscriber",
    "cut_notes",
    "event_from_dict",
    "parse_workflow",
    "read_file",
    "read_stdin",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.run.events import (
        NestedEvent,
        PlanReady,
        PlanStarted,
        RoundEvent,
        Source,
        StepFailed,
        StepFinished,
        StepRetry,
        StepSkipped,
        StepStarted,
        Subscriber,
        event_from_dict,
    )
    from conductor_cli.run.inputs import (
        read_file,
        read_stdin,
    )
    from conductor_cli.run.pool import (
        cut_notes,
    )
    from conductor_cli.run.state import (
        RunState,
        StepState,
    )
    from conductor_cli.run.workflow import (
        parse_workflow,
    )
