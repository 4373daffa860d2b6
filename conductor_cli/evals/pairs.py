"""Run every (strategy, problem) pair, score it, store it; skip pairs an earlier run stored."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from conductor_cli import waiting
from conductor_cli.api import NO_TRACE, RunOptions, RunResult, TraceOptions, execute
from conductor_cli.config.settings import Config
from conductor_cli.errors import ConductorError
from conductor_cli.evals import scoring
from conductor_cli.evals.kinds import runs_code, scoring_sandbox
from conductor_cli.evals.records import Problem, Result
from conductor_cli.evals.store import ResultStore
from conductor_cli.evals.strategies import (
    STRATEGY_KINDS,
    Derivation,
    Settings,
    base_strategies,
    conductor_config,
    failed,
    majority,
    moa_proposers,
    moa_workflow,
    program_workflow,
    repair_workflow,
    retry_workflow,
    single_workflow,
    strategy_kind,
    trace_id,
    vote_config,
)
from conductor_cli.exports import resolve
from conductor_cli.models.catalog import load_catalog
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import Workflow
from conductor_cli.runtime import Runtime, conductor_pricing, pull_models_for, worker_pricing
from conductor_cli.sandbox import Sandbox
from conductor_cli.storage.cache import CacheMode
from conductor_cli.storage.trace import annotate_trace

Lookup = Callable[[str], list[float] | None]
# Called once per stored result: (result, resumed), resumed = read back from an earlier run.
OnResult = Callable[[Result, bool], None]


@dataclass(frozen=True)
class EvalRun:
    results: tuple[Result, ...]  # the chosen strategies' results, strategy by strategy
    resumed: int  # base results read back instead of computed
    computed: int


class Solver:
    """Runs one base strategy on one problem through the library's `execute`."""

    def __init__(
        self,
        config: Config,
        settings: Settings,
        dataset: str,
        *,
        cache_mode: CacheMode,
        runtime: Runtime,
        trained: dict[str, str | None],
        sandbox: Sandbox | None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.dataset = dataset
        self.cache_mode = cache_mode
        self.runtime = runtime
        self.trained = trained  # per conductor strategy: its trained conductor's identity
        self.sandbox = sandbox

    def execute(
        self,
        problem: Problem,
        config: Config | None = None,
        *,
        workflow: Workflow | None = None,
        trace: TraceOptions = NO_TRACE,
        seed: int | None = None,
    ) -> RunResult:
        """One run of `problem` through the library, with this eval's cache mode and runtime
        (`config` and `workflow`: another than the eval's, e.g. a baseline's)."""
        return execute(
            problem.question,
            config=config or self.config,
            attachments=[Attachment(name, text) for name, text in problem.attachments],
            workflow=workflow,
            options=RunOptions(self.cache_mode, seed=seed),
            trace=trace,
            runtime=self.runtime,
        )

    def annotation(self, problem: Problem) -> dict[str, str]:
        """What a trace of this eval's run of `problem` is marked with."""
        return {"dataset": self.dataset, "problem_id": problem.id}

    def solve(self, strategy: str, problem: Problem) -> Result:
        start = time.monotonic()
        try:
            return self._solve(strategy, problem)
        except ConductorError as e:  # a failed run is a wrong answer, with its reason kept
            return failed(strategy, problem, e, time.monotonic() - start)

    def _solve(self, strategy: str, problem: Problem) -> Result:
        solve: Callable[[Solver, str, Problem], Result] = resolve(
            STRATEGY_KINDS[strategy_kind(strategy)].solve
        )
        return solve(self, strategy, problem)

    def scored(self, strategy: str, problem: Problem, workflow: Workflow) -> Result:
        """`workflow` run on `problem`, scored: a base strategy with a fixed workflow."""
        run = self.execute(problem, workflow=workflow)
        scored = scoring.score(problem, run.answer, self.sandbox)
        return self.result(strategy, problem, [run], 0, scored)

    def result(
        self,
        strategy: str,
        problem: Problem,
        runs: Sequence[RunResult],
        pick: int,
        scored: tuple[bool, str, dict[str, Any]],
    ) -> Result:
        """The stored result of `runs` (the answer of `runs[pick]`; the usage of all)."""
        usage = _Usage.of(runs[0], self.config, self.runtime.litellm.rates)
        for run in runs[1:]:
            usage = usage + _Usage.of(run, self.config, self.runtime.litellm.rates)
        correct, extracted, detail = scored
        return Result(
            strategy=strategy,
            problem_id=problem.id,
            category=problem.category,
            correct=correct,
            answer=extracted,
            reply=runs[pick].answer,
            tokens_in=usage.tokens_in,
            tokens_out=usage.tokens_out,
            cost=usage.cost,
            model_calls=usage.calls,
            seconds=sum(r.seconds for r in runs),
            detail=detail,
        )


# The base strategies' solvers, each named by its entry in evals/strategies.STRATEGY_KINDS.


def solve_conductor(solver: Solver, strategy: str, problem: Problem) -> Result:
    run = solver.execute(
        problem,
        conductor_config(solver.config, strategy),
        trace=TraceOptions(extra={"eval": solver.annotation(problem)}),
    )
    correct, extracted, detail = scoring.score(problem, run.answer, solver.sandbox)
    detail["trained"] = solver.trained[strategy]
    detail["trace"] = trace_id(run.trace_path)
    detail["steps"] = len(run.workflow.steps)
    detail["shape"] = run.workflow.shape
    detail["rounds"] = 1 + len(run.rounds)
    if run.trace_path is not None:
        annotate_trace(
            run.trace_path,
            "eval",
            {
                **solver.annotation(problem),
                "strategy": strategy,
                "correct": correct,
                "reward": 1.0 if correct else 0.0,
            },
        )
    return solver.result(strategy, problem, [run], 0, (correct, extracted, detail))


def solve_single(solver: Solver, strategy: str, problem: Problem) -> Result:
    worker = strategy.partition(":")[2]
    return solver.scored(strategy, problem, single_workflow(worker))


def solve_program(solver: Solver, strategy: str, problem: Problem) -> Result:
    worker = strategy.partition(":")[2]
    return solver.scored(strategy, problem, program_workflow(solver.config, worker))


def solve_repair(solver: Solver, strategy: str, problem: Problem) -> Result:
    worker = strategy.partition(":")[2]
    return solver.scored(strategy, problem, repair_workflow(solver.config, worker))


def solve_retry(solver: Solver, strategy: str, problem: Problem) -> Result:
    worker = strategy.partition(":")[2]
    return solver.scored(strategy, problem, retry_workflow(solver.config, worker))


def solve_moa(solver: Solver, strategy: str, problem: Problem) -> Result:
    names = moa_proposers(solver.config)
    wf = moa_workflow(names, solver.settings.moa_layers, solver.settings.aggregator or names[0])
    return solver.scored(strategy, problem, wf)


def solve_vote(solver: Solver, strategy: str, problem: Problem) -> Result:
    worker = strategy.partition(":")[2]
    config = vote_config(solver.config, worker, solver.settings.vote_temperature)
    runs = [
        solver.execute(
            problem,
            config,
            workflow=single_workflow(worker),
            seed=solver.settings.seed + 7919 * (k + 1),
        )
        for k in range(solver.settings.vote_n)
    ]
    keys = [scoring.key(problem, r.answer) for r in runs]
    pick = majority(keys)
    scored = scoring.score(problem, runs[pick].answer, solver.sandbox)
    scored[2]["votes"] = sum(1 for k in keys if k and k == keys[pick])
    scored[2]["samples"] = len(runs)
    return solver.result(strategy, problem, runs, pick, scored)


@dataclass(frozen=True)
class _Usage:
    """What a run used, whether or not the response cache served it: an eval compares
    strategies, and a warm cache must not make one look free."""

    tokens_in: int
    tokens_out: int
    cost: float | None
    calls: int

    @staticmethod
    def of(run: RunResult, config: Config, lookup: Lookup) -> _Usage:
        costs: list[float | None] = []
        if run.plan is not None:
            costs.append(
                conductor_pricing(config, lookup).cost(run.plan.tokens_in, run.plan.tokens_out)
            )
        for step in run.steps:
            pricing = worker_pricing(config.worker(step.worker), lookup)
            costs.append(pricing.cost(step.tokens_in, step.tokens_out))
        t = run.totals()
        return _Usage(
            t["tokens_in"],
            t["tokens_out"],
            None if None in costs else sum(c or 0.0 for c in costs),
            # Every call passed the cache layer: answered there or by the model (retries and
            # the conductor's attempts included).
            t["model_calls"] + t["cache_hits"],
        )

    def __add__(self, other: _Usage) -> _Usage:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return _Usage(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            cost,
            self.calls + other.calls,
        )


def run_eval(
    problems: Sequence[Problem],
    strategies: Sequence[str],
    config: Config,
    store: ResultStore,
    *,
    dataset: str,
    settings: Settings | None = None,
    concurrency: int = 1,
    cache_mode: CacheMode = CacheMode.USE,
    on_result: OnResult | None = None,
    sandbox: Sandbox | None = None,
) -> EvalRun:
    """Every chosen strategy on every problem; results already in `store` are reused."""
    settings = settings or Settings()
    base = base_strategies(strategies, config)
    kinds = [STRATEGY_KINDS[k] for k in dict.fromkeys(map(strategy_kind, [*strategies, *base]))]
    # The one download step, before any check or run.
    pull_models_for(config, load_catalog(), conductor=any(k.uses_conductor for k in kinds))
    for kind in kinds:
        if kind.check:
            resolve(kind.check)(config)  # a missing or damaged model fails now, not later
    todo: list[tuple[str, Problem]] = []
    resumed = 0
    trained = {s: trained_identity(config, s) for s in base if strategy_kind(s) == "conductor"}
    for p in problems:
        for s in base:
            done = store.get(s, p.id)
            if done is not None and s in trained and done.detail.get("trained") != trained[s]:
                done = None  # planned by a conductor of that name trained since: plan again
            if done is None:
                todo.append((s, p))
            else:
                resumed += 1
                if on_result:
                    on_result(done, True)
    if sandbox is None and runs_code(problems):
        sandbox = scoring_sandbox()
    runtime = Runtime(config)
    solver = Solver(
        config,
        settings,
        dataset,
        cache_mode=cache_mode,
        runtime=runtime,
        trained=trained,
        sandbox=sandbox,
    )

    stopping = threading.Event()

    def one(strategy: str, problem: Problem) -> None:
        result = solver.solve(strategy, problem)
        if stopping.is_set():
            # Ctrl-C or an error ended the run under this problem: its models may have been
            # closed mid-way, so the result is not the strategy's; the next run computes it.
            return
        store.add(result)
        if on_result:
            on_result(result, False)

    pool: ThreadPoolExecutor | None = None
    try:
        if concurrency <= 1:
            for s, p in todo:
                one(s, p)
        else:
            pool = ThreadPoolExecutor(max_workers=concurrency)
            futures = [pool.submit(one, s, p) for s, p in todo]
            waiting.all_or_first_error(futures)
            for f in futures:
                if f.done() and (error := f.exception()) is not None:
                    raise error
    finally:
        stopping.set()
        if pool is not None:
            # Not the pool's `with`: that waits for every queued problem, so Ctrl-C would
            # wait for the whole eval. Problems not started are dropped; running ones end
            # soon (their models are closed below) and store nothing.
            pool.shutdown(wait=False, cancel_futures=True)
        runtime.close()
    return EvalRun(
        tuple(collect(problems, strategies, config, store, settings)), resumed, len(todo)
    )


def collect(
    problems: Sequence[Problem],
    strategies: Sequence[str],
    config: Config,
    store: ResultStore,
    settings: Settings,
) -> list[Result]:
    """The chosen strategies' results in strategy order, the derived ones computed."""
    workers = [w.name for w in config.workers]
    singles = {
        (f"single:{w}", p.id): r
        for w in workers
        for p in problems
        if (r := store.get(f"single:{w}", p.id)) is not None
    }
    inputs = Derivation(problems, singles, store.get, config, settings, {})
    out: list[Result] = []
    for s in strategies:
        derive = STRATEGY_KINDS[strategy_kind(s)].derive
        if derive:
            out += resolve(derive)(inputs, s)
        else:
            out += [r for p in problems if (r := store.get(s, p.id)) is not None]
    return out


def trained_identity(config: Config, strategy: str) -> str | None:
    """The identity of the trained conductor a `conductor[:NAME]` strategy plans with (None
    for a plain model, whose name, path or hash the run's key already holds)."""
    from conductor_cli.policy import registry

    trained = registry.find(conductor_config(config, strategy).conductor.model)
    return trained.identity() if trained is not None else None
