"""A step-by-step policy over workers as vectors: the head for pools too large for one score per
workflow shape (`conductor train --policy steps`; `auto` takes it beyond head.MAX_SHAPES).

A worker is three vectors over the question's inputs (the PCA-reduced hidden state of the
planning prompt, as for the shape head): its score as the one who answers, as the one who
checks the answer before it (and sees it), and as the judge of two independent answers (it
sees both). They start as ridge regressions of the worker's measured rewards in each role (a
worker is described by its results, not by its slot), and three gate vectors shared by every
worker weigh the moves. Planning goes step by step: step 1 is the best answerer; then the move
whose best continuation scores highest: stop there, a check by the best checker, or a second
answer by the next best answerer and a judge that sees both. Each choice is an argmax over the
workers, so the policy has 3(k + 1) weights a worker plus 3(k + 1): its size and its cost
grow linearly with the pool, where the shape head's grow with the number of shapes
(n + n² + n²(n - 1)/2 with joins).

The gates are then evolved by sep-CMA-ES on the reward table (measured where measured,
estimated elsewhere), kept only where a 2-fold cross-validation prefers them to zero gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from conductor_cli.policy.shapes import Shape
from conductor_cli.policy.step_head import Plan, StepWeights, plan
from conductor_cli.train.head import CV_MARGIN, GENERATIONS, search

# The gates' evolution step size, as a share of the regressions' spread: they start from a
# good ranking within each role, and larger steps only scatter it.
SIGMA = 0.1
# Whom checks and joins start from, at each question: checks of the FIRSTS workers best alone,
# joins of two of the PAIRS_OF best (one spare each: the estimates of workers nearly tied alone
# are noise). The search buys only these (beyond_drafts); the regressions score each checker
# and judge on them.
FIRSTS = 2
PAIRS_OF = 3
# The regressions' penalty, as a share of the inputs' mean variance (head.ridge's).
RIDGE = 1e-2


@dataclass(frozen=True)
class ShapeIndex:
    """Where each shape the policy can make sits among the table's columns (-1: absent)."""

    single: np.ndarray  # (n,)
    chain: np.ndarray  # (n, n): first, checker
    join: np.ndarray  # (n, n, n): lower, higher (pool order), judge
    moves: int

    @classmethod
    def of(cls, shapes: Sequence[Shape], workers: Sequence[str]) -> ShapeIndex:
        at = {w: i for i, w in enumerate(workers)}
        n = len(workers)
        single = np.full(n, -1)
        chain = np.full((n, n), -1)
        join = np.full((n, n, n), -1)
        for s, shape in enumerate(shapes):
            ix = tuple(at[w] for w in shape.workers)
            if shape.sees == ((),):
                single[ix] = s
            elif shape.sees == ((), (0,)):
                chain[ix] = s
            elif shape.sees == ((), (), (0, 1)):
                join[ix] = s
        if (single < 0).any():
            raise ValueError("the step policy needs every worker's single shape")
        moves = 3 if (join >= 0).any() else 2 if (chain >= 0).any() else 1
        return cls(single, chain, join, moves)

    def columns(self, p: Plan) -> np.ndarray:
        """The table column of each row's plan; a plan the table lacks scores as its first
        step alone (it cannot arise from shapes.candidate lists, which hold every one)."""
        lo = np.minimum(p.first, p.second)
        hi = np.maximum(p.first, p.second)
        cols = np.select(
            [p.move == 0, p.move == 1],
            [self.single[p.first], self.chain[p.first, p.checker]],
            self.join[lo, hi, p.judge],
        )
        return np.where(cols >= 0, cols, self.single[p.first])


def fit_steps(
    inputs: np.ndarray,
    rewards: np.ndarray,
    shapes: Sequence[Shape],
    workers: Sequence[str],
    *,
    seed: int,
    generations: int = GENERATIONS,
    on_generation: Any = None,
) -> tuple[StepWeights, int]:
    """(weights, open moves) maximizing the mean reward of the shapes `plan` makes on (N, k + 1)
    `inputs`, from the (N, S) `rewards` of `shapes` (measured, or estimated where not)."""
    index = ShapeIndex.of(shapes, workers)
    width = inputs.shape[1]

    def fit(rows: np.ndarray, evolve: bool, report: Any = None) -> StepWeights:
        start = regressions(inputs[rows], rewards[rows], index)
        if not evolve:
            return start

        def pick(gates: np.ndarray, x: np.ndarray) -> np.ndarray:
            w = replace(start, gates=gates.reshape(3, width))
            return index.columns(plan(x, w, index.moves))

        # Only the gates evolve (3(k + 1) weights, whatever the pool): the regressions rank the
        # workers within each role; what they predict less well is how the roles compare.
        sigma = SIGMA * (float(start.flat().std()) or 1.0)
        gates = search(
            start.gates.ravel(), pick, inputs[rows], rewards[rows], seed, generations, report,
            sigma=sigma,
        )  # fmt: skip
        return replace(start, gates=gates.reshape(3, width))

    def score(w: StepWeights, rows: np.ndarray) -> float:
        return float(rewards[rows, index.columns(plan(inputs[rows], w, index.moves))].mean())

    evolve = True
    count = inputs.shape[0]
    if count >= 4:
        order = np.random.default_rng(seed).permutation(count)
        folds = (order[: count // 2], order[count // 2 :])
        cv = {e: sum(score(fit(folds[1 - f], e), folds[f]) for f in (0, 1)) for e in (False, True)}
        evolve = cv[True] > cv[False] + 2 * CV_MARGIN
    return fit(np.arange(count), evolve, on_generation), index.moves


def regressions(inputs: np.ndarray, rewards: np.ndarray, index: ShapeIndex) -> StepWeights:
    """Each worker's vectors as ridge regressions of its rewards in each role on the inputs: as
    the one who answers, its runs alone; as the checker, its best check of the two best alone
    at that question; as the judge, its best join of two of the best three (what the search
    buys: beyond_drafts). The best, not the first: between workers nearly tied alone, which
    one the table puts first is noise, and a judge must not be scored on the pairs it never
    saw. The gates start at zero: each move's score is then its predicted reward."""
    x = inputs
    answer = regress(x, rewards[:, index.single])
    checks, joins = _drafts(index, rewards[:, index.single])
    none = np.zeros_like(answer)  # a move that is not open: plan never takes it
    check = _best(x, rewards, checks) if index.moves >= 2 else none
    judge = _best(x, rewards, joins) if index.moves >= 3 else none
    return StepWeights(answer, check, judge, np.zeros((3, x.shape[1])))


def _drafts(index: ShapeIndex, answers: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The checks and the joins each question may start from, by `answers` (N, n), each best
    alone first: lists of (N, n) table columns, one entry a worker as the checker or judge
    (-1 where the table lacks the shape)."""
    order = np.argsort(-answers, axis=1, kind="stable")
    checks = [index.chain[order[:, i]] for i in range(min(FIRSTS, order.shape[1]))]
    top = order[:, :PAIRS_OF]
    joins = [
        index.join[np.minimum(top[:, i], top[:, j]), np.maximum(top[:, i], top[:, j])]
        for i in range(top.shape[1])
        for j in range(i + 1, top.shape[1])
    ]
    return checks, joins


def _best(x: np.ndarray, rewards: np.ndarray, options: list[np.ndarray]) -> np.ndarray:
    """(n, k + 1): a regression of each worker's best reward over `options`, each (N, n) table
    columns of the shapes it could be in at each question; -1 (a shape the table lacks) counts
    as the lowest reward in it."""
    rows = np.arange(x.shape[0])[:, None]
    floor = rewards.min()
    values = [np.where(c >= 0, rewards[rows, np.maximum(c, 0)], floor) for c in options]
    return regress(x, np.max(values, axis=0))


def regress(x: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(T, k + 1): a ridge regression of each of the (N, T) `targets` on the (N, k + 1) inputs
    (column 0 the constant 1) with the intercept not shrunk: the roles' predictions are
    compared with each other, so their level must be the data's (head.ridge shrinks the
    intercept, which an argmax within one role forgives). The penalty is head.ridge's, on the
    PCA's own scale: the minor components, mostly noise, stay small."""
    z = x[:, 1:]
    mean = z.mean(axis=0)
    zc = z - mean
    level = targets.mean(axis=0)
    gram = zc.T @ zc
    # A floor: questions whose inputs are all alike leave nothing to fit but the level.
    scale = max(float(np.trace(gram)) / max(1, gram.shape[0]), 1e-9)
    penalty = RIDGE * scale * np.eye(gram.shape[0])
    slopes = np.linalg.solve(gram + penalty, zc.T @ (targets - level))
    return np.vstack([level - mean @ slopes, slopes]).T


def beyond_drafts(index: ShapeIndex, answers: np.ndarray, shapes: int) -> np.ndarray:
    """(N, S) True where a chain or a join starts from answers the policy would not take at
    that question (by `answers` (N, n), each worker's estimate alone): the search buys only the
    checks and joins of FIRSTS and PAIRS_OF. A helper that is poor alone but a good first
    draft for another is not found this way (docs/train.md)."""
    count = answers.shape[0]
    closed = np.zeros((count, shapes), dtype=bool)
    closed[:, index.chain[index.chain >= 0]] = True
    closed[:, index.join[index.join >= 0]] = True
    checks, joins = _drafts(index, answers)
    rows = np.broadcast_to(np.arange(count)[:, None], (count, len(index.single)))
    for cols in checks + joins:
        there = cols >= 0
        closed[rows[there], cols[there]] = False
    return closed
