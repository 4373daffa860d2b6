"""A linear head over the conductor's hidden state that picks a workflow shape.

In the manner of TRINITY (see README, "Train your conductor"): the hidden state is
standardized and reduced by PCA to a few numbers, and a linear layer scores each shape; the
shape with the highest score is planned. The weights are evolved by sep-CMA-ES (the `cma`
package: no gradients, only rewards) to maximize the mean reward of the chosen shapes over
the training questions, from a table of every (question, shape) reward measured beforehand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from conductor_cli.policy.shapes import Shape

GENERATIONS = 60
SIGMA = 0.5
MINIBATCH = 64
# The mean held-out reward by which the ridge start must win its cross-validation: less is
# the step-count tie-break, not a better policy.
CV_MARGIN = 0.01


def fit_pca(features: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, scale, components) of standardized features; at most n - 1 components."""
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale[scale < 1e-6] = 1.0
    x = (features - mean) / scale
    k = max(1, min(dims, x.shape[0] - 1, x.shape[1]))
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    return mean, scale, vt[:k]


def evolve(
    inputs: np.ndarray,
    rewards: np.ndarray,
    *,
    seed: int,
    generations: int = GENERATIONS,
    on_generation: Any = None,
) -> np.ndarray:
    """Weights (k + 1, S) maximizing the mean reward of argmax choices: sep-CMA-ES, from zero
    weights (as since the head method began) or from a ridge regression of each shape's reward
    on the inputs, whichever does better on the questions it did not fit in a 2-fold
    cross-validation (by CV_MARGIN at least, else from zero). With many shapes the search
    from zero can stall short of the per-question best; with few questions the regression
    fits them exactly and generalizes worse (tests/test_train_tools.py: a held-out question
    got the wrong shape)."""
    n, width = inputs.shape
    shapes = rewards.shape[1]

    def pick(flat: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.argmax(x @ flat.reshape(width, shapes), axis=1)

    def fit(rows: np.ndarray, warm: bool, report: Any = None) -> np.ndarray:
        start = ridge(inputs[rows], rewards[rows]).ravel() if warm else np.zeros(width * shapes)
        return search(start, pick, inputs[rows], rewards[rows], seed, generations, report)

    def score(flat: np.ndarray, rows: np.ndarray) -> float:
        return float(rewards[rows, pick(flat, inputs[rows])].mean())

    warm = False
    if n >= 4:
        order = np.random.default_rng(seed).permutation(n)
        folds = (order[: n // 2], order[n // 2 :])
        cv = {w: sum(score(fit(folds[1 - f], w), folds[f]) for f in (0, 1)) for w in (False, True)}
        warm = cv[True] > cv[False] + 2 * CV_MARGIN
    return fit(np.arange(n), warm, on_generation).reshape(width, shapes)


def search(
    start: np.ndarray,
    pick: Callable[[np.ndarray, np.ndarray], np.ndarray],
    inputs: np.ndarray,
    rewards: np.ndarray,
    seed: int,
    generations: int,
    on_generation: Any,
    sigma: float = SIGMA,
) -> np.ndarray:
    """sep-CMA-ES from `start` over flat weights, maximizing the mean reward of the shapes
    `pick(weights, inputs)` chooses (one index into `rewards`' columns per row)."""
    import cma

    n = inputs.shape[0]
    rng = np.random.default_rng(seed)

    def mean_reward(flat: np.ndarray, rows: np.ndarray) -> float:
        return float(rewards[rows, pick(flat, inputs[rows])].mean())

    es = cma.CMAEvolutionStrategy(
        start,
        sigma,
        {"CMA_diagonal": True, "seed": seed + 1, "verbose": -9, "maxiter": generations},
    )
    everyone = np.arange(n)
    for generation in range(generations):
        rows = everyone if n <= MINIBATCH else rng.choice(n, MINIBATCH, replace=False)
        candidates = es.ask()
        es.tell(candidates, [-mean_reward(np.asarray(c), rows) for c in candidates])
        if on_generation is not None:
            on_generation(generation, mean_reward(np.asarray(es.result.xfavorite), everyone))
    best = np.asarray(es.result.xfavorite)
    # The evolution's mean, unless a candidate it saw (or its start) does better on every
    # question.
    for other in (es.result.xbest, start):
        if other is not None and mean_reward(np.asarray(other), everyone) > (
            mean_reward(best, everyone)
        ):
            best = np.asarray(other)
    return best


def ridge(inputs: np.ndarray, rewards: np.ndarray, strength: float = 1e-2) -> np.ndarray:
    """(k + 1, S): a linear prediction of each shape's reward, scaled to unit spread (only its
    argmax matters, and the search's step size is set for weights of about that size)."""
    width = inputs.shape[1]
    gram = inputs.T @ inputs
    penalty = strength * (np.trace(gram) / width) * np.eye(width)
    weights = np.linalg.solve(gram + penalty, inputs.T @ rewards)
    spread = float(weights.std())
    return weights / spread if spread > 0 else weights


def best_fixed_shape(rewards: np.ndarray, shapes: Sequence[Shape]) -> tuple[Shape, float]:
    """The one shape with the highest mean training reward: what a head must beat."""
    means = rewards.mean(axis=0)
    i = int(np.argmax(means))
    return shapes[i], float(means[i])
