"""Which workflows to measure when trying every shape on every question costs too much
(`conductor train --search adaptive`, the default).

Every worker alone runs once on every training question first. From then on a shape's reward
at a question is estimated from the measured runs of that shape on the question's nearest
neighbours in the conductor's hidden state (the question itself included): like questions
reward like workflows. Each batch then buys, on the questions where it could matter most, the
one unmeasured shape whose reward, drawn from a Beta posterior over those runs (Thompson
sampling), most exceeds the best estimate there (for the step policy: most a call); where no
draw beats it by MIN_GAIN the question is settled. For the step policy, a composition
estimated best at a question on few runs, or one of its two best estimates while they are not
yet apart, is first measured again near it (confirm). The rewards of the shapes never bought
are estimated, not measured: the head learns from the estimated table (`estimates`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NEIGHBOURS = 8
MIN_GAIN = 0.05
PRIOR_RUNS = 1.0
# How many runs over its neighbourhood a composition estimated best at a question needs before
# the search takes it as that question's best, and how many standard errors apart from the
# runner-up it must stand after that (confirm). On a numpy copy of bench/prove_eight.py
# (docs/train.md), 2 and 5 runs and a separation of 1.5 did no better, nor did capping the runs
# the separation buys.
CONFIRM_RUNS = 3
SEPARATION = 1.0


@dataclass
class Observations:
    """Sums and counts of measured rewards per (training question, shape), rewards in [0, 1]."""

    sums: np.ndarray  # (n, S)
    counts: np.ndarray  # (n, S)

    @classmethod
    def empty(cls, questions: int, shapes: int) -> Observations:
        return cls(np.zeros((questions, shapes)), np.zeros((questions, shapes)))

    def add(self, question: int, shape: int, reward: float) -> None:
        self.sums[question, shape] += reward
        self.counts[question, shape] += 1

    def means(self) -> np.ndarray:
        """The plain mean where measured, NaN elsewhere."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), np.nan)


def neighbourhood(n: int) -> int:
    """How many neighbours pool their runs: fewer for few questions, so that a kind of
    question asked a handful of times is not drowned by its neighbours of other kinds."""
    return int(min(NEIGHBOURS, max(3, round(math.sqrt(n) / 1.5))))


def neighbours(inputs: np.ndarray, k: int | None = None) -> np.ndarray:
    """(n, min(k, n)) indices of each row's nearest rows by euclidean distance, itself first
    (k: `neighbourhood(n)` by default)."""
    x = np.asarray(inputs, dtype=np.float64)
    if k is None:
        k = neighbourhood(len(x))
    squared = (x * x).sum(axis=1)
    distance = squared[:, None] + squared[None, :] - 2.0 * (x @ x.T)
    np.fill_diagonal(distance, -np.inf)
    k = min(k, len(x))
    return np.argsort(distance, axis=1, kind="stable")[:, :k]


def pooled(obs: Observations, near: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sums, counts) of each shape's measured runs over each question's neighbourhood."""
    return obs.sums[near].sum(axis=1), obs.counts[near].sum(axis=1)


def estimates(obs: Observations, near: np.ndarray, prior: float = 0.0) -> np.ndarray:
    """(n, S) estimated rewards: the neighbourhood's mean, with PRIOR_RUNS pseudo-runs of
    reward `prior` (a wrong answer's): a shape measured nowhere near is estimated wrong, and
    one lucky run is not worth a worker measured right four times in five."""
    sums, counts = pooled(obs, near)
    return (sums + PRIOR_RUNS * prior) / (counts + PRIOR_RUNS)


def right_runs(sums: np.ndarray, counts: np.ndarray, floor: float) -> np.ndarray:
    """Reward sums on a 0-1 scale from a wrong answer (`floor`) to a right one: the runs'
    mass of rightness, for Beta posteriors (a Beta's uniform prior then means "as likely right
    as wrong", not "surely wrong")."""
    return np.clip((sums - floor * counts) / (1.0 - floor), 0.0, counts)


@dataclass(frozen=True)
class Near:
    """What the runs over each question's neighbourhood say of each shape, on the 0-1 scale
    from a wrong answer to a right one: the mass of right runs, the runs, and their mean with
    PRIOR_RUNS pseudo-runs of a wrong answer (each (n, S))."""

    right: np.ndarray
    runs: np.ndarray
    mean: np.ndarray

    @classmethod
    def of(cls, obs: Observations, near: np.ndarray, floor: float) -> Near:
        sums, counts = pooled(obs, near)
        right = right_runs(sums, counts, floor)
        return cls(right, counts, right / (counts + PRIOR_RUNS))


def next_batch(
    obs: Observations,
    near: np.ndarray,
    calls: Sequence[int],
    budget: int,
    rng: np.random.Generator,
    max_jobs: int,
    closed: np.ndarray | None = None,
    floor: float = 0.0,
    per_call: bool = False,
    prior: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[tuple[int, int]]:
    """At most `max_jobs` (question, shape) pairs to measure next, costing at most `budget`
    calls (`calls[s]`: what shape s costs on a question whose single runs are measured); []
    when every question is settled or nothing fits. `closed` (n, S): pairs not to buy.
    `floor`: the reward of a wrong answer, the bottom of the scale the draws are made on.
    `per_call`: each question buys the shape with the most gain a call (of those that gain
    MIN_GAIN), and the questions are served in that order: a two-step check before a
    three-step join that promises no more. `prior`: (runs, rate), each broadcast to (n, S):
    pseudo-runs at that share of right answers added to each draw's uniform Beta (for the step
    policy, step_head.lesser_prior)."""
    seen = Near.of(obs, near, floor)
    sums, counts, best = seen.right, seen.runs, seen.mean.max(axis=1)
    # Beta(1 + reward mass, 1 + its complement) per (question, shape): optimistic where unknown.
    right, wrong = 1.0 + sums, 1.0 + counts - sums
    if prior is not None:
        runs, rate = prior
        right, wrong = right + runs * rate, wrong + runs * (1.0 - rate)
    draws = rng.beta(right, wrong)
    gain = draws - best[:, None]
    gain[obs.counts > 0] = -np.inf  # one measurement per (question, shape) is enough here
    if closed is not None:
        gain[closed] = -np.inf
    if per_call:
        price = np.maximum(np.asarray(calls, dtype=np.float64), 1.0)
        score = np.where(gain >= MIN_GAIN, gain / price, -np.inf)
    else:
        score = gain
    shape = np.argmax(score, axis=1)
    rows = np.arange(len(shape))
    value = gain[rows, shape]
    chosen: list[tuple[int, int]] = []
    spent = 0
    for q in np.argsort(-score[rows, shape], kind="stable"):
        if value[q] < MIN_GAIN or len(chosen) >= max_jobs:
            break
        cost = calls[int(shape[q])]
        if spent + cost > budget:
            continue
        chosen.append((int(q), int(shape[q])))
        spent += cost
    return chosen


def confirm(
    obs: Observations,
    near: np.ndarray,
    calls: Sequence[int],
    budget: int,
    max_jobs: int,
    composite: np.ndarray,
    closed: np.ndarray | None = None,
    floor: float = 0.0,
) -> list[tuple[int, int]]:
    """At most `max_jobs` (question, shape) pairs that settle which of a question's two best
    estimates is best: a composition (`composite` (S,) True) estimated best on fewer than
    CONFIRM_RUNS runs over the neighbourhood, and after that, where the two are not SEPARATION
    standard errors apart, the composition among them resting on fewer runs, is measured once
    more, on the nearest neighbour that has not run it (nor settled it: `closed` (n, S));
    once every neighbour has, the two stand as measured. Thompson draws only buy what might
    beat the best estimate, never the best itself nor its runner-up, so a composition lucky
    once or twice (among hundreds run once) would stand as a question's best, and one unlucky
    a few times would lose to a worker right half the time alone; the policy then learns
    either."""
    seen = Near.of(obs, near, floor)
    counts, mean = seen.runs, seen.mean
    # Floored: a shape right on every run so far is not certain to be right.
    error = np.sqrt(np.maximum(mean * (1.0 - mean), 0.02) / (counts + PRIOR_RUNS))
    order = np.argsort(-mean, axis=1, kind="stable")[:, :2]
    chosen: list[tuple[int, int]] = []
    if order.shape[1] < 2:  # one shape: nothing to settle
        return chosen
    spent = 0
    for q in np.argsort(-mean.max(axis=1), kind="stable"):
        if len(chosen) >= max_jobs:
            break
        top, second = (int(s) for s in order[q])
        if composite[top] and counts[q, top] < CONFIRM_RUNS:
            s = top
        elif mean[q, top] - mean[q, second] >= SEPARATION * (error[q, top] + error[q, second]):
            continue
        else:
            doubtful = [s for s in (top, second) if composite[s]]
            if not doubtful:
                continue
            s = min(doubtful, key=lambda s: counts[q, s])
        if spent + calls[s] > budget:
            continue
        unrun = [
            int(r)
            for r in near[q]
            if obs.counts[r, s] == 0
            and (closed is None or not closed[r, s])
            and (int(r), s) not in chosen
        ]
        if unrun:
            chosen.append((unrun[0], s))
            spent += calls[s]
    return chosen
