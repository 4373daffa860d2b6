"""The numpy copy of bench/prove_eight.py, on a SIMULATED reward table: the same adaptive search
(train/adaptive.py) and step policy (train/step_fit.py) on rewards drawn from the simulation's
probabilities, no model and no CLI, 0.3 s a seed, so that a change to the search or the policy
is measured on hundreds of trainings (docs/train.md's "numpy copy" figures).

Run: .venv/bin/python bench/prove_eight_numpy.py [--seeds 200] [--start 0] [--partial]
     [--per-question 19] [--json]

The pool is the CLI bench's, as probabilities: four specialist kinds (w0..w3 right 95 % on
theirs), chain (`w0 > w3<0` 95 %, w0 alone 50 %), join (`w1 > w2 > w5<0,1` 95 %, w1 and w2
alone 50 %); with --partial, pcheck (`w7 > w3<0` 90 %, every worker alone at most 30 %) and
pjoin (`w6 > w7 > w5<0,1` 90 %, w6 and w7 alone 5 %). 160 training questions, each a point
near its kind's centre in 16 dimensions (the conductor's hidden state, simulated); a check
costs one call and a join two, as the CLI prices them once the single runs are cached. The
policy is scored on 600 held-out questions by the probability of its plan being right.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import numpy as np

from conductor_cli.policy.shapes import Shape
from conductor_cli.policy.step_head import plan, shape_of
from conductor_cli.train.adaptive import search
from conductor_cli.train.explore import Observations, estimates, neighbours
from conductor_cli.train.head_method import candidate_shapes
from conductor_cli.train.step_fit import ShapeIndex, fit_steps

KINDS = ["arith", "words", "geo", "logic", "chain", "join"]
PARTIAL_KINDS = ["pcheck", "pjoin"]
SPECIALIST = {"arith": "w0", "words": "w1", "geo": "w2", "logic": "w3"}
# The composition each multi-step kind was built around (found: measured 5 times or more).
MADE_FOR = {
    "chain": "w0 > w3<0",
    "join": "w1 > w2 > w5<0,1",
    "pcheck": "w7 > w3<0",
    "pjoin": "w6 > w7 > w5<0,1",
}
WORKERS = [f"w{i}" for i in range(8)]


def alone(worker: str, kind: str) -> float:
    if kind in SPECIALIST:
        if worker in ("w0", "w1", "w2", "w3"):
            return 0.95 if SPECIALIST[kind] == worker else 0.2
        return {"w4": 0.6, "w5": 0.2, "w6": 0.1, "w7": 0.4}[worker]
    if kind == "chain":
        return {"w0": 0.5, "w4": 0.2, "w6": 0.1}.get(worker, 0.1)
    if kind == "join":
        return {"w1": 0.5, "w2": 0.5, "w4": 0.2, "w5": 0.1, "w6": 0.1, "w7": 0.15}.get(worker, 0.15)
    return {"w7": 0.05, "w6": 0.05, "w4": 0.3}.get(worker, 0.15)  # pcheck, pjoin


def right(shape: Shape, kind: str) -> float:
    """P(right) of a shape on a kind: its last step's, helped only by what it was built on."""
    last = shape.workers[-1]
    seen = {shape.workers[i] for i in shape.sees[-1]}
    if kind == "chain" and last == "w3" and "w0" in seen:
        return 0.95
    if kind == "join" and last == "w5" and {"w1", "w2"} <= seen:
        return 0.95
    if kind == "pcheck" and last == "w3" and "w7" in seen:
        return 0.9
    if kind == "pjoin" and last == "w5" and {"w6", "w7"} <= seen:
        return 0.9
    return alone(last, kind)


def train_and_score(
    seed: int, kinds: list[str], per_question: float, n: int = 160, held: int = 600
) -> dict:
    """One training: the search within `per_question` calls a training question, the policy
    fitted on the estimated table, its held-out score overall and per kind, and how often each
    kind's composition was measured (runs, right runs) on that kind's training questions."""
    rng = np.random.default_rng(seed)
    draw = np.random.default_rng(seed + 7777)  # the runs' outcomes, apart from the search's
    shapes = candidate_shapes(WORKERS, 3, "adaptive", "steps")
    index = ShapeIndex.of(shapes, WORKERS)
    centres = rng.normal(size=(len(kinds), 16)) * 2
    kind = rng.integers(0, len(kinds), n)
    x = np.hstack([np.ones((n, 1)), centres[kind] + 0.5 * rng.normal(size=(n, 16))])
    p = np.array([[right(s, kinds[k]) for s in shapes] for k in kind])
    obs = Observations.empty(n, len(shapes))
    spent = [0]

    def measure(jobs: list[tuple[int, int]]) -> None:
        for q, s in jobs:
            obs.add(q, s, 1.0 if draw.random() < p[q, s] else 0.5)
            spent[0] += 1

    measure([(q, int(s)) for q in range(n) for s in index.single])
    near = neighbours(x)
    limit = int(per_question * n)
    calls = [0 if s in set(index.single.tolist()) else len(shape.workers) - 1
             for s, shape in enumerate(shapes)]  # fmt: skip
    used = search(
        obs, near, calls, lambda: limit - spent[0], measure, lambda: spent[0] >= limit, rng,
        max(16, n // 4), np.zeros((n, len(shapes)), dtype=bool), index, floor=0.5,
    )  # fmt: skip
    labels = [s.label for s in shapes]
    measured = {}
    for k, label in MADE_FOR.items():
        if k in kinds:
            rows = [q for q in range(n) if kinds[kind[q]] == k]
            col = labels.index(label)
            measured[k] = (int(obs.counts[rows, col].sum()), int((obs.sums[rows, col] >= 1).sum()))
    table = estimates(obs, near, 0.5)
    steps = np.array([len(s.workers) for s in shapes])
    weights, moves = fit_steps(
        x, table - 0.001 * steps, shapes, WORKERS, seed=seed, generations=40,
        support=obs.counts[near].sum(axis=1),
    )  # fmt: skip
    held_kind = rng.integers(0, len(kinds), held)
    hx = np.hstack([np.ones((held, 1)), centres[held_kind] + 0.5 * rng.normal(size=(held, 16))])
    planned = plan(hx, weights, moves)
    score: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for row, k in enumerate(held_kind):
        score[kinds[k]] += right(shape_of(planned, row, WORKERS), kinds[k])
        count[kinds[k]] += 1
    return {
        "seed": seed,
        "overall": sum(score.values()) / held,
        "by_kind": {k: score[k] / count[k] for k in kinds},
        "measured": measured,
        "explore_calls": used.explore_calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--partial", action="store_true", help="add pcheck and pjoin")
    parser.add_argument("--per-question", type=float, default=19.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kinds = KINDS + (PARTIAL_KINDS if args.partial else [])
    runs = [train_and_score(s, kinds, args.per_question)
            for s in range(args.start, args.start + args.seeds)]  # fmt: skip
    summary = {
        "simulation": "numpy reward table (bench/prove_eight_numpy.py)",
        "seeds": [args.start, args.start + args.seeds],
        "per_question": args.per_question,
        "overall": round(float(np.mean([r["overall"] for r in runs])), 4),
        "by_kind": {k: round(float(np.mean([r["by_kind"][k] for r in runs])), 3) for k in kinds},
        "found": {k: sum(r["measured"][k][0] >= 5 for r in runs) for k in MADE_FOR if k in kinds},
        "per_seed": [round(r["overall"], 4) for r in runs],
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(f"simulated (numpy), {args.seeds} trainings from seed {args.start}, "
          f"{args.per_question:g} calls a training question")  # fmt: skip
    print(f"held out: {summary['overall']:.3f}  " +
          "  ".join(f"{k} {v:.2f}" for k, v in summary["by_kind"].items()))  # fmt: skip
    print("composition found (measured 5+ times) in: " +
          ", ".join(f"{k} {v}/{args.seeds}" for k, v in summary["found"].items()))  # fmt: skip


if __name__ == "__main__":
    main()
