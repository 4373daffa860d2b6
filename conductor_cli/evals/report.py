"""Summaries of an evaluation: accuracy with its confidence interval, tokens, cost and time per
strategy, as a terminal table, plain or markdown text, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conductor_cli.disk.atomic import atomic_write
from conductor_cli.evals.records import Result

if TYPE_CHECKING:
    from rich.table import Table

Z_95 = 1.959964
COLUMNS = (
    "strategy",
    "n",
    "accuracy %",
    "95% CI",
    "tokens mean",
    "tokens total",
    "cost $",
    "calls",
    "wall s",
)
_NUMERIC_COLUMNS = frozenset(COLUMNS[1:])


def wilson(correct: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for `correct` successes in `n` trials (95% by default).
    Unlike p ± z·se it stays inside [0, 1] and is not empty at 0 or n successes."""
    if not 0 <= correct <= n:
        raise ValueError(f"correct must be between 0 and n, got {correct} of {n}")
    if n == 0:
        return 0.0, 1.0
    p = correct / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # At 0 or n successes the bound is exactly 0 or 1; rounding must not put it past.
    low = 0.0 if correct == 0 else max(0.0, centre - half)
    high = 1.0 if correct == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Summary:
    strategy: str
    n: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    tokens_total: int
    tokens_mean: float
    cost: float | None  # None when any result's price is unknown
    model_calls: int
    seconds_total: float
    seconds_mean: float
    errors: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "n": self.n,
            "correct": self.correct,
            "accuracy": self.accuracy,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "tokens_total": self.tokens_total,
            "tokens_mean": self.tokens_mean,
            "cost": self.cost,
            "model_calls": self.model_calls,
            "seconds_total": self.seconds_total,
            "seconds_mean": self.seconds_mean,
            "errors": self.errors,
        }


def summarize(results: Sequence[Result], order: Sequence[str]) -> list[Summary]:
    """One summary per strategy: those in `order` first (even with no results), then any
    others in the order they appear. A problem answered twice by a strategy (a resumed run
    that retried it) counts once, with its last result."""
    latest: dict[str, dict[str, Result]] = {name: {} for name in order}
    for r in results:
        latest.setdefault(r.strategy, {})[r.problem_id] = r
    return [_summary(name, list(by_problem.values())) for name, by_problem in latest.items()]


def _summary(strategy: str, results: Sequence[Result]) -> Summary:
    n = len(results)
    correct = sum(r.correct for r in results)
    low, high = wilson(correct, n)
    tokens = sum(r.tokens_in + r.tokens_out for r in results)
    seconds = sum(r.seconds for r in results)
    costs = [r.cost for r in results]
    return Summary(
        strategy=strategy,
        n=n,
        correct=correct,
        accuracy=correct / n if n else 0.0,
        ci_low=low,
        ci_high=high,
        tokens_total=tokens,
        tokens_mean=tokens / n if n else 0.0,
        cost=None if None in costs else sum(c for c in costs if c is not None),
        model_calls=sum(r.model_calls for r in results),
        seconds_total=seconds,
        seconds_mean=seconds / n if n else 0.0,
        errors=sum(r.error is not None for r in results),
    )


def _cost_cell(cost: float | None) -> str:
    if cost is None:
        return "?"
    if cost == 0:
        return "0"  # local models
    return "<0.0001" if cost < 0.0001 else f"{cost:.4f}"


def _cells(s: Summary) -> list[str]:
    return [
        s.strategy,
        str(s.n),
        f"{100 * s.accuracy:.1f}",
        f"{100 * s.ci_low:.1f}-{100 * s.ci_high:.1f}",
        f"{s.tokens_mean:.0f}",
        str(s.tokens_total),
        _cost_cell(s.cost),
        str(s.model_calls),
        f"{s.seconds_total:.1f}",
    ]


_SHORT = ("strategy", "n", "acc %", "95% CI", "tok/q", "tokens", "cost $", "calls", "wall s")


def table(summaries: Sequence[Summary]) -> Table:
    """The summaries as a rich table for the terminal."""
    from rich import box
    from rich.table import Table

    # Short headers and no vertical rules: the table fits an 80-column terminal whole.
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column, short in zip(COLUMNS, _SHORT, strict=True):
        t.add_column(short, justify="right" if column in _NUMERIC_COLUMNS else "left")
    for s in summaries:
        t.add_row(*_cells(s))
    return t


def plain_table(summaries: Sequence[Summary]) -> str:
    """Tab-separated lines under a header, for piped output (cut, awk, sort)."""
    lines = ["\t".join(COLUMNS)]
    # A tab or newline in a strategy name would shift every later column.
    lines += ["\t".join(" ".join(c.split()) for c in _cells(s)) for s in summaries]
    return "\n".join(lines) + "\n"


def markdown_table(summaries: Sequence[Summary]) -> str:
    """A GitHub markdown table, numbers right-aligned."""
    align = ["---:" if c in _NUMERIC_COLUMNS else "---" for c in COLUMNS]
    lines = [_md_row(list(COLUMNS)), _md_row(align)]
    lines += [_md_row(_cells(s)) for s in summaries]
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def write_json(
    path: Path, summaries: Sequence[Summary], meta: dict[str, Any], results: Sequence[Result] = ()
) -> None:
    """The summaries, and each problem's outcome per strategy (derived ones included), so
    that two strategies can be compared question by question (a paired test)."""
    outcomes: dict[str, dict[str, bool]] = {}
    for r in results:
        outcomes.setdefault(r.strategy, {})[r.problem_id] = r.correct
    data = {
        "meta": meta,
        "strategies": [s.to_dict() for s in summaries],
        "correct": outcomes,
    }
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    atomic_write(path, text.encode("utf-8"), mode=0o644)


def write_csv(path: Path, summaries: Sequence[Summary]) -> None:
    """One row per strategy under the to_dict keys; an unknown cost is an empty cell."""
    buffer = io.StringIO()
    fields = list(Summary.__dataclass_fields__)
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for s in summaries:
        writer.writerow({k: "" if v is None else v for k, v in s.to_dict().items()})
    atomic_write(path, buffer.getvalue().encode("utf-8"), mode=0o644)
