"""What a run returns (`RunResult`, one `RoundResult` per later round) and what a trace hands
a run again (`PriorRound`): plain records, written to the trace and read by every caller."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conductor_cli.backends.base import ToolCall
from conductor_cli.run.engine import StepResult
from conductor_cli.run.planner import Plan
from conductor_cli.run.workflow import Workflow


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


@dataclass(frozen=True)
class PriorRound:
    """A later round as a trace recorded it, for replay and resume: its workflow (None: it
    stopped while re-planning, so it plans again; no steps: it kept the answer) and the steps
    of it that finished (kept as they are)."""

    workflow: Workflow | None
    keep: Mapping[int, StepResult] = field(default_factory=dict)
