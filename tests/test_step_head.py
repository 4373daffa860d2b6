"""The step policy (train/step_head.py) on reward tables made from a simulation's
probabilities: pure numpy, no model. The end-to-end check on the simulated pool is in
tests/test_train_budget.py."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from conductor_cli.policy.head import project
from conductor_cli.policy.shapes import Shape
from conductor_cli.policy.step_head import StepHead, plan, shape_of
from conductor_cli.train.head import fit_pca
from conductor_cli.train.head_method import candidate_shapes, resolve_policy
from conductor_cli.train.step_head import ShapeIndex, beyond_drafts, fit_steps, regress

KINDS = ["arith", "words", "geo", "logic", "chain", "join"]
SPECIALIST = {"arith": "w0", "words": "w1", "geo": "w2", "logic": "w3"}


def right(shape: Shape, kind: str) -> float:
    """P(right) of a shape's last step, as in bench/prove_eight.py's simulation: w3 checking
    w0 solves chain, w5 seeing w1 and w2 solves join."""
    last = shape.workers[-1]
    seen = {shape.workers[i] for i in shape.sees[-1]}
    if kind == "chain" and last == "w3" and "w0" in seen:
        return 0.95
    if kind == "join" and last == "w5" and {"w1", "w2"} <= seen:
        return 0.95
    if kind in SPECIALIST:
        return 0.95 if SPECIALIST[kind] == last else 0.2
    if kind == "chain":
        return 0.5 if last == "w0" else 0.1
    return 0.5 if last in ("w1", "w2") else 0.15


def last(label: str) -> str:
    return label.split(" > ")[-1].split("<")[0]


def questions(rng: np.random.Generator, centres: np.ndarray, count: int):
    kinds = rng.integers(0, len(KINDS), count)
    x = centres[kinds] + 0.5 * rng.normal(size=(count, centres.shape[1]))
    return kinds, np.hstack([np.ones((count, 1)), x])


def test_eight_workers_are_planned_step_by_step_from_measured_rewards() -> None:
    workers = [f"w{i}" for i in range(8)]
    shapes = candidate_shapes(workers, 3, "adaptive", "steps")
    assert len(shapes) == 8 + 64 + 8 * 28  # singles, checks, joins
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(len(KINDS), 16)) * 2
    kinds, x = questions(rng, centres, 160)
    # Every shape's expected reward, less a hair a step: the table of a training that measured
    # every shape many times (one run each is noisier than the 0.05 a step must add, and a
    # simple question then gets a check it does not need).
    steps = np.array([len(s.workers) for s in shapes])
    table = np.array([[right(s, KINDS[k]) for s in shapes] for k in kinds]) - 0.001 * steps
    weights, moves = fit_steps(x, table, shapes, workers, seed=0, generations=30)
    assert moves == 3
    held_kinds, held = questions(rng, centres, 300)
    p = plan(held, weights, moves)
    chosen: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    for row, k in enumerate(held_kinds):
        chosen[KINDS[k]][shape_of(p, row, workers).label] += 1
    for kind, counts in chosen.items():
        total = sum(counts.values())
        if kind in SPECIALIST:  # mostly alone, and its answer is the one given
            assert counts.most_common(1)[0][0] == SPECIALIST[kind], (kind, counts)
            ends = sum(c for label, c in counts.items() if last(label) == SPECIALIST[kind])
            assert ends >= 0.9 * total, (kind, counts)
    for kind, shape in (("chain", "w0 > w3<0"), ("join", "w1 > w2 > w5<0,1")):
        assert chosen[kind][shape] >= 0.8 * sum(chosen[kind].values()), chosen[kind]


def test_the_policy_grows_linearly_with_the_pool_and_reads_back() -> None:
    rng = np.random.default_rng(1)
    sizes = {}
    for n in (4, 8, 16):
        workers = [f"w{i}" for i in range(n)]
        shapes = candidate_shapes(workers, 3, "adaptive", "steps")
        x = np.hstack([np.ones((40, 1)), rng.normal(size=(40, 6))])
        table = rng.random((40, len(shapes)))
        weights, moves = fit_steps(x, table, shapes, workers, seed=0, generations=3)
        head = StepHead(np.zeros(6), np.ones(6), np.eye(6), tuple(workers), weights, moves)
        sizes[n] = head.size
        again = StepHead.from_dict(head.to_dict())
        features = rng.normal(size=(5, 6))
        assert [again.choose(f) for f in features] == [head.choose(f) for f in features]
        assert again.workers == tuple(workers)
    # 3(k + 1) a worker plus 3(k + 1), where the shape head has one column a shape
    assert sizes == {n: 3 * 7 * (n + 1) for n in (4, 8, 16)}


def test_the_search_buys_checks_of_the_best_two_and_joins_of_the_best_three() -> None:
    workers = [f"w{i}" for i in range(5)]
    shapes = candidate_shapes(workers, 3, "adaptive", "steps")
    index = ShapeIndex.of(shapes, workers)
    answers = np.array([[0.1, 0.9, 0.2, 0.8, 0.7]])  # best: w1, w3, then w4
    closed = beyond_drafts(index, answers, len(shapes))[0]
    open_ = {shapes[s].label for s in range(len(shapes)) if not closed[s]}
    checks = {label for label in open_ if label.count(">") == 1}
    joins = {label for label in open_ if label.count(">") == 2}
    assert checks == {f"{a} > {b}<0" for a in ("w1", "w3") for b in workers}
    pairs = {("w1", "w3"), ("w1", "w4"), ("w3", "w4")}
    assert joins == {f"{a} > {b} > {c}<0,1" for a, b in pairs for c in workers}
    assert all(not closed[s] for s in range(5))  # every worker alone stays open


def test_auto_takes_the_step_policy_only_beyond_the_shape_head() -> None:
    four = [f"w{i}" for i in range(4)]
    eight = [f"w{i}" for i in range(8)]
    assert resolve_policy(four, 3, "adaptive", "auto") == "shapes"
    assert resolve_policy(eight, 3, "adaptive", "auto") == "steps"
    assert resolve_policy(eight, 2, "adaptive", "auto") == "steps"
    with pytest.raises(Exception, match="--policy steps"):
        candidate_shapes(eight, 3, "adaptive", "shapes")


def test_the_regressions_keep_the_level_and_survive_questions_all_alike() -> None:
    rng = np.random.default_rng(2)
    x = np.hstack([np.ones((50, 1)), rng.normal(size=(50, 4)) * [10.0, 1.0, 0.1, 0.01]])
    y = np.stack([0.5 + 0.04 * x[:, 1], np.full(50, 0.75)], axis=1)
    w = regress(x, y)
    # The intercept is not shrunk: a constant target is predicted at its level exactly.
    assert np.allclose(x @ w[1], 0.75)
    assert abs((x @ w[0]).mean() - y[:, 0].mean()) < 1e-9
    same = np.ones((2, 5))  # two questions with one text: nothing to fit but the level
    mean, scale, components = fit_pca(same, 16)
    flat = regress(project(mean, scale, components, same), np.array([[0.5, 1.0], [1.0, 1.0]]))
    assert np.allclose(flat[:, 1:], 0.0) and np.allclose(flat[:, 0], [0.75, 1.0])


def test_either_head_loads_from_one_reader_and_a_bad_file_is_one_line(tmp_path) -> None:
    from conductor_cli.errors import ModelError
    from conductor_cli.policy.chooser import load_head

    workers = ("w0", "w1")
    shapes = candidate_shapes(list(workers), 3, "adaptive", "steps")
    x = np.hstack([np.ones((8, 1)), np.random.default_rng(4).normal(size=(8, 3))])
    weights, moves = fit_steps(x, np.random.default_rng(5).random((8, len(shapes))), shapes,
                               list(workers), seed=0, generations=2)  # fmt: skip
    path = tmp_path / "head.json"
    StepHead(np.zeros(3), np.ones(3), np.eye(3), workers, weights, moves).save(path)
    assert isinstance(load_head(path), StepHead)
    for text in ("not json", "[1, 2]", '{"kind": "step-head"}', '{"shapes": []}'):
        path.write_text(text)
        with pytest.raises(ModelError, match="not a readable trained head"):
            load_head(path)
