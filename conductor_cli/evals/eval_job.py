"""One eval from request to report: the dataset loaded and picked, its result store opened,
every strategy run (evals/pairs.py), the summaries and the `--json-out` meta made.

`open_eval` checks and prepares everything before any model runs (a caller with a progress
bar learns the number of runs there); `EvalSession.run` runs it. `evaluate` does both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.config.settings import Config, config_to_dict
from conductor_cli.errors import InputError
from conductor_cli.evals import report
from conductor_cli.evals.datasets import draw, fingerprint, load_dataset
from conductor_cli.evals.pairs import OnResult, run_eval
from conductor_cli.evals.records import Problem, Result
from conductor_cli.evals.store import ResultStore
from conductor_cli.evals.strategies import Settings, base_strategies, parse_strategies
from conductor_cli.storage.cache import CacheMode


@dataclass(frozen=True)
class EvalRequest:
    """What `conductor eval` is asked: one field per option, the same defaults."""

    dataset: str  # humaneval | mcq | qa | mixed
    file: Path | None = None  # None: a public set (humaneval without a file is one)
    scorer: str = "exact"
    strategies: str | None = None  # comma-separated, as --strategies; None: all
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    concurrency: int = 1
    vote_n: int = 3
    moa_layers: int = 1
    aggregator: str | None = None  # None: the first worker
    restart: bool = False  # forget this eval's stored results first
    cache_mode: CacheMode = CacheMode.USE


@dataclass(frozen=True)
class EvalOutcome:
    """What an eval gives its caller to print and write."""

    summaries: list[report.Summary]  # one per strategy, in the chosen order
    results: tuple[Result, ...]  # every problem's result per strategy (derived ones too)
    meta: dict[str, Any]  # `--json-out`'s meta
    dataset: str
    n_problems: int
    resumed: int  # results read back from an earlier run of this eval
    computed: int
    store_path: Path


@dataclass(frozen=True)
class EvalSession:
    """An eval checked and ready: problems picked, strategies parsed, its store open."""

    request: EvalRequest
    config: Config
    problems: list[Problem]  # the picked ones
    strategies: list[str]
    settings: Settings
    store: ResultStore
    meta: dict[str, Any]  # what the store's key is made of
    total: int  # (strategy, problem) runs, stored ones included

    def run(self, on_result: OnResult | None = None) -> EvalOutcome:
        """Run what the store lacks, then summarize every chosen strategy."""
        request = self.request
        run = run_eval(
            self.problems,
            self.strategies,
            self.config,
            self.store,
            dataset=request.dataset,
            settings=self.settings,
            concurrency=request.concurrency,
            cache_mode=request.cache_mode,
            on_result=on_result,
        )
        meta = {
            **self.meta,
            "file": str(request.file) if request.file else None,
            "n_problems": len(self.problems),
            "strategies": self.strategies,
            "pool": [w.name for w in self.config.workers],
            "conductor": self.config.conductor.model,
            "resumed": run.resumed,
            "computed": run.computed,
            "results": str(self.store.path),
        }
        return EvalOutcome(
            summaries=report.summarize(run.results, self.strategies),
            results=run.results,
            meta=meta,
            dataset=request.dataset,
            n_problems=len(self.problems),
            resumed=run.resumed,
            computed=run.computed,
            store_path=self.store.path,
        )


def open_eval(request: EvalRequest, config: Config) -> EvalSession:
    """Check the request against the pool, load and pick the problems, open the store (and
    clear it with `restart`): every fault a user can make fails here, before any model."""
    names = [w.name for w in config.workers]
    if request.aggregator is not None and request.aggregator not in names:
        raise InputError(
            f"--aggregator {request.aggregator}: no such worker in the pool ({', '.join(names)})"
        )
    chosen = parse_strategies(request.strategies, config)
    problems = load_dataset(request.dataset, request.file, request.scorer)
    picked = draw(
        problems, request.dataset, limit=request.limit, sample=request.sample, seed=request.seed
    )
    settings = Settings(
        vote_n=request.vote_n,
        moa_layers=request.moa_layers,
        aggregator=request.aggregator,
        seed=request.seed,
    )
    raw = config_to_dict(config)
    raw.pop("cache", None)  # where answers are cached does not change them
    meta: dict[str, Any] = {
        "dataset": request.dataset,
        "problems": fingerprint(problems),
        "config": raw,
        "settings": settings.to_dict(),
    }
    store = ResultStore.for_meta(meta)
    if request.restart:
        store.clear()
    return EvalSession(
        request=request,
        config=config,
        problems=picked,
        strategies=chosen,
        settings=settings,
        store=store,
        meta=meta,
        total=len(picked) * len(base_strategies(chosen, config)),
    )


def evaluate(
    request: EvalRequest, config: Config, *, on_result: OnResult | None = None
) -> EvalOutcome:
    """Every chosen strategy on the request's problems; results stored earlier are reused."""
    return open_eval(request, config).run(on_result)
