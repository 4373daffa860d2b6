"""Prices and budgets: what a call costs, and stopping before a call would cross a limit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from conductor_cli.errors import BudgetError


@dataclass(frozen=True)
class Pricing:
    """USD for a call's tokens; None where the price is unknown.

    Local GGUF models are free; configured per-million-token prices win; otherwise `lookup`
    (litellm's price list, asked in its helper process) gives USD per input and output token,
    or None for models it does not know, such as local aliases.
    """

    model: str
    local: bool = False
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    lookup: Callable[[str], list[float] | None] | None = None

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        if self.local:
            return 0.0
        if self.input_per_mtok is not None or self.output_per_mtok is not None:
            return (
                tokens_in * (self.input_per_mtok or 0.0)
                + tokens_out * (self.output_per_mtok or 0.0)
            ) / 1e6
        rates = self.lookup(self.model) if self.lookup is not None else None
        if rates is None:
            return None
        return tokens_in * rates[0] + tokens_out * rates[1]


@dataclass
class Budget:
    """Shared by every step of a run (steps run in threads, hence the lock)."""

    max_cost: float | None = None
    max_calls: int | None = None
    spent: float = 0.0
    calls: int = 0
    # Callers (labels) whose calls it neither counts nor limits: training budgets worker calls,
    # and its conductor is a local model.
    exempt: frozenset[str] = frozenset()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopped: bool = field(default=False, repr=False)

    def reserve(self, what: str, estimate: float | None) -> None:
        """Count a call about to be made, or refuse it if it could cross a limit."""
        if what in self.exempt:
            return
        with self._lock:
            if self._stopped:
                raise BudgetError(f"{what}: no model call: the run is ending")
            if self.max_calls is not None and self.calls + 1 > self.max_calls:
                raise BudgetError(
                    f"{what}: stopped before model call {self.calls + 1}: --max-calls "
                    f"{self.max_calls} reached. Raise it, or rerun to reuse cached answers."
                )
            if self.max_cost is not None and self.spent + (estimate or 0.0) > self.max_cost:
                raise BudgetError(
                    f"{what}: stopped before a call that could cost ${estimate:.4f} on top of "
                    f"${self.spent:.4f} spent: --max-cost {self.max_cost} would be crossed."
                )
            self.calls += 1

    def stop(self) -> int:
        """No call is counted or made after this; the calls counted (a training that ends,
        on Ctrl-C too, records them while its other threads may still be about to call)."""
        with self._lock:
            self._stopped = True
            return self.calls

    def settle(self, cost: float | None) -> None:
        with self._lock:
            self.spent += cost or 0.0
