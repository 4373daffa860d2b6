"""The ways to answer a problem that `conductor eval` compares.

Base strategies call models: `conductor` (plan, then run the plan; `conductor:NAME` plans with
the conductor NAME, e.g. a trained one, instead of the configured one; either with
`@rounds=N`: at most N rounds of re-planning after reading the answer), `single:<worker>` (one
call), `vote:<worker>` (self-consistency: N samples, majority answer) and `moa`
(Mixture-of-Agents: every worker answers, later layers refine, one aggregator combines).
Derived strategies call nothing: `router` (a lookup table: the worker that scored best on the
other half of the dataset, per category where there are categories), `knn-router` (the same,
per cluster of question embeddings instead of per category: evals/knn.py; `knn-router:vote`
takes the chosen worker's `vote:` result) and `oracle` (any worker right: an upper bound).
All are computed from the `single:` results.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conductor_cli.errors import ConductorError, InputError
from conductor_cli.evals.records import Problem, Result

if TYPE_CHECKING:  # the table is read at the CLI's start (--strategies' help): kept light
    from conductor_cli.config.settings import Config
    from conductor_cli.run.workflow import Workflow

KNN = "knn-router"
KNN_VOTE = "knn-router:vote"


@dataclass(frozen=True)
class Settings:
    vote_n: int = 3
    # Samples at the worker's own temperature (0.2 by default) are near copies; voting needs
    # some spread.
    vote_temperature: float = 0.7
    moa_layers: int = 1
    aggregator: str | None = None  # None: the first worker in the pool
    seed: int = 0
    # knn-router's clusters per half; None: evals/knn.cluster_count's rule. Not in to_dict:
    # derived results are computed afresh each time, never stored under the eval's key.
    knn_clusters: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "vote_n": self.vote_n,
            "vote_temperature": self.vote_temperature,
            "moa_layers": self.moa_layers,
            "aggregator": self.aggregator,
            "seed": self.seed,
        }


def voters(config: Config) -> list[str]:
    """The workers a `vote:` samples: models. A tool is deterministic, its vote its single."""
    return [w.name for w in config.workers if not w.tool]


def moa_proposers(config: Config) -> list[str]:
    """Mixture-of-agents layers and aggregator: the models (a tool asked the bare question
    has nothing to propose), or every worker of a pool of tools only."""
    return voters(config) or [w.name for w in config.workers]


def default_strategies(config: Config) -> list[str]:
    """What an eval runs without --strategies: each kind's `defaults`, in the table's order."""
    chosen: list[str] = []
    for kind in STRATEGY_KINDS.values():
        for rest in kind.defaults:
            chosen += kind.expand(f"{kind.name}:{rest}" if rest else kind.name, rest, config)
    return chosen


def strategies_help() -> str:
    """--strategies' help, from the table: every kind as it is written, and the defaults."""
    usages = ", ".join(k.usage for k in STRATEGY_KINDS.values())
    defaults = ", ".join(k.name for k in STRATEGY_KINDS.values() if k.defaults)
    return (
        f"Comma-separated: {usages} (default: {defaults}; conductor:NAME plans with the "
        "trained conductor NAME)."
    )


def strategy_kind(strategy: str) -> str:
    """`conductor:NAME@rounds=3` -> `conductor`; `single:w` -> `single`."""
    return strategy.partition("@")[0].partition(":")[0]


def rounds_of(strategy: str) -> int | None:
    """The rounds a `conductor...@rounds=N` strategy runs; None: the config's."""
    _, at, suffix = strategy.partition("@")
    return int(suffix.removeprefix("rounds=")) if at else None


def _rounds_suffix(raw: str, suffix: str) -> str:
    from conductor_cli.config.settings import MAX_ROUNDS_LIMIT

    value = suffix.removeprefix("rounds=")
    if not suffix.startswith("rounds=") or not value.isdigit():
        raise InputError(f"--strategies {raw}: write conductor[:NAME]@rounds=N")
    if not 1 <= int(value) <= MAX_ROUNDS_LIMIT:
        raise InputError(f"--strategies {raw}: give 1 to {MAX_ROUNDS_LIMIT} rounds")
    return f"@rounds={int(value)}"


def parse_strategies(text: str | None, config: Config) -> list[str]:
    """`--strategies a,b,c`: each as its kind's entry in STRATEGY_KINDS expands it (`single`
    and `vote` alone mean one per worker); a conductor strategy may end in `@rounds=N` (that
    many rounds of re-planning at most)."""
    if not text:
        return default_strategies(config)
    chosen: list[str] = []
    for raw in (part.strip() for part in text.split(",")):
        if not raw:
            continue
        base, at, suffix = raw.partition("@")
        if at:
            if strategy_kind(base) != "conductor":
                raise InputError(f"--strategies {raw}: only conductor strategies take @rounds=N")
            rounds = _rounds_suffix(raw, suffix)
            plain = parse_strategies(base, config)[0]
            chosen.append(plain + rounds)
            continue
        kind, _, rest = raw.partition(":")
        entry = STRATEGY_KINDS.get(kind)
        if entry is None:
            raise _unknown(raw)
        chosen += entry.expand(raw, rest, config)
    if not chosen:
        raise InputError("--strategies is empty; name at least one strategy")
    return list(dict.fromkeys(chosen))


def _unknown(raw: str) -> InputError:
    usages = [k.usage for k in STRATEGY_KINDS.values()]
    listed = ", ".join(usages[:-1]) + " or " + usages[-1]
    return InputError(f"--strategies {raw}: unknown strategy; use {listed}")


def _conductor(raw: str, rest: str, config: Config) -> list[str]:
    return [f"conductor:{check_conductor(rest, raw)}"] if rest else ["conductor"]


def _per_worker(
    kind: str, among: Callable[[Config], list[str]] | None = None
) -> Callable[[str, str, Config], list[str]]:
    """`single` / `vote`: one strategy per worker (of `among`, else the pool), or the one
    worker named."""

    def expand(raw: str, rest: str, config: Config) -> list[str]:
        names = [w.name for w in config.workers]
        if not rest:
            return [f"{kind}:{n}" for n in (among(config) if among else names)]
        if rest not in names:
            raise InputError(
                f"--strategies {raw}: no worker {rest!r} in the pool "
                f"({', '.join(names)}); use one of them or `{kind}` for all"
            )
        return [raw]

    return expand


def _per_writer(kind: str) -> Callable[[str, str, Config], list[str]]:
    """`program` / `repair` / `retry`: one strategy per model that writes code the pool's
    python tool runs, or the one named."""

    def expand(raw: str, rest: str, config: Config) -> list[str]:
        return [f"{kind}:{w}" for w in program_writers(config, rest, raw)]

    return expand


def _alone(name: str) -> Callable[[str, str, Config], list[str]]:
    """A strategy written as its name alone."""

    def expand(raw: str, rest: str, config: Config) -> list[str]:
        if rest:
            raise _unknown(raw)
        return [name]

    return expand


def _knn(raw: str, rest: str, config: Config) -> list[str]:
    if rest not in ("", "vote"):
        raise _unknown(raw)
    return [KNN_VOTE if rest else KNN]


@dataclass(frozen=True)
class Derivation:
    """What a derived strategy reads: the eval's problems, every worker's `single:` results
    (keyed by strategy and problem id), the result store (for other stored strategies), and a
    dict the derived strategies of one eval share (knn-router's picks, made once for both)."""

    problems: Sequence[Problem]
    singles: Mapping[tuple[str, str], Result]
    stored: Callable[[str, str], Result | None]  # (strategy, problem id) -> its result
    config: Config
    settings: Settings
    shared: dict[str, Any]

    @property
    def workers(self) -> list[str]:
        return [w.name for w in self.config.workers]


@dataclass(frozen=True)
class StrategyKind:
    """One kind of strategy, everything an eval knows of it in one entry: how it is written
    and expanded, and how it is answered: `solve` for one that calls models ("module:function",
    a function of (evals/pairs.Solver, strategy, problem) -> Result, imported when first
    used), or `derive` for one computed from the stored results of others."""

    name: str
    usage: str  # how it is written, for the one-line error
    about: str  # one line for the docs
    expand: Callable[[str, str, Config], list[str]]  # (as written, after ':', config)
    solve: str = ""
    # "module:function" of (Derivation, strategy) -> list[Result], for one computed from others
    derive: str = ""
    uses_conductor: bool = False  # its model is downloaded before the eval starts
    # "module:function" of (Config) -> None that fails before any run, e.g. on a bad model
    check: str = ""
    # What it adds to an eval without --strategies: each text after ':' ("": the bare name);
    # none: run only when named.
    defaults: tuple[str, ...] = ()

    @property
    def calls_models(self) -> bool:
        return not self.derive


def derive_router(d: Derivation, strategy: str) -> list[Result]:
    return router_results(d.problems, d.singles, d.workers, d.settings.seed)


def derive_oracle(d: Derivation, strategy: str) -> list[Result]:
    return oracle_results(d.problems, d.singles, d.workers)


_SOLVERS = "conductor_cli.evals.pairs:solve_"
_HERE = "conductor_cli.evals.strategies:"
_KNN = "conductor_cli.evals.knn:"
STRATEGY_KINDS: dict[str, StrategyKind] = {
    k.name: k
    for k in (
        StrategyKind("conductor", "conductor[:NAME]", "plan, then run the plan (NAME: "
                     "another conductor, trained or a model)", _conductor, _SOLVERS + "conductor",
                     uses_conductor=True, defaults=("",)),
        StrategyKind("single", "single[:WORKER]", "one call of a worker", _per_worker("single"),
                     _SOLVERS + "single", defaults=("",)),
        # A tool is deterministic: its vote is its single, so `vote` alone samples the models.
        StrategyKind("vote", "vote[:WORKER]", "self-consistency: samples, the majority answer",
                     _per_worker("vote", voters), _SOLVERS + "vote", defaults=("",)),
        StrategyKind("program", "program[:WORKER]", "WORKER writes a program, the python tool "
                     "runs it", _per_writer("program"), _SOLVERS + "program"),
        StrategyKind("repair", "repair[:WORKER]", "WORKER writes the code, the python tool "
                     "tests it on the examples the question shows, WORKER repairs it",
                     _per_writer("repair"), _SOLVERS + "repair"),
        StrategyKind("retry", "retry[:WORKER]", "WORKER writes the code, the python tool "
                     "tests it on the examples the question shows, WORKER writes it again "
                     "shown what failed (conductor.code_retries times at most)",
                     _per_writer("retry"), _SOLVERS + "retry"),
        StrategyKind("moa", "moa", "mixture of agents: every worker, then an aggregator",
                     _alone("moa"), _SOLVERS + "moa", defaults=("",)),
        StrategyKind("router", "router", "a lookup table: the best worker on the other half",
                     _alone("router"), derive=_HERE + "derive_router", defaults=("",)),
        # knn-router:vote reads the vote: results the default run has already: no call.
        StrategyKind("knn-router", "knn-router[:vote]", "the same, per cluster of question "
                     "embeddings", _knn, derive=_KNN + "derive", uses_conductor=True,
                     check=_KNN + "embedding_gguf", defaults=("", "vote")),
        StrategyKind("oracle", "oracle", "any worker right: an upper bound", _alone("oracle"),
                     derive=_HERE + "derive_oracle", defaults=("",)),
    )
}  # fmt: skip


def python_tool(config: Config) -> str | None:
    """The pool's first tool that runs programs: what runs a `program:` strategy's program."""
    return next((w.name for w in config.workers if w.spec.runs_programs), None)


def program_writers(config: Config, worker: str, raw: str) -> list[str]:
    """The workers `program[:W]` asks for a program: W, or every model of the pool."""
    from conductor_cli.models.spec import ModelSpec

    if python_tool(config) is None:
        raise InputError(
            f"--strategies {raw}: the pool has no python tool to run the program; add a worker "
            'with model = "tool:python"'
        )
    models = [w.name for w in config.workers if not ModelSpec.for_worker(w.model).tool]
    if not worker:
        return models
    if worker not in models:
        raise InputError(
            f"--strategies {raw}: {worker!r} is not a model of the pool "
            f"({', '.join(models)}); name one that writes the program"
        )
    return [worker]


def program_workflow(config: Config, worker: str) -> Workflow:
    """`worker` writes a program, the python tool runs it, in policy/words' words."""
    from conductor_cli.policy.shapes import program_shape

    tool = python_tool(config)
    assert tool is not None  # parse_strategies refused the strategy otherwise
    return program_shape(worker, tool).workflow()


def repair_workflow(config: Config, worker: str) -> Workflow:
    """`worker` writes, the python tool tests on the question's examples, `worker` repairs."""
    from conductor_cli.policy.shapes import repair_shape

    tool = python_tool(config)
    assert tool is not None  # parse_strategies refused the strategy otherwise
    return repair_shape(worker, tool).workflow()


def retry_workflow(config: Config, worker: str) -> Workflow:
    """`worker` writes, the python tool tests on the question's examples, `worker` writes
    again shown what failed: the steps a conductor's plan gets for such a question."""
    from conductor_cli.run.user_tests import with_retries

    tool = python_tool(config)
    assert tool is not None  # parse_strategies refused the strategy otherwise
    return with_retries(single_workflow(worker), tool, worker, config.conductor.code_retries)


def check_conductor(name: str, raw: str) -> str:
    """`conductor:NAME` plans with another conductor: a trained one (`conductor train`), a
    catalog model or a .gguf path, as `conductor.model` takes them."""
    from conductor_cli.models.catalog import is_gguf_path, load_catalog
    from conductor_cli.models.spec import ModelSpec
    from conductor_cli.policy.registry import find

    if find(name) is not None or is_gguf_path(name) or not ModelSpec.for_conductor(name).local:
        return name
    if name in load_catalog().entries:
        return name
    raise InputError(
        f"--strategies {raw}: no trained conductor or catalog model named {name!r}; "
        "see `conductor models list`"
    )


def conductor_config(config: Config, strategy: str) -> Config:
    """The config a `conductor[:NAME][@rounds=N]` strategy plans with."""
    _, _, name = strategy.partition("@")[0].partition(":")
    rounds = rounds_of(strategy)
    conductor = config.conductor
    if name:
        conductor = replace(conductor, model=name)
    if rounds is not None:
        conductor = replace(conductor, max_rounds=rounds)
    return replace(config, conductor=conductor)


def trained_notes(config: Config, strategies: Sequence[str]) -> list[str]:
    """Notes of the trained conductors the strategies plan with (workers never measured)."""
    from conductor_cli.policy.registry import pool_note

    notes = []
    for s in strategies:
        if s == "conductor" or s.startswith(("conductor:", "conductor@")):
            note = pool_note(conductor_config(config, s))
            if note is not None and note not in notes:
                notes.append(note)
    return notes


def base_strategies(strategies: Sequence[str], config: Config) -> list[str]:
    """The strategies that call models; the derived ones need every worker's `single:`, and
    `knn-router:vote` every worker's `vote:` (which worker it takes varies by problem)."""
    calls = {s: STRATEGY_KINDS[strategy_kind(s)].calls_models for s in strategies}
    needed = [s for s in strategies if calls[s]]
    if not all(calls.values()):
        needed += [f"single:{w.name}" for w in config.workers]
    if KNN_VOTE in strategies:
        needed += [f"vote:{n}" for n in voters(config)]
    return list(dict.fromkeys(needed))


# --- workflows for the baselines ---------------------------------------------------------------

ANSWER_TASK = "Answer the question."
REFINE_TASK = "Read the earlier answers you see, then give your own best answer to the question."
AGGREGATE_TASK = (
    "Combine the answers you see into one best final answer to the question, in the form the "
    "question asks for."
)


def single_workflow(worker: str) -> Workflow:
    from conductor_cli.run.workflow import Step, Workflow

    return Workflow((Step(worker, ANSWER_TASK),))


def moa_workflow(workers: Sequence[str], layers: int, aggregator: str) -> Workflow:
    """Layer 1: every worker answers; layers 2..L: every worker sees the layer before; last:
    the aggregator sees the final layer."""
    from conductor_cli.run.workflow import Step, Workflow

    steps: list[Step] = []
    previous: tuple[int, ...] = ()
    for layer in range(layers):
        task = ANSWER_TASK if layer == 0 else REFINE_TASK
        start = len(steps)
        steps += [Step(w, task, previous) for w in workers]
        previous = tuple(range(start, len(steps)))
    steps.append(Step(aggregator, AGGREGATE_TASK, previous))
    return Workflow(tuple(steps))


def majority(keys: Sequence[str]) -> int:
    """Index of the first sample whose answer is the most common (ties: the earliest)."""
    counts = Counter(k for k in keys if k)
    if not counts:
        return 0
    best = max(counts.values())
    return next(i for i, k in enumerate(keys) if k and counts[k] == best)


def vote_config(config: Config, worker: str, temperature: float) -> Config:
    workers = tuple(
        replace(w, temperature=temperature) if w.name == worker else w for w in config.workers
    )
    return replace(config, workers=workers)


# --- derived strategies ------------------------------------------------------------------------


def fold_of(problem_id: str, seed: int) -> int:
    """Which half of the dataset a problem is in (stable across runs and machines)."""
    return hashlib.sha256(f"{seed}:{problem_id}".encode()).digest()[0] % 2


def router_results(
    problems: Sequence[Problem],
    singles: Mapping[tuple[str, str], Result],
    workers: Sequence[str],
    seed: int,
) -> list[Result]:
    """Per problem, the `single:` result of the worker that did best on the other half.

    The table is learned per category when the problem has one and the other half holds
    problems of that category, else on the whole other half. Ties go to the worker listed
    first in the config.
    """
    out = []
    folds = {p.id: fold_of(p.id, seed) for p in problems}
    for p in problems:
        train = [q for q in problems if folds[q.id] != folds[p.id]]
        same = [q for q in train if p.category is not None and q.category == p.category]
        pool = same or train

        def score(w: str, pool: Sequence[Problem] = pool) -> int:
            return sum(
                1
                for q in pool
                if (r := singles.get((f"single:{w}", q.id))) is not None and r.correct
            )

        chosen = max(workers, key=lambda w: (score(w), -workers.index(w)))
        base = singles[(f"single:{chosen}", p.id)]
        out.append(
            replace(
                base,
                strategy="router",
                detail={
                    "worker": chosen,
                    "table": "category" if same else "all",
                    "trained_on": len(pool),
                },
            )
        )
    return out


def oracle_results(
    problems: Sequence[Problem], singles: Mapping[tuple[str, str], Result], workers: Sequence[str]
) -> list[Result]:
    """Right when any worker is right; it pays for every worker's call."""
    out = []
    for p in problems:
        runs = [singles[(f"single:{w}", p.id)] for w in workers]
        right = [r for r in runs if r.correct]
        pick = right[0] if right else runs[0]
        costs = [r.cost for r in runs]
        out.append(
            Result(
                strategy="oracle",
                problem_id=p.id,
                category=p.category,
                correct=bool(right),
                answer=pick.answer,
                reply=pick.reply,
                tokens_in=sum(r.tokens_in for r in runs),
                tokens_out=sum(r.tokens_out for r in runs),
                cost=None if None in costs else sum(c or 0.0 for c in costs),
                model_calls=sum(r.model_calls for r in runs),
                seconds=sum(r.seconds for r in runs),
                detail={"right": [r.strategy.split(":", 1)[1] for r in right]},
            )
        )
    return out


def failed(strategy: str, problem: Problem, error: ConductorError, seconds: float) -> Result:
    return Result(
        strategy=strategy,
        problem_id=problem.id,
        category=problem.category,
        correct=False,
        answer="",
        reply="",
        tokens_in=0,
        tokens_out=0,
        cost=0.0,
        model_calls=0,
        seconds=seconds,
        error=str(error),
    )


def trace_id(path: Path | None) -> str | None:
    return path.stem if path else None
