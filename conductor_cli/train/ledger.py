"""A budget that holds across processes: `--max-calls` and `--max-cost` for a training run by
several processes at once (`accelerate launch`, train/trl_engine.py). Every process reserves
its calls in one ledger file under the training's work folder, under an exclusive lock, so the
sum of all processes' calls never crosses the limit, and a resumed training starts from what
the ledger says was spent."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from conductor_cli.disk.atomic import atomic_write
from conductor_cli.disk.locks import exclusive
from conductor_cli.errors import BudgetError
from conductor_cli.run.budget import Budget
from conductor_cli.train.spend import SPENT

# The head method's spent file (spend.read_spent reads it): the same calls and dollars, with
# the calls of each process beside them.
LEDGER = SPENT


@dataclass
class SharedBudget(Budget):
    """Budget whose counts live in `ledger` (JSON: calls, dollars): `calls` and `spent` on
    the object are this process's share, the limits apply to the file's totals."""

    ledger: Path | None = None
    process: int = 0  # this process's index among the training's processes

    def reserve(self, what: str, estimate: float | None) -> None:
        if what in self.exempt or self.ledger is None:
            return
        with _locked(self.ledger) as totals:
            calls, dollars = totals[0], totals[1]
            if self.max_calls is not None and calls + 1 > self.max_calls:
                raise BudgetError(
                    f"{what}: stopped before model call {calls + 1} of this training (all its "
                    f"processes together): --max-calls {self.max_calls} reached. Raise it and "
                    "add --resume to go on."
                )
            if self.max_cost is not None and dollars + (estimate or 0.0) > self.max_cost:
                raise BudgetError(
                    f"{what}: stopped before a call that could cost ${estimate:.4f} on top of "
                    f"${dollars:.4f} spent by this training: --max-cost {self.max_cost} would "
                    "be crossed."
                )
            totals[0] = calls + 1
            totals[2][str(self.process)] = totals[2].get(str(self.process), 0) + 1
        self.calls += 1

    def settle(self, cost: float | None) -> None:
        if self.ledger is None or not cost:
            return
        with _locked(self.ledger) as totals:
            totals[1] += cost
        self.spent += cost


def read_totals(ledger: Path) -> tuple[int, float, dict[str, int]]:
    """(calls, dollars) every process of the training has spent so far, and the calls of each
    process (by its index)."""
    with _locked(ledger) as totals:
        return int(totals[0]), float(totals[1]), dict(totals[2])


@contextlib.contextmanager
def _locked(ledger: Path) -> Iterator[list]:
    """[calls, dollars, calls by process] read under an exclusive lock, written back
    (atomically) on the way out: a process killed mid-write leaves the old file, never half a
    new one."""
    with exclusive(ledger.with_suffix(".lock")):
        try:
            data = json.loads(ledger.read_text(encoding="utf-8"))
            by = {str(k): int(v) for k, v in data.get("by_process", {}).items()}
            totals = [int(data["calls"]), float(data["dollars"]), by]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            totals = [0, 0.0, {}]
        before = json.dumps(totals)
        yield totals
        if json.dumps(totals) != before:
            doc = {"calls": totals[0], "dollars": totals[1], "by_process": totals[2]}
            atomic_write(ledger, json.dumps(doc).encode("utf-8"))
