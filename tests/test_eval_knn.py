"""`knn-router`: question embeddings from the embedded GGUF (real llama.cpp), seeded k-means,
cross-fitted per-cluster picks, on a simulated pool of specialists with no category field."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.errors import InputError
from conductor_cli.evals import knn
from conductor_cli.evals.datasets import load_dataset
from conductor_cli.evals.pairs import run_eval
from conductor_cli.evals.records import Problem, Result
from conductor_cli.evals.store import ResultStore
from conductor_cli.evals.strategies import Settings, base_strategies, fold_of, parse_strategies
from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions

from .conftest import REPO

KINDS = ["arith", "words", "geo"]
# One specialist per kind, weak elsewhere: one worker for everything (router) gets about 37%.
SKILLS = {
    "w0": {"arith": 0.9, "words": 0.1, "geo": 0.1},
    "w1": {"arith": 0.1, "words": 0.9, "geo": 0.1},
    "w2": {"arith": 0.1, "words": 0.1, "geo": 0.9},
}
SPECIALIST = {"arith": "w0", "words": "w1", "geo": "w2"}


@pytest.fixture
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(make_questions(KINDS, 14), SKILLS)  # 42 questions
    yield sim
    sim.close()


def test_knn_router_finds_the_specialists_without_categories(
    simulation: SimulatedPool, tmp_path: Path, gguf_path: Path
) -> None:
    config_path, data = simulation.files(tmp_path)
    config = load_config(config_path)
    problems = load_dataset("qa", data, "exact")
    assert all(p.category is None for p in problems)
    kind = {f"q{n}": q.kind for n, q in simulation.questions.items()}
    strategies = parse_strategies("single,router,knn-router", config)
    store = ResultStore(tmp_path / "r.jsonl", {"test": "knn"})
    run = run_eval(
        problems,
        strategies,
        config,
        store,
        dataset="qa",
        settings=Settings(seed=0),
        concurrency=4,
    )
    by: dict[str, dict[str, Result]] = defaultdict(dict)
    for r in run.results:
        by[r.strategy][r.problem_id] = r
    n = len(problems)
    assert all(len(rs) == n for rs in by.values()), {s: len(rs) for s, rs in by.items()}

    def accuracy(strategy: str) -> float:
        return sum(r.correct for r in by[strategy].values()) / n

    # The best single worker for each kind, read off the results themselves: the ceiling a
    # per-kind lookup table can reach.
    per_kind_best = 0
    for k in KINDS:
        ids = [p.id for p in problems if kind[p.id] == k]
        per_kind_best += max(sum(by[f"single:{w}"][i].correct for i in ids) for w in SKILLS)
    ceiling = per_kind_best / n
    assert accuracy("knn-router") >= accuracy("router") + 0.3, (
        accuracy("knn-router"),
        accuracy("router"),
    )
    assert accuracy("knn-router") >= ceiling - 0.1, (accuracy("knn-router"), ceiling)

    # The clusters separate the kinds: each kind's problems go to its specialist.
    for k in KINDS:
        picks = Counter(r.detail["worker"] for pid, r in by["knn-router"].items() if kind[pid] == k)
        assert picks[SPECIALIST[k]] >= 0.8 * sum(picks.values()), (k, picks)
    for pid, r in by["knn-router"].items():
        chosen = r.detail["worker"]
        assert r.detail["table"] == "cluster" and 0 < r.detail["trained_on"] < n
        other_half = sum(1 for p in problems if fold_of(p.id, 0) != fold_of(pid, 0))
        assert 0 <= r.detail["cluster"] < r.detail["clusters"] == knn.cluster_count(other_half)
        # It is that worker's stored single: result, relabelled, and it made no call of its own.
        single = by[f"single:{chosen}"][pid]
        assert (r.correct, r.answer, r.model_calls) == (single.correct, single.answer, 1)
    # Derived results are never stored: only the base strategies' rows are on disk.
    assert len(store) == n * len(SKILLS)


def _problems(n: int) -> list[Problem]:
    return [Problem(id=f"p{i}", kind="qa", question=f"question {i}", answer="x") for i in range(n)]


def _result(worker: str, pid: str, correct: bool) -> Result:
    return Result(f"single:{worker}", pid, None, correct, "x", "x", 1, 1, 0.0, 1, 0.1)


def test_a_problems_own_result_never_influences_its_own_choice() -> None:
    # Two tight groups of questions; in the training data both workers are right on everything
    # (a tie, so `a`, listed first, is chosen). Each problem's own result favours `b`: counted,
    # it would break the tie for `b`.
    problems = _problems(24)
    rng = np.random.default_rng(1)
    centers = np.eye(8)[:2]
    x = np.stack([centers[i % 2] + 0.01 * rng.standard_normal(8) for i in range(24)])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    workers = ["a", "b"]
    tied = {(f"single:{w}", p.id): _result(w, p.id, True) for w in workers for p in problems}
    for target in problems:
        leaky = dict(tied)
        leaky[("single:a", target.id)] = _result("a", target.id, False)
        choice = knn.route(problems, x, leaky, workers, seed=0)[target.id]
        assert choice.worker == "a", target.id
        assert choice.trained_on < len(problems)
    # The other half does decide: make `b` better on the other half's problems of p0's group
    # and p0 goes to `b`, while its own result (b wrong) changes nothing.
    p0 = problems[0]
    other = [p for p in problems[::2] if fold_of(p.id, 0) != fold_of(p0.id, 0)]
    assert other
    taught = dict(tied)
    for p in other:
        taught[("single:a", p.id)] = _result("a", p.id, False)
    taught[("single:b", p0.id)] = _result("b", p0.id, False)
    choice = knn.route(problems, x, taught, workers, seed=0)[p0.id]
    assert (choice.worker, choice.table) == ("b", "cluster")
    # Problems of the other group are not moved by what happened in p0's group.
    assert knn.route(problems, x, taught, workers, seed=0)["p1"].worker == "a"


def test_kmeans_is_deterministic_for_a_seed_and_finds_separated_groups() -> None:
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((4, 16)) * 5
    truth = np.repeat(np.arange(4), 10)
    x = centers[truth] + rng.standard_normal((40, 16)) * 0.3
    first = knn.kmeans(x, 4, seed=3)
    again = knn.kmeans(x, 4, seed=3)
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    # Each true group is one cluster, and each cluster one group.
    pairs = set(zip(truth.tolist(), first[1].tolist(), strict=True))
    assert len(pairs) == 4
    # More clusters than points: one point each.
    _, labels = knn.kmeans(x[:3], 8, seed=0)
    assert sorted(labels.tolist()) == [0, 1, 2]
    assert [knn.cluster_count(n) for n in (1, 2, 20, 50, 200, 100_000)] == [1, 1, 3, 5, 10, 64]
    assert knn.cluster_count(20, 4) == 4 and knn.cluster_count(3, 9) == 3


def test_embeddings_of_the_embedded_model_group_questions_by_topic(gguf_path: Path) -> None:
    # Five geography and five arithmetic questions: mean-pooled, normalized hidden states put
    # every question's nearest neighbour in its own topic.
    problems = load_dataset("mcq", REPO / "tests" / "data" / "mcq10.jsonl")
    assert knn.question_text(problems[0]) == (
        "What is the capital of France?\n\nA) London\nB) Paris\nC) Rome\nD) Berlin"
    )
    x = knn.embed(gguf_path, [knn.question_text(p) for p in problems])
    assert x.shape == (10, 576)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0)
    similarity = x @ x.T
    np.fill_diagonal(similarity, -np.inf)
    nearest = similarity.argmax(1)
    same = sum(problems[i].category == problems[j].category for i, j in enumerate(nearest))
    assert same == 10, same


def test_the_vote_variant_takes_the_chosen_workers_vote_result() -> None:
    problems = _problems(12)
    x = np.eye(12)[[i % 2 for i in range(12)]]  # two groups, one point each
    workers = ["a", "b"]
    # `b` is right on group 1, `a` on group 0.
    singles = {
        (f"single:{w}", p.id): _result(w, p.id, (i % 2 == 1) == (w == "b"))
        for w in workers
        for i, p in enumerate(problems)
    }
    votes = {
        (f"vote:{w}", p.id): replace(
            _result(w, p.id, True), strategy=f"vote:{w}", answer=f"{w}-vote", detail={"votes": 2}
        )
        for w in workers
        for p in problems
    }
    choices = knn.route(problems, x, singles, workers, seed=0)
    assert [choices[p.id].worker for p in problems] == ["a", "b"] * 6
    single = knn.knn_router_results("knn-router", problems, choices, singles)
    voted = knn.knn_router_results("knn-router:vote", problems, choices, votes)
    for p, s, v in zip(problems, single, voted, strict=True):
        w = choices[p.id].worker
        assert (s.strategy, s.answer, s.detail["worker"]) == ("knn-router", "x", w)
        assert (v.strategy, v.answer, v.detail["worker"]) == ("knn-router:vote", f"{w}-vote", w)
        assert v.detail["votes"] == 2


def test_strategy_names_errors_and_lazy_imports(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text(
        "[[workers]]\nname = 'a'\nmodel = 'openai/x'\n"
        "[[workers]]\nname = 'b'\nmodel = 'openai/y'\n",
        encoding="utf-8",
    )
    config = load_config(cfg_file)
    default = parse_strategies(None, config)
    assert default.index("knn-router") == default.index("router") + 1
    assert "knn-router:vote" in default
    assert base_strategies(default, config) == base_strategies(
        [s for s in default if not s.startswith("knn-router")], config
    )
    assert parse_strategies("knn-router, router", config) == ["knn-router", "router"]
    assert base_strategies(["knn-router"], config) == ["single:a", "single:b"]
    assert base_strategies(["knn-router:vote"], config) == [
        "single:a",
        "single:b",
        "vote:a",
        "vote:b",
    ]
    for bad in ("knn-router:a", "knn", "router:vote"):
        with pytest.raises(InputError, match=r"knn-router\[:vote\]") as e:
            parse_strategies(bad, config)
        assert "\n" not in str(e.value)
    # Start-up imports neither numpy nor llama.cpp: only computing knn-router does.
    probe = (
        "import sys\n"
        "from conductor_cli.cli.app import app\n"
        "from conductor_cli.evals import pairs, strategies\n"
        "print(json.dumps(['numpy' in sys.modules, 'llama_cpp' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + probe],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [False, False], out.stdout
