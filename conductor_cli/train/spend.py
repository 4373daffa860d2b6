"""What a training will spend, said before the first call, and the limit it is held to.

`conductor train --max-calls N --max-cost USD` are one `run.budget.Budget` shared by every
worker call the training makes (reward runs and held-out runs; the conductor's calls are local
and not counted): a call that would cross either limit is never made, so the limits hold
exactly (a cost limit against a bound on each call's price, taken before the call). The
held-out runs' worst case is set aside first; what remains pays
for measuring rewards. The calls a training made are kept in its work dir, so `--resume`
counts them against the same limits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.config.settings import Config
from conductor_cli.disk.atomic import atomic_write
from conductor_cli.errors import InputError
from conductor_cli.evals.records import Problem
from conductor_cli.policy.shapes import Shape, single_index
from conductor_cli.run.budget import Pricing

# --search adaptive with no --max-calls: this many worker calls a training question for each
# worker in the pool (4 workers: 10 a question; trying every shape twice costs about 40).
DEFAULT_CALLS_PER_WORKER = 2.5
SPENT = "spent.json"
CHARS_PER_TOKEN = 4


StepKey = tuple[Any, ...]


def step_keys(shape: Shape, tools: frozenset[str]) -> list[StepKey]:
    """What each step's request depends on, as the response cache sees it: its worker, its
    position (a step's seed is the run's plus its index), the steps it sees, whether a tool
    step reads it (then it is asked for a program) and its words. Two runs' steps with one key
    are one call."""
    keys: list[StepKey] = []
    for i, (worker, sees) in enumerate(zip(shape.workers, shape.sees, strict=True)):
        feeds = any(
            i in shape.sees[j] and shape.workers[j] in tools for j in range(i + 1, len(shape.sees))
        )
        keys.append((worker, i, tuple(keys[j] for j in sees), feeds, shape.word(i)))
    return keys


def new_calls(
    shapes: Sequence[Shape], tools: frozenset[str], cached: bool, paid: set[StepKey] | None = None
) -> int:
    """Worker calls to run every shape once on one question (and repeat) with an empty cache,
    less the steps `paid` for already: each distinct step once (the cache answers the rest)."""
    if not cached:
        return sum(len(s.workers) for s in shapes)
    keys = {k for s in shapes for k in step_keys(s, tools)}
    return len(keys - (paid or set()))


def tool_workers(config: Config) -> frozenset[str]:
    return frozenset(w.name for w in config.workers if w.tool)


@dataclass(frozen=True)
class Estimate:
    search: str
    singles: int  # calls to measure each worker once on each training question (not stored)
    rewards: int  # at most, for every reward run (singles included)
    held_out: int  # at most, for the held-out runs
    limit: int | None  # --max-calls
    dollars: float | None  # at most, where every worker has a price; None where one has none
    unpriced: tuple[str, ...]  # remote workers with no price
    words: int = 0  # at most, for --learn-words (train/word_shapes.words_calls)

    @property
    def calls(self) -> int:
        return self.rewards + self.held_out + self.words

    def line(self) -> str:
        money = ""
        if self.dollars is not None:
            money = f", at most ${self.dollars:.4f}"
        elif self.unpriced:
            money = f" (no price for {', '.join(self.unpriced)})"
        how = (
            "every worker once on each question, then the workflows where the policy is unsure"
            if self.search == "adaptive"
            else "every shape on every question"
        )
        words = f", {self.words} learning words" if self.words else ""
        return (
            f"estimate: at most {self.calls} worker calls{money}: {self.rewards} measuring "
            f"rewards ({how}){words} and {self.held_out} for the held-out questions"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "search": self.search,
            "max_calls": self.calls,
            "reward_calls": self.rewards,
            "held_out_calls": self.held_out,
            "words_calls": self.words,
            "singles_calls": self.singles,
            "limit": self.limit,
            "max_dollars": None if self.dollars is None else round(self.dollars, 6),
            "unpriced": list(self.unpriced),
        }


def held_out_calls(config: Config, held_out: int, rounds: int, before: bool) -> int:
    """The most the held-out runs can call: each round, every step (the conductor's own
    calls are local and not counted)."""
    per_question = config.conductor.max_steps * rounds
    return held_out * per_question * (2 if before else 1)


def estimate(
    config: Config,
    training: Sequence[Problem],
    shapes: Sequence[Shape],
    *,
    search: str,
    repeats: int,
    held_out: int,
    rounds: int,
    before: bool,
    max_calls: int | None,
    measured: set[tuple[int, int, int]],
    prices: dict[str, Pricing],
    words: int = 0,
) -> Estimate:
    """Calls and dollars at most. `measured`: (question, shape, repeat) already in the store,
    which cost nothing again; `prices`: each worker's price list; `words`: the most
    --learn-words calls (a --max-calls budget bounds them with the rest)."""
    cached = config.cache.enabled
    tools = tool_workers(config)
    names = [w.name for w in config.workers]
    single_of = single_index(shapes)
    singles = sum(
        1 for q in range(len(training)) for w in names if (q, single_of[w], 0) not in measured
    )
    if search == "all":
        rewards = 0
        for q in range(len(training)):
            for r in range(repeats):
                done = [s for i, s in enumerate(shapes) if (q, i, r) in measured]
                todo = [s for i, s in enumerate(shapes) if (q, i, r) not in measured]
                paid = {k for s in done for k in step_keys(s, tools)}
                rewards += new_calls(todo, tools, cached, paid)
    else:
        rewards = default_reward_calls(config, len(training))
    held = held_out_calls(config, held_out, rounds, before)
    if max_calls is not None:
        # The held-out runs' worst case is set aside; adaptive search spends what is left,
        # and the words' search what the search left.
        left = max_calls - held
        rewards = min(rewards, left) if search == "all" else left
        words = min(words, max(0, left - rewards))
    unpriced = tuple(w.name for w in config.workers if prices[w.name].cost(1, 1) is None)
    dollars = None
    if not unpriced:
        dollars = (rewards + held + words) * max(
            call_bound(w, prices[w.name], training) for w in config.workers
        )
    return Estimate(search, singles, rewards, held, max_calls, dollars, unpriced, words)


def default_reward_calls(config: Config, questions: int) -> int:
    return math.ceil(DEFAULT_CALLS_PER_WORKER * len(config.workers) * questions)


def call_bound(worker: Any, pricing: Pricing, training: Sequence[Problem]) -> float:
    """A bound on one call's price: the longest question, an earlier step's whole output and
    this worker's whole max_tokens."""
    longest = max((len(p.question) for p in training), default=0)
    tokens_in = longest // CHARS_PER_TOKEN + 2 * worker.max_tokens + 64
    return pricing.cost(tokens_in, worker.max_tokens) or 0.0


def check(
    estimate: Estimate, max_calls: int | None, max_cost: float | None, *, rounds: int
) -> None:
    """One line for a limit the training cannot keep."""
    if (max_calls is not None or max_cost is not None) and rounds > 1:
        raise InputError(
            f"--rounds {rounds} with --max-calls/--max-cost: the round head's corrective runs "
            "are not budgeted yet; train rounds without a limit, or leave --rounds out"
        )
    if max_cost is not None and estimate.unpriced:
        raise InputError(
            f"--max-cost {max_cost}: no price is known for {', '.join(estimate.unpriced)}; set "
            "workers.input_cost_per_mtok and output_cost_per_mtok for it, or use --max-calls"
        )
    if max_calls is not None:
        least = estimate.singles + estimate.held_out
        if max_calls < least:
            raise InputError(
                f"--max-calls {max_calls}: measuring each worker once on each training question "
                f"takes {estimate.singles} calls and the held-out runs up to {estimate.held_out}: "
                f"give at least {least} (or fewer questions, or --holdout 0)"
            )


def read_spent(work: Path) -> tuple[int, float]:
    """(calls, dollars) a training spent before it was interrupted."""
    try:
        data = json.loads((work / SPENT).read_text(encoding="utf-8"))
        return int(data["calls"]), float(data["dollars"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0.0


def write_spent(work: Path, calls: int, dollars: float) -> None:
    atomic_write(work / SPENT, json.dumps({"calls": calls, "dollars": dollars}).encode("utf-8"))
