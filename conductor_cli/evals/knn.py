"""`knn-router`: the strong lookup table (the Avengers recipe, arXiv 2505.19797), no categories.

Each problem's question is embedded with llama.cpp from the conductor's own GGUF; for a
problem in one half of the dataset (`strategies.fold_of`), the other half's questions are
clustered with k-means, the problem joins the nearest centroid, and the worker whose `single:`
results are best within that cluster answers it (its stored result is taken: nothing is
called). A problem's own result never trains its own choice.

Embedding: the final hidden state mean-pooled over the question's tokens, L2-normalized.
SmolLM2 is a causal LM, not an embedding model: its last token's state is mostly about what
comes next, and where questions end alike it is about their endings. Measured with the
embedded SmolLM2-135M on 32 short questions in 4 topics (geography, arithmetic, code,
biology): as bare questions both poolings do about as well (nearest neighbour in the same
topic 30/32 mean, 32/32 last; k-means with k=4 puts 27/32 and 25/32 in their topic's
cluster), but with four choices after each question, as an mcq dataset writes them, the last
token falls to chance (12/32 and 13/32) while the mean holds (30/32 and 31/32). Only the
question is embedded: the fixed instructions the datasets add around it are cut off (the same
for every problem, they would pull every vector the same way).

k (clusters per half): `Settings.knn_clusters`, else round(sqrt(n / 2)) for the n problems
of the other half (the usual rule of thumb: about sqrt(2n) problems a cluster, enough to rank
workers), at most 64 (the Avengers' own number). k-means is numpy's: k-means++ starts seeded
by `Settings.seed`, 4 restarts, the lowest inertia kept, so the same seed gives the same
clusters. Embeddings are not stored on disk: all the questions go through the model in a few
batched decodes (about the cost of reading them once as a prompt), and a correct cache would
have to be keyed by the model file and every text for little gain.

numpy and llama_cpp are imported here only, and this module only when knn-router is asked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from conductor_cli.config.settings import Config
from conductor_cli.errors import ModelError
from conductor_cli.evals.records import Problem, Result
from conductor_cli.evals.strategies import KNN, KNN_VOTE, Derivation, fold_of, voters
from conductor_cli.problems import bare_question

MAX_CLUSTERS = 64
RESTARTS = 4
MAX_ITERATIONS = 100
# Tokens embedded per question: longer questions are cut (a HumanEval prompt is a few hundred).
EMBED_TOKENS = 2048


# --- embeddings --------------------------------------------------------------------------------


def embedding_gguf(config: Config) -> Path:
    """The GGUF whose hidden states embed the questions: the conductor's own (a trained
    conductor's base model); the catalog's default model when the conductor is remote."""
    from conductor_cli.models.catalog import load_catalog, resolve_gguf
    from conductor_cli.policy.conductor import conductor_base

    spec = conductor_base(config)
    catalog = load_catalog()
    # A served conductor has no hidden states to read here: the embedded default model
    # (SmolLM2-135M, the same the local conductor would be) embeds the questions.
    name = spec.name if spec.local else catalog.default
    return resolve_gguf(name, catalog, "conductor.model (knn-router)").path


def question_text(problem: Problem) -> str:
    """The question alone, without the instructions the dataset loader wrapped it in."""
    if problem.prompt:  # a code problem's prompt (its signature and docstring)
        return problem.prompt
    return bare_question(problem.question)


def embed(model: Path, texts: Sequence[str], *, n_threads: int = 0) -> np.ndarray:
    """One L2-normalized, mean-pooled final hidden state per text (rows, float64), read as
    policy/features.py reads the planning prompt's (backends/hidden_states.py)."""
    from conductor_cli.backends.hidden_states import HiddenStates

    states = HiddenStates(model, n_ctx=EMBED_TOKENS, n_batch=EMBED_TOKENS, n_threads=n_threads)
    try:
        return states.unit_means(texts, EMBED_TOKENS)
    except (RuntimeError, ValueError) as e:
        raise ModelError(f"llama.cpp could not embed the questions with {model} ({e})") from None
    finally:
        states.close()


def embed_problems(config: Config, problems: Sequence[Problem]) -> np.ndarray:
    if not problems:
        return np.zeros((0, 1))
    return embed(
        embedding_gguf(config),
        [question_text(p) for p in problems],
        n_threads=config.conductor.n_threads,
    )


# --- k-means -----------------------------------------------------------------------------------


def cluster_count(n: int, requested: int | None = None) -> int:
    """Clusters for n training problems: `requested`, else round(sqrt(n / 2)), in 1..n."""
    k = requested if requested is not None else min(MAX_CLUSTERS, round(math.sqrt(n / 2)))
    return max(1, min(n, k))


def _sq_distances(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    d = (x * x).sum(1)[:, None] - 2.0 * x @ centroids.T + (centroids * centroids).sum(1)[None, :]
    return np.maximum(d, 0.0)


def _plus_plus(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ starting centroids: each next one drawn with probability ~ squared distance."""
    chosen = [int(rng.integers(len(x)))]
    nearest = _sq_distances(x, x[chosen])[:, 0]
    for _ in range(1, k):
        total = nearest.sum()
        i = int(rng.choice(len(x), p=nearest / total)) if total > 0 else int(rng.integers(len(x)))
        chosen.append(i)
        nearest = np.minimum(nearest, _sq_distances(x, x[[i]])[:, 0])
    return x[chosen].copy()


def kmeans(x: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(centroids k x d, label per row): Lloyd's algorithm from seeded k-means++ starts, the
    lowest-inertia of RESTARTS runs. A centroid that loses every member stays where it was."""
    rng = np.random.default_rng(seed)
    k = max(1, min(k, len(x)))
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for _ in range(RESTARTS):
        centroids = _plus_plus(x, k, rng)
        for _ in range(MAX_ITERATIONS):
            labels = _sq_distances(x, centroids).argmin(1)
            moved = centroids.copy()
            for j in range(k):
                members = x[labels == j]
                if len(members):
                    moved[j] = members.mean(0)
            if np.allclose(moved, centroids, rtol=0.0, atol=1e-10):
                break
            centroids = moved
        d = _sq_distances(x, centroids)
        labels = d.argmin(1)
        inertia = float(d[np.arange(len(x)), labels].sum())
        if best is None or inertia < best[0] - 1e-12:
            best = (inertia, centroids, labels)
    assert best is not None
    return best[1], best[2]


# --- the router --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    worker: str
    cluster: int  # the nearest centroid among the other half's clusters
    clusters: int  # k for the other half
    trained_on: int  # problems the choice was learned from
    table: str  # "cluster", or "all" when the cluster held no problem


def route(
    problems: Sequence[Problem],
    embeddings: np.ndarray,
    singles: Mapping[tuple[str, str], Result],
    workers: Sequence[str],
    seed: int,
    clusters: int | None = None,
) -> dict[str, Choice]:
    """Per problem id, the worker the other half's nearest cluster says is best.

    Each half is clustered once (k-means seeded by `seed`); a problem of one half is placed
    among the other half's clusters. Ties go to the worker listed first in the config.
    """
    folds = np.array([fold_of(p.id, seed) for p in problems])
    choices: dict[str, Choice] = {}
    for fold in (0, 1):
        train = np.flatnonzero(folds != fold)
        test = np.flatnonzero(folds == fold)
        if len(test) == 0:
            continue
        train_problems = [problems[i] for i in train]
        if len(train) == 0:  # everything in one half: nothing to learn from
            centroids = np.zeros((1, embeddings.shape[1]))
            labels = np.zeros(0, dtype=int)
        else:
            k = cluster_count(len(train), clusters)
            centroids, labels = kmeans(embeddings[train], k, seed)
        nearest = _sq_distances(embeddings[test], centroids).argmin(1)
        for i, c in zip(test, nearest, strict=True):
            members = [q for q, label in zip(train_problems, labels, strict=True) if label == c]
            pool = members or train_problems

            def score(w: str, pool: Sequence[Problem] = pool) -> int:
                return sum(
                    1
                    for q in pool
                    if (r := singles.get((f"single:{w}", q.id))) is not None and r.correct
                )

            chosen = max(workers, key=lambda w: (score(w), -workers.index(w)))
            choices[problems[i].id] = Choice(
                worker=chosen,
                cluster=int(c),
                clusters=len(centroids),
                trained_on=len(pool),
                table="cluster" if members else "all",
            )
    return choices


def knn_router_results(
    strategy: str,
    problems: Sequence[Problem],
    choices: Mapping[str, Choice],
    stored: Mapping[tuple[str, str], Result],
) -> list[Result]:
    """`knn-router`: the chosen worker's `single:` result; `knn-router:vote`: its `vote:`."""
    kind = "vote" if strategy == KNN_VOTE else "single"
    assert strategy in (KNN, KNN_VOTE), strategy
    out = []
    for p in problems:
        choice = choices[p.id]
        base = stored[(f"{kind}:{choice.worker}", p.id)]
        out.append(
            replace(
                base,
                strategy=strategy,
                detail={
                    **({"votes": base.detail["votes"]} if "votes" in base.detail else {}),
                    "worker": choice.worker,
                    "cluster": choice.cluster,
                    "clusters": choice.clusters,
                    "table": choice.table,
                    "trained_on": choice.trained_on,
                },
            )
        )
    return out


def derive(d: Derivation, strategy: str) -> list[Result]:
    """`knn-router` and `knn-router:vote` (evals/strategies.STRATEGY_KINDS): the clusters and
    picks made once for both (kept in `d.shared`), then each one's results."""
    if "knn" not in d.shared:
        embeddings = embed_problems(d.config, d.problems)
        d.shared["knn"] = route(
            d.problems, embeddings, d.singles, d.workers, d.settings.seed, d.settings.knn_clusters
        )
    results = d.singles
    if strategy == KNN_VOTE:
        voting = set(voters(d.config))  # a tool's vote is its single result
        results = {
            (f"vote:{w}", p.id): r
            for w in d.workers
            for p in d.problems
            if (r := d.stored(f"{'vote' if w in voting else 'single'}:{w}", p.id)) is not None
        }
    return knn_router_results(strategy, d.problems, d.shared["knn"], results)
