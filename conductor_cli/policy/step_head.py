"""A trained step-by-step policy over workers as vectors (`conductor train --policy steps`;
train/step_fit.py learns it): each worker scores as the one who answers, the one who checks
and the judge of two answers, and as what it gives when seen: the draft a checker reads, one of
the two inputs a judge reads (a tool or a partial worker, wrong alone, can be the best input);
three gates weigh the moves, and planning goes step by step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.policy.head import project, read_head
from conductor_cli.policy.shapes import Shape

MOVES = ("answer", "check", "join")
# What each step beyond the first must add to a move's score (in reward units, 0.5 for a wrong
# answer to 1 for a right one: 0.01 is 2 points of accuracy) before the plan takes it: a step
# that only ties costs a call for nothing. Larger margins lost the join kind on the eight-worker
# bench, whose join was estimated a few points over its best single worker: estimates of
# shapes measured on a few neighbours are pulled towards a wrong answer's reward.
STEP_MARGIN = 0.01


@dataclass(frozen=True)
class StepWeights:
    answer: np.ndarray  # (n, k + 1): each worker's score as the one who answers
    check: np.ndarray  # (n, k + 1): as the one who checks step 1 (sees it)
    judge: np.ndarray  # (n, k + 1): as the one who sees two independent answers
    gates: np.ndarray  # (3, k + 1): each move's score, shared by every worker
    # What a worker gives when seen (None: a head from before them, whose drafts and inputs
    # are its best answerers): as the draft a checker reads, as one of a judge's two inputs.
    draft: np.ndarray | None = None  # (n, k + 1)
    feed: np.ndarray | None = None  # (n, k + 1)

    def flat(self) -> np.ndarray:
        roles = (self.answer, self.check, self.judge, self.draft, self.feed)
        return np.concatenate([m.ravel() for m in roles if m is not None] + [self.gates.ravel()])

    @property
    def drafts(self) -> np.ndarray:
        return self.answer if self.draft is None else self.draft

    @property
    def feeds(self) -> np.ndarray:
        return self.answer if self.feed is None else self.feed


@dataclass(frozen=True)
class Plan:
    """Each row's choices, as indices into the workers (or the moves): who answers alone, the
    draft and its checker, the two inputs and their judge."""

    move: np.ndarray
    first: np.ndarray
    draft: np.ndarray
    checker: np.ndarray
    left: np.ndarray
    right: np.ndarray
    judge: np.ndarray


def plan(inputs: np.ndarray, w: StepWeights, moves: int) -> Plan:
    """Step by step for every row of (N, k + 1) inputs; `moves`: how many of MOVES are open
    (1: answer only; 2: or check; 3: or join)."""
    x = np.atleast_2d(inputs)
    answer = x @ w.answer.T
    first = np.argmax(answer, axis=1)
    draft = np.argmax(x @ w.drafts.T, axis=1)
    feeds = np.argsort(-(x @ w.feeds.T), axis=1, kind="stable")
    left = feeds[:, 0]
    right = feeds[:, 1] if feeds.shape[1] > 1 else left
    gates = x @ w.gates.T
    check = x @ w.check.T
    judge = x @ w.judge.T
    values = np.stack([answer.max(axis=1), check.max(axis=1), judge.max(axis=1)], axis=1)
    values = values + gates - STEP_MARGIN * np.arange(3)
    if answer.shape[1] < 2:
        moves = min(moves, 2)  # one worker cannot give two independent answers
    move = np.argmax(values[:, :moves], axis=1)
    checker, judged = np.argmax(check, axis=1), np.argmax(judge, axis=1)
    return Plan(move, first, draft, checker, left, right, judged)


def shape_of(p: Plan, row: int, workers: Sequence[str]) -> Shape:
    move = int(p.move[row])
    if move == 0:
        return Shape((workers[int(p.first[row])],), ((),))
    if move == 1:
        return Shape((workers[int(p.draft[row])], workers[int(p.checker[row])]), ((), (0,)))
    lo, hi = sorted((int(p.left[row]), int(p.right[row])))  # join_shapes' order: the pool's
    return Shape((workers[lo], workers[hi], workers[int(p.judge[row])]), ((), (), (0, 1)))


@dataclass(frozen=True)
class StepHead:
    mean: np.ndarray
    scale: np.ndarray
    components: np.ndarray
    workers: tuple[str, ...]
    weights: StepWeights
    moves: int

    def project(self, features: np.ndarray) -> np.ndarray:
        return project(self.mean, self.scale, self.components, features)

    def choose(self, features: np.ndarray) -> Shape:
        return shape_of(plan(self.project(features), self.weights, self.moves), 0, self.workers)

    @property
    def size(self) -> int:
        """Its weights (the PCA's aside): 5(k + 1) a worker, plus 3(k + 1)."""
        return int(self.weights.flat().size)

    def to_dict(self) -> dict[str, Any]:
        w = self.weights
        gives = {
            name: getattr(w, name).tolist()
            for name in ("draft", "feed")
            if getattr(w, name) is not None
        }
        return {
            "kind": "step-head",
            "pca_dims": int(self.components.shape[0]),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "components": self.components.tolist(),
            "workers": list(self.workers),
            "moves": list(MOVES[: self.moves]),
            "answer": w.answer.tolist(),
            "check": w.check.tolist(),
            "judge": w.judge.tolist(),
            **gives,
            "gates": w.gates.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepHead:
        def array(key: str) -> np.ndarray:
            return np.asarray(d[key], dtype=np.float64)

        workers = tuple(str(x) for x in d["workers"])
        gives = {name: array(name) for name in ("draft", "feed") if name in d}
        weights = StepWeights(
            array("answer"), array("check"), array("judge"), array("gates"), **gives
        )
        head = cls(
            array("mean"), array("scale"), array("components"), workers, weights, len(d["moves"])
        )
        k, dims = head.components.shape
        if head.mean.shape != (dims,) or head.scale.shape != (dims,):
            raise ValueError("mean and scale must match the components' width")
        for name in ("answer", "check", "judge", *gives):
            if getattr(weights, name).shape != (len(workers), k + 1):
                raise ValueError(f"{name} must be workers x (pca_dims + 1)")
        if weights.gates.shape != (3, k + 1) or not 1 <= head.moves <= 3:
            raise ValueError("gates must be 3 x (pca_dims + 1), with 1 to 3 moves")
        return head

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict()), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> StepHead:
        return read_head(path, cls.from_dict)
