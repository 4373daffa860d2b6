"""Which features a shape head reads, chosen on kinds withheld from its fit (issue 68).

Three readings of a question (policy/head.py `reads`): the conductor's hidden state after its
planning prompt as asked ("prompt"), the same with the question bare ("question": its set's
format line cut), and the mean final hidden state over the bare question of the pool's
largest local model ("embedding": the default team's 1.5B coder tells a short fact from a
word problem where SmolLM2's state of the prompt keys on the format line they share). Each is
fitted on the same reward table and scored by the same cross-validation (train/head_fit.py:
fewest kinds given away, then held-out reward); on a tie the later reading, the one that
cannot key on a format line, is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conductor_cli.config.settings import Config
from conductor_cli.models.catalog import ResolvedModel, load_catalog, resolve_gguf
from conductor_cli.run.pool import config_key

# In order of preference on a tie.
ORDER = ("prompt", "question", "embedding")


@dataclass(frozen=True)
class Reading:
    """One reading's fit: its inputs (the questions projected), the fit, and what it scored."""

    reads: str
    inputs: Any
    fitted: Any
    held_out_reward: float
    kinds_given_away: int

    def scores(self) -> dict[str, float]:
        return {
            "held_out_reward": round(self.held_out_reward, 4),
            "kinds_given_away": self.kinds_given_away,
        }


def embedder(config: Config) -> ResolvedModel | None:
    """The GGUF that embeds questions for the "embedding" reading: the pool's largest local
    model (the default team's coder), None where the pool has no local model."""
    catalog = load_catalog()
    local = [
        resolve_gguf(w.spec.name, catalog, config_key(config, f"workers[{i}].model"))
        for i, w in enumerate(config.workers)
        if w.spec.local
    ]
    return max(local, key=lambda r: r.path.stat().st_size, default=None)


def reading(reads: str, inputs: Any, fitted: Any) -> Reading | None:
    """A fit scored by cross-validation, as a Reading (None: a fit without one)."""
    choice = fitted.choice
    if choice is None:
        return None
    return Reading(
        reads,
        inputs,
        fitted,
        choice.held_out[choice.chosen],
        len(choice.given_away[choice.chosen]),
    )


def best(readings: list[Reading]) -> Reading:
    """Fewest kinds given away, then the most held-out reward; a tie goes to the later of
    ORDER."""
    return max(
        readings,
        key=lambda r: (-r.kinds_given_away, round(r.held_out_reward, 9), ORDER.index(r.reads)),
    )


def compare(
    first: Reading, others: list[str], fit_reading: Callable[[str], Reading | None]
) -> tuple[Reading, dict[str, Any]]:
    """`first` (the prompt as asked, already fitted) against each of `others`, fitted by
    `fit_reading`: the kept reading and what each validated (the training record's `reads`)."""
    readings = [first]
    for reads in others:
        other = fit_reading(reads)
        if other is not None:
            readings.append(other)
    kept = best(readings)
    compared: dict[str, Any] = {r.reads: r.scores() for r in readings}
    compared["chosen"] = kept.reads
    return kept, compared
