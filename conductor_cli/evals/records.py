"""The two records an evaluation passes around: a problem to answer (conductor_cli/problems.py,
where public sets build them too) and one strategy's result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conductor_cli.problems import Problem

__all__ = ["Problem", "Result"]


@dataclass(frozen=True)
class Result:
    """One (strategy, problem) outcome, stored as one JSON line."""

    strategy: str
    problem_id: str
    category: str | None
    correct: bool
    answer: str  # what was extracted from the reply (letter, number, code, text)
    reply: str  # the raw final reply
    tokens_in: int
    tokens_out: int
    cost: float | None  # None: the price is unknown
    model_calls: int
    seconds: float
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)  # strategy-specific (trace id, votes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "problem_id": self.problem_id,
            "category": self.category,
            "correct": self.correct,
            "answer": self.answer,
            "reply": self.reply,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost": self.cost,
            "model_calls": self.model_calls,
            "seconds": self.seconds,
            "error": self.error,
            "detail": dict(self.detail),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        """Rebuild a stored result. Raises KeyError for a missing key and TypeError or
        ValueError for a wrong type, so a damaged results file is never half-read. Unknown
        keys are ignored: a newer conductor may store more."""
        if not isinstance(d, dict):
            raise TypeError(f"a result must be a JSON object, got {type(d).__name__}")
        detail = d.get("detail", {})
        if not isinstance(detail, dict):
            raise TypeError(f"'detail' must be an object, got {type(detail).__name__}")
        cost = d["cost"]
        return cls(
            strategy=_typed(d, "strategy", str),
            problem_id=_typed(d, "problem_id", str),
            category=_optional_str(d, "category"),
            correct=_typed(d, "correct", bool),
            answer=_typed(d, "answer", str),
            reply=_typed(d, "reply", str),
            tokens_in=_count(d, "tokens_in"),
            tokens_out=_count(d, "tokens_out"),
            cost=None if cost is None else _number(d, "cost"),
            model_calls=_count(d, "model_calls"),
            seconds=_number(d, "seconds"),
            error=_optional_str(d, "error") if "error" in d else None,
            detail=dict(detail),
        )


def _typed(d: dict[str, Any], key: str, kind: type) -> Any:
    value = d[key]
    # bool is an int in Python; a count of True must not slip through, nor 1 as a verdict.
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise TypeError(f"{key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def _optional_str(d: dict[str, Any], key: str) -> str | None:
    value = d[key]
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key!r} must be a string or null, got {type(value).__name__}")
    return value


def _count(d: dict[str, Any], key: str) -> int:
    value = _typed(d, key, int)
    if value < 0:
        raise ValueError(f"{key!r} must not be negative, got {value}")
    return int(value)


def _number(d: dict[str, Any], key: str) -> float:
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key!r} must be a number, got {type(value).__name__}")
    if value < 0 or value != value:
        raise ValueError(f"{key!r} must be a non-negative number, got {value}")
    return float(value)
