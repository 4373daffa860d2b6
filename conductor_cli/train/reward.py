"""The reward of one workflow run, as in the paper: 1 if the final answer is right, 0.5 if the
workflow parsed but the answer is wrong, 0 if it did not parse; minus `cost_weight` times the
run's cost (dollars where workers have prices, else thousands of tokens)."""

from __future__ import annotations

RIGHT = 1.0
PARSED = 0.5
UNPARSED = 0.0


def run_cost(dollars: float | None, tokens: int) -> float:
    """Dollars when the run cost any, else thousands of tokens (free local models)."""
    if dollars:
        return dollars
    return tokens / 1000.0


def reward(*, parsed: bool, correct: bool, cost: float = 0.0, cost_weight: float = 0.0) -> float:
    if not parsed:
        return UNPARSED
    return (RIGHT if correct else PARSED) - cost_weight * cost
