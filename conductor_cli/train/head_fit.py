"""The shape head's weights, chosen by cross-validation among several fits of the reward table.

Two kinds of fit: the evolution of train/head_evolution.py (sep-CMA-ES on the mean reward of the
argmax picks), and a softmax policy whose expected reward is maximized by gradient ascent with
an L2 penalty of a few strengths (the bias is not penalized, so a strong penalty leaves the best
fixed shape and only the clearest differences between questions). Each fit is scored by the
reward its picks earn on questions it did not see (k folds, stratified by the questions' kinds),
and the one kept is the fit that gives away the fewest kinds (a kind where it does worse than
the best member alone on it by more than KIND_SLACK), then the best held-out reward. With
KINDS_OUT kinds or more each fit is also scored with folds that withhold whole kinds
(leave-kinds-out), the two views weighing the same: on kinds it never trained on, as a question
of a kind no training had is planned, and on the kinds it trained on, so a fit that keys on
what only its training kinds share loses to one that carries over, and one that carries
nothing (every question to the best member) loses what it earned on its own kinds.

Why: with a few dozen questions, the evolution's argmax objective is flat almost everywhere and
its result depends on the seed: on the 75 training questions of bench/train_public.py one seed
sent every ARC question to SmolLM2 (worse than the coder on them, and on the test items 9/50
against 25/50), another sent them to the coder. This cross-validation there: the evolution
0.772 held-out reward, giving away three kinds; the softmax fit kept 0.820, none (the coder
alone 0.773).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conductor_cli.train.head_evolution import GENERATIONS, evolve

FOLDS = 5
SPLITS = 3  # the folds drawn again, each question's held-out reward averaged over them
# The softmax fits' L2 strengths, weakest first (ties go to the stronger, the simpler policy), in
# units of the inputs' mean square (the bias aside): a rescaled input is penalized the same.
STRENGTHS = (0.003, 0.01, 0.03, 0.1, 0.3)
STEPS = 400
RATE = 0.05
# How far below the best member alone on a kind a fit may fall there before it counts as giving
# the kind away: 0.10 of accuracy on the paper's reward (right 1, wrong 0.5).
KIND_SLACK = 0.05
EVOLUTION = "evolution"
# From this many kinds on, folds that withhold whole kinds score the fits too (enough remain in
# every fold to learn from; with fewer, a withheld kind is often the only one of its sort and
# nothing could carry).
KINDS_OUT = 12


@dataclass(frozen=True)
class HeadFit:
    weights: np.ndarray  # (k + 1, S)
    chosen: str  # "evolution" | "softmax 1"
    held_out: dict[str, float]  # each fit's mean reward on the questions it did not see
    given_away: dict[str, list[str]]  # each fit's kinds given away in the cross-validation
    folds: int
    kinds: dict[str, dict[str, Any]] = field(default_factory=dict)  # the chosen fit, per kind
    # what the folds withhold: "questions" (of every kind), "questions and kinds" (both views),
    # or "none" (too few questions for a cross-validation)
    withheld: str = "questions"

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "folds": self.folds,
            "withheld": self.withheld,
            "held_out_reward": {k: round(v, 4) for k, v in self.held_out.items()},
            "kinds_given_away": self.given_away,
            "kinds": self.kinds,
        }


def softmax_fit(
    inputs: np.ndarray,
    rewards: np.ndarray,
    strength: float,
    on_step: Callable[[int, np.ndarray], None] | None = None,
) -> np.ndarray:
    """(k + 1, S) weights maximizing the mean over questions of the softmax policy's expected
    reward, minus strength/2 times the squared weights (the bias row aside) times the inputs'
    mean square: Adam, from zero, a fixed number of steps (deterministic)."""
    n, width = inputs.shape
    strength *= float(np.mean(inputs[:, 1:] ** 2)) if width > 1 else 1.0
    weights = np.zeros((width, rewards.shape[1]))
    first, second = np.zeros_like(weights), np.zeros_like(weights)
    penalized = np.r_[0.0, np.ones(width - 1)][:, None]
    for t in range(1, STEPS + 1):
        logits = inputs @ weights
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        grad = inputs.T @ (p * (rewards - (p * rewards).sum(axis=1, keepdims=True))) / n
        grad -= strength * weights * penalized
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad * grad
        weights += RATE * (first / (1 - 0.9**t)) / (np.sqrt(second / (1 - 0.999**t)) + 1e-8)
        if on_step is not None:
            on_step(t, weights)
    return weights


def fit_head(
    inputs: np.ndarray,
    rewards: np.ndarray,
    *,
    seed: int,
    generations: int = GENERATIONS,
    kinds: Sequence[str] | None = None,
    members: Sequence[int] = (),
    on_generation: Any = None,
) -> HeadFit:
    """The weights of the fit that does best on held-out questions (module docstring).
    `kinds`: each question's kind ("" if none); `members`: the columns of each worker alone."""
    n = inputs.shape[0]
    labels = np.asarray(list(kinds) if kinds is not None else [""] * n)
    fits: dict[str, Callable[[np.ndarray, Any], np.ndarray]] = {
        EVOLUTION: lambda rows, report: evolve(
            inputs[rows], rewards[rows], seed=seed, generations=generations, on_generation=report
        ),
    }
    for s in STRENGTHS:
        fits[f"softmax {s:g}"] = _softmax_candidate(inputs, rewards, s, generations)
    folds = min(FOLDS, n // 2)
    if folds < 2:
        weights = fits[EVOLUTION](np.arange(n), on_generation)
        return HeadFit(weights, EVOLUTION, {}, {}, 0, withheld="none")
    by_kind = withholds_kinds(labels.tolist())
    # Both views weigh the same where kinds are withheld: a fit must carry to new kinds and
    # still earn on the kinds it trained on.
    dealers = (_folds, _kind_folds) if by_kind else (_folds,)
    earned = {name: np.zeros(n) for name in fits}
    for split in range(SPLITS):
        for deal in dealers:
            fold = deal(labels, folds, seed + split)
            for f in range(folds):
                seen, unseen = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
                for name, fit in fits.items():
                    picks = np.argmax(inputs[unseen] @ fit(seen, None), axis=1)
                    earned[name][unseen] += rewards[unseen, picks] / (SPLITS * len(dealers))
    best = best_members(rewards, labels, members)
    chosen, away = choose(earned, labels, member_floors(best))
    weights = fits[chosen](np.arange(n), on_generation)
    per_kind = {
        kind: {
            "held_out_reward": round(float(earned[chosen][labels == kind].mean()), 4),
            "best_member_reward": round(reward, 4) if np.isfinite(reward) else None,
            # the column of that member in the table: the caller names it
            "best_member": column,
        }
        for kind, (column, reward) in sorted(best.items())
    }
    held_out = {name: float(e.mean()) for name, e in earned.items()}
    withheld = "questions and kinds" if by_kind else "questions"
    return HeadFit(weights, chosen, held_out, away, folds, per_kind, withheld)


def withholds_kinds(kinds: Iterable[str]) -> bool:
    """Whether questions of these kinds are many kinds enough (KINDS_OUT) for fit_head to
    score its fits on whole kinds withheld too; questions of no kind ("") are of none."""
    return len(set(kinds) - {""}) >= KINDS_OUT


def withheld_picks(
    inputs: np.ndarray,
    rewards: np.ndarray,
    kinds: Sequence[str],
    chosen: str,
    *,
    seed: int,
    generations: int = GENERATIONS,
) -> tuple[np.ndarray, np.ndarray]:
    """Each question's pick by the fit `chosen` (HeadFit.chosen) trained without it: without its
    whole kind (as if the kind were new), and without its fold only (its kind trained, as
    fit_head's cross-validation sees it); what train/familiar_fit.py weighs a threshold by."""
    labels = np.asarray(list(kinds))
    if chosen == EVOLUTION:

        def fit(rows: np.ndarray) -> np.ndarray:
            return evolve(inputs[rows], rewards[rows], seed=seed, generations=generations)
    else:
        strength = float(chosen.split()[1])
        candidate = _softmax_candidate(inputs, rewards, strength, generations)

        def fit(rows: np.ndarray) -> np.ndarray:
            return candidate(rows, None)

    kind_out = np.zeros(len(labels), dtype=int)
    for kind in sorted(set(labels.tolist())):
        rows = np.flatnonzero(labels == kind)
        kind_out[rows] = np.argmax(inputs[rows] @ fit(np.flatnonzero(labels != kind)), axis=1)
    fold_out = np.zeros(len(labels), dtype=int)
    folds = max(2, min(FOLDS, len(labels) // 2))
    fold = _folds(labels, folds, seed)
    for f in range(folds):
        rows = np.flatnonzero(fold == f)
        fold_out[rows] = np.argmax(inputs[rows] @ fit(np.flatnonzero(fold != f)), axis=1)
    return kind_out, fold_out


def _softmax_candidate(
    inputs: np.ndarray, rewards: np.ndarray, strength: float, generations: int
) -> Callable[[np.ndarray, Any], np.ndarray]:
    def fit(rows: np.ndarray, report: Any) -> np.ndarray:
        every = max(1, STEPS // max(1, generations))

        def on_step(t: int, weights: np.ndarray) -> None:
            if report is not None and t % every == 0 and t // every <= generations:
                picks = np.argmax(inputs[rows] @ weights, axis=1)
                report(t // every - 1, float(rewards[rows, picks].mean()))

        return softmax_fit(inputs[rows], rewards[rows], strength, on_step)

    return fit


def _folds(labels: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each question's fold: each kind dealt round the folds in a seeded order."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(labels), dtype=int)
    start = 0
    for kind in sorted(set(labels.tolist())):
        rows = np.flatnonzero(labels == kind)
        rng.shuffle(rows)
        fold[rows] = (start + np.arange(len(rows))) % folds
        start += len(rows)  # small kinds do not all begin in fold 0
    return fold


def _kind_folds(labels: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each question's fold, every question of a kind in the same one: the kinds in a seeded
    order, each to the fold holding fewest questions so far."""
    rng = np.random.default_rng(seed)
    kinds = sorted(set(labels.tolist()))
    rng.shuffle(kinds)
    fold = np.empty(len(labels), dtype=int)
    sizes = np.zeros(folds, dtype=int)
    for kind in kinds:
        rows = np.flatnonzero(labels == kind)
        f = int(np.argmin(sizes))
        fold[rows] = f
        sizes[f] += len(rows)
    return fold


def choose(
    earned: dict[str, np.ndarray], labels: np.ndarray, floors: dict[str, float]
) -> tuple[str, dict[str, list[str]]]:
    """The fit to keep, from each fit's held-out reward on every question (in order of
    preference on a tie: the later, the simpler), and each fit's kinds given away."""
    away = {name: _given_away(e, labels, floors) for name, e in earned.items()}
    order = list(earned)
    chosen = max(order, key=lambda m: (-len(away[m]), round(earned[m].mean(), 9), order.index(m)))
    return chosen, away


def member_floors(best: dict[str, tuple[int | None, float]]) -> dict[str, float]:
    """Per kind, the best member alone's mean reward (best_members) less KIND_SLACK (no floor
    without members: -inf)."""
    return {kind: reward - KIND_SLACK for kind, (_, reward) in best.items()}


def best_members(
    rewards: np.ndarray, labels: np.ndarray, members: Sequence[int]
) -> dict[str, tuple[int | None, float]]:
    """Per kind, the column of the member alone with the most mean reward there and that
    reward (None and -inf without members; the first such member on a tie)."""
    best: dict[str, tuple[int | None, float]] = {}
    for kind in set(labels.tolist()):
        rows = labels == kind
        scored = [(float(rewards[rows, m].mean()), -i, m) for i, m in enumerate(members)]
        top = max(scored, default=None)
        best[kind] = (top[2], top[0]) if top else (None, -np.inf)
    return best


def _given_away(earned: np.ndarray, labels: np.ndarray, floors: dict[str, float]) -> list[str]:
    return sorted(k for k, floor in floors.items() if earned[labels == k].mean() < floor - 1e-9)
