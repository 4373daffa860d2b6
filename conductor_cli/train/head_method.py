"""`conductor train --method head`: learn which workflow shape fits which question.

1. Split the dataset by a seeded shuffle into training and held-out questions.
2. Read the conductor's hidden state after its planning prompt for every question (llama.cpp).
3. Run every shape of at most two steps on every training question, `repeats` times, through
   the project's own engine (cache, retries, parallel steps), and score each answer with
   eval's scorers: the reward table. Each run is appended to a checkpoint as it finishes, so
   an interrupted run resumes where it stopped.
4. Fit a linear head over the PCA-reduced hidden states to maximize the mean reward of the
   shapes it picks: sep-CMA-ES's evolution or a regularized softmax policy, whichever does
   better on questions it did not see (train/head_fit.py).
5. Score the untrained conductor and the trained one on the held-out questions through the
   planning path `ask` uses (the trained one: shape from the head, tasks from the conductor).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.config.settings import MAX_ROUNDS_LIMIT, Config
from conductor_cli.errors import InputError
from conductor_cli.evals.datasets import fingerprint
from conductor_cli.evals.records import Problem
from conductor_cli.models.catalog import ResolvedModel, file_sha256
from conductor_cli.policy import registry
from conductor_cli.policy.chooser import TASKS, read_as
from conductor_cli.policy.familiar import Familiar, QuestionEmbedder
from conductor_cli.policy.features import PromptFeatures, features_model, trained_features
from conductor_cli.policy.head import Head
from conductor_cli.policy.shapes import (
    MAX_SHAPES,
    Shape,
    enumerate_shapes,
    join_shapes,
    parse_shape,
    program_shapes,
    single_index,
)
from conductor_cli.policy.step_head import StepHead
from conductor_cli.policy.step_head import plan as plan_steps
from conductor_cli.run.budget import Budget
from conductor_cli.run.planner import plan_messages, worker_infos
from conductor_cli.runtime import CONDUCTOR_LABEL, worker_pricing
from conductor_cli.train import head_reads
from conductor_cli.train.adaptive import search
from conductor_cli.train.explore import Observations, estimates, neighbours, pooled
from conductor_cli.train.familiar_fit import fit_familiar, too_few_kinds
from conductor_cli.train.head_evolution import best_fixed_shape, fit_pca
from conductor_cli.train.head_fit import (
    EVOLUTION,
    HeadFit,
    fit_head,
    withheld_picks,
    withholds_kinds,
)
from conductor_cli.train.head_words import learn_words_phase
from conductor_cli.train.measured import Measurement, store_path
from conductor_cli.train.reward import PARSED
from conductor_cli.train.reward_runs import Job, RewardRuns
from conductor_cli.train.rollout import Runner, held_out_score
from conductor_cli.train.round_head import train_round_head
from conductor_cli.train.shared import (
    OnProgress,
    Progress,
    TrainOptions,
    check_keys,
    record_head,
    resolve_base,
    split_problems,
)
from conductor_cli.train.spend import (
    Estimate,
    estimate,
    new_calls,
    read_spent,
    step_keys,
    tool_workers,
    write_spent,
)
from conductor_cli.train.spend import check as check_spend
from conductor_cli.train.step_fit import ShapeIndex, fit_steps
from conductor_cli.train.word_shapes import words_calls
from conductor_cli.train.workdir import (
    disk_full,
    install,
    prepare,
    stage,
    target,
    work_dir,
    write_json,
)

TIE_BREAK = 0.001
# Who writes the steps' words when --tasks is not given: the words the rewards were measured
# with (a conductor as small as SmolLM2 writes words that cost its workers; shared.HeadOptions).
DEFAULT_TASKS = "fixed"


SEARCHES = ("adaptive", "all")
POLICIES = ("auto", "shapes", "steps")
RUN_ID = "run.json"


def candidate_shapes(
    workers: Sequence[str],
    max_steps: int,
    search: str,
    policy: str = "shapes",
    programs: Sequence[Shape] = (),
    tools: frozenset[str] = frozenset(),
) -> list[Shape]:
    """`all`: every shape of at most two steps, as measured since the head method began.
    `adaptive`: those whose every step counts, a single worker or a chain (a step the last one
    does not see only repeats a single worker's run), and, where max_steps allows three and
    the total stays within MAX_SHAPES (4 workers: 44), two independent answers and a third
    step that sees both. The step policy (`steps`) makes singles, chains and joins from any
    number of workers, whichever the search. The shape head also measures `programs`
    (policy/shapes.program_shapes: a model's program run by a tool, in those words). A shape
    whose step runs one of the `tools` on nothing (a tool step that sees no earlier step, in a
    shape of more than one) is left out: the tool has no program or input to run, and such
    shapes only gave the head look-alikes to pick wrongly (`coder > python > python<0,1` on
    word sorting, measured)."""
    shapes = _tools_see_something(enumerate_shapes(workers, max_steps), tools)
    joins = _tools_see_something(join_shapes(workers) if max_steps >= 3 else [], tools)
    if policy == "steps":
        return _every_step_counts(shapes) + joins
    if search == "adaptive":
        shapes = _every_step_counts(shapes)
        if len(shapes) + len(joins) <= MAX_SHAPES:
            shapes += joins
    if len(shapes) + len(programs) <= MAX_SHAPES:
        shapes += [s for s in programs if s not in shapes]
    if len(shapes) > MAX_SHAPES:
        raise InputError(
            f"the pool's {len(workers)} workers make {len(shapes)} workflow shapes; the shape "
            f"head learns one score per shape and takes at most {MAX_SHAPES}: use "
            "--policy steps (or auto), which chooses step by step over workers as vectors"
        )
    return shapes


def _tools_see_something(shapes: list[Shape], tools: frozenset[str]) -> list[Shape]:
    return [
        s
        for s in shapes
        if len(s.workers) == 1
        or all(sees for w, sees in zip(s.workers, s.sees, strict=True) if w in tools)
    ]


def pool_programs(config: Config, max_steps: int) -> list[Shape]:
    """The pool's program-aided shapes: each model worker with each tool that runs programs."""
    models, tools = [], []
    for worker in config.workers:
        if not worker.tool:
            models.append(worker.name)
        elif worker.spec.runs_programs:
            tools.append(worker.name)
    return program_shapes(models, tools, max_steps)


def chosen_shapes(
    labels: Sequence[str], workers: Sequence[str], max_steps: int, policy: str
) -> list[Shape]:
    """`--shapes`: each worker alone (the search measures those first, and a head always
    knows the members' own answers), then the shapes the user named, each checked against the
    pool and the conductor's step limit, in the order given."""
    if policy == "steps":
        raise InputError(
            "--shapes names shapes for the shape head; the step policy chooses step by step "
            "(use --policy shapes)"
        )
    singles = [Shape((w,), ((),)) for w in workers]
    shapes = list(dict.fromkeys([*singles, *(parse_shape(label, workers) for label in labels)]))
    for shape in shapes:
        if len(shape.workers) > max_steps:
            raise InputError(
                f"--shapes {shape.label!r}: {len(shape.workers)} steps, over conductor.max_steps "
                f"{max_steps}"
            )
    if not 2 <= len(shapes) <= MAX_SHAPES:
        raise InputError(f"--shapes: name 2 to {MAX_SHAPES} different shapes")
    return shapes


def resolve_policy(workers: Sequence[str], max_steps: int, search: str, policy: str) -> str:
    """`auto`: the shape head where the pool's shapes fit it (as every head before issue 34's
    part 3), the step policy beyond."""
    if policy not in POLICIES:
        raise InputError(f"--policy {policy!r}: use one of {', '.join(POLICIES)}")
    if policy != "auto":
        return policy
    shapes = enumerate_shapes(workers, max_steps)
    if search == "adaptive":
        shapes = _every_step_counts(shapes)
    return "shapes" if len(shapes) <= MAX_SHAPES else "steps"


def _every_step_counts(shapes: list[Shape]) -> list[Shape]:
    """A single worker, or steps each seen by the next: a step the last one does not see only
    repeats a single worker's run."""
    return [s for s in shapes if all(s.sees[1:]) or len(s.workers) == 1]


def _run_id(work: Path) -> str:
    """This training's id, kept in its work dir: a resumed one is the same training."""
    path = work / RUN_ID
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["id"])
    except (OSError, ValueError, KeyError, TypeError):
        run_id = uuid.uuid4().hex[:16]
        write_json(path, {"id": run_id})
        return run_id


def _measure(
    runs: RewardRuns,
    inputs: np.ndarray,
    options: TrainOptions,
    reward_limit: int,
    spent_before: int,
    cached: bool,
    on_progress: OnProgress,
    index: ShapeIndex | None = None,
    explored: dict[str, int] | None = None,
) -> tuple[np.ndarray, int, np.ndarray]:
    """Measure rewards within `reward_limit` calls; returns (the table the head learns from,
    the workflow runs it rests on, the runs behind each of its estimates). `index`: the step
    policy's, whose search buys only the chains and joins it could make (beyond_drafts) and
    explores workers as inputs (adaptive.search); what that exploration spent goes into
    `explored`."""
    shapes = runs.shapes
    n = len(runs.training)
    repeats = options.repeats if options.head.search == "all" else 1
    obs = Observations.empty(n, len(shapes))
    jobs_seen: set[Job] = set()

    def spent() -> int:
        return spent_before + runs.budget.calls

    def add(job: Job, m: Measurement) -> None:
        if job in jobs_seen:
            return
        jobs_seen.add(job)
        obs.add(job[0], job[1], min(1.0, max(0.0, m.reward(options.cost_weight))))
        on_progress(Progress("rewards", min(spent(), reward_limit), reward_limit, "worker calls"))

    def measure(jobs: list[Job]) -> None:
        for job in jobs:  # what the store holds costs nothing
            m = runs.get(job)
            if m is not None:
                add(job, m)
        runs.measure(jobs, add)

    singles = list(single_index(shapes).values())
    for r in range(repeats):  # single runs first: a chain's first step is then a cache hit
        measure([(q, s, r) for q in range(n) for s in singles])
    near = neighbours(inputs)
    if options.head.search == "all":
        rest = [i for i in range(len(shapes)) if i not in singles]
        measure([(q, s, r) for r in range(repeats) for q in range(n) for s in rest])
        table = obs.means()
        estimated = estimates(obs, near, PARSED)
        support = pooled(obs, near)[1]
        return np.where(np.isnan(table), estimated, table), len(jobs_seen), support
    # What an earlier training measured (a worker added since, a resumed training) is known.
    measure([(q, s, 0) for q in range(n) for s in range(len(shapes)) if runs.get((q, s, 0))])
    rng = np.random.default_rng(options.seed)
    tools = tool_workers(runs.runner.config)
    paid = {k for i in singles for k in step_keys(shapes[i], tools)}
    calls = [new_calls([s], tools, cached, paid) for s in shapes]
    batch = max(4 * options.concurrency, n // 4)
    names = [w.name for w in runs.runner.config.workers]
    spent_search = search(
        obs,
        near,
        calls,
        lambda: reward_limit - spent(),
        lambda jobs: measure([(q, s, 0) for q, s in jobs]),
        lambda: runs.stopped,
        rng,
        batch,
        _settled(runs),
        index,
        floor=PARSED,
        tools=[i for i, name in enumerate(names) if name in tools],
    )
    if explored is not None:
        explored.update(vars(spent_search))
    return estimates(obs, near, PARSED), len(jobs_seen), pooled(obs, near)[1]


def _settled(runs: RewardRuns) -> np.ndarray:
    """(n, S): the shapes an earlier training's search settled on each question: every worker
    of the shape was measured there by it. A new search (a worker added or retuned) buys only
    shapes with a worker that training did not measure; `--search all` measures every one."""
    single_of = single_index(runs.shapes)
    n = len(runs.training)
    closed = np.zeros((n, len(runs.shapes)), dtype=bool)
    for q in range(n):
        earlier = set()
        for worker, si in single_of.items():
            m = runs.get((q, si, 0))
            if m is not None and m.run != runs.run_id:
                earlier.add(worker)
        for s, shape in enumerate(runs.shapes):
            closed[q, s] = len(shape.workers) > 1 and set(shape.workers) <= earlier
    return closed


def _failed_workers(runs: RewardRuns, names: Sequence[str]) -> list[str]:
    """Workers whose every single run in this training failed."""
    failed = []
    single_of = single_index(runs.shapes)
    for w in names:
        si = single_of[w]
        rows = [runs.get((q, si, 0)) for q in range(len(runs.training))]
        measured = [m for m in rows if m is not None]
        if measured and all(m.failed for m in measured):
            failed.append(w)
    return failed


def _check_head_options(options: TrainOptions) -> None:
    if options.repeats < 1:
        raise InputError(f"--repeats {options.repeats}: must be at least 1")
    if not 1 <= options.head.rounds <= MAX_ROUNDS_LIMIT:
        raise InputError(f"--rounds {options.head.rounds}: give 1 to {MAX_ROUNDS_LIMIT} rounds.")
    if options.head.tasks not in TASKS:
        raise InputError(f"--tasks {options.head.tasks!r}: use one of {', '.join(TASKS)}")
    if options.head.search not in SEARCHES:
        raise InputError(f"--search {options.head.search!r}: use one of {', '.join(SEARCHES)}")


@dataclass(frozen=True)
class _Setup:
    """What one head training is about: the pool's names, the policy and its shapes, the
    split of the questions, and the metadata a resume must match."""

    names: list[str]
    policy: str
    shapes: list[Shape]
    training: list[Problem]
    held_out: list[Problem]
    fingerprints: dict[str, str]
    meta: dict[str, Any]
    repeats: int  # runs of each (question, shape) that the reward table averages

    @classmethod
    def of(
        cls,
        config: Config,
        problems: Sequence[Problem],
        options: TrainOptions,
        held_out_ids: frozenset[str] | None,
    ) -> _Setup:
        c, head = config.conductor, options.head
        names = [w.name for w in config.workers]
        policy = resolve_policy(names, c.max_steps, head.search, head.policy)
        if policy == "steps" and head.rounds > 1:
            raise InputError(
                f"--rounds {head.rounds} with the step policy (--policy steps, or auto on "
                f"{len(names)} workers): later rounds are learned by the shape head only; train "
                "one round, or a pool whose shapes the shape head takes (--policy shapes)"
            )
        if policy == "steps" and head.learn_words:
            raise InputError(
                f"--learn-words {head.learn_words} with the step policy (--policy steps, or "
                f"auto on {len(names)} workers): learned words become shapes of the shape head; "
                "use --policy shapes"
            )
        if head.shapes:
            shapes = chosen_shapes(head.shapes, names, c.max_steps, policy)
        else:
            programs = pool_programs(config, c.max_steps)
            tools = tool_workers(config)
            shapes = candidate_shapes(names, c.max_steps, head.search, policy, programs, tools)
        training, held_out = split_problems(problems, options, held_out_ids)
        meta = {
            "dataset": options.dataset,
            "problems": fingerprint(problems),
            "holdout": options.holdout,
            "held_out": sorted(p.id for p in held_out),
            "seed": options.seed,
            "repeats": options.repeats,
            "search": head.search,
            **({"policy": policy} if policy == "steps" else {}),  # older work dirs still resume
            "pool": registry.pool_fingerprint(config.workers),
            "cost_weight": options.cost_weight,
            **({"rounds": head.rounds} if head.rounds > 1 else {}),
            **({"shapes": [s.label for s in shapes]} if head.shapes else {}),
        }
        return cls(
            names,
            policy,
            shapes,
            list(training),
            list(held_out),
            {w.name: registry.worker_fingerprint(w) for w in config.workers},
            meta,
            options.repeats if head.search == "all" else 1,
        )


@dataclass
class _Fitted:
    """The learned head, the shape it picks for each training question, its learning curve."""

    head: Head | StepHead
    picks: np.ndarray
    curve: list[dict[str, float]]
    choice: HeadFit | None = None  # the shape head's fits and the one kept


@dataclass
class _HeadTraining:
    """One `conductor train --method head`, step by step (train_head runs them in order)."""

    config: Config
    problems: Sequence[Problem]
    options: TrainOptions
    setup: _Setup
    name: str
    runner: Runner
    on_progress: OnProgress
    data_file: Path | None
    runs: RewardRuns | None = None
    features: PromptFeatures | None = None
    # Calls and dollars spent by earlier attempts; None once nothing is left to write down.
    spent: tuple[int, float] | None = None

    @property
    def work(self) -> Path:
        return work_dir(self.name)

    def reward_runs(self) -> RewardRuns:
        s = self.setup
        self.runs = RewardRuns(
            self.runner,
            s.training,
            s.shapes,
            s.fingerprints,
            store_path(),
            "",
            Budget(),
            self.options.concurrency,
        )
        return self.runs

    def estimate(self, runs: RewardRuns) -> Estimate:
        s, head = self.setup, self.options.head
        rates = self.runner.runtime.litellm.rates
        prices = {w.name: worker_pricing(w, rates) for w in self.config.workers}
        measured = {
            job
            for job in _all_jobs(len(s.training), len(s.shapes), s.repeats)
            if runs.get(job) is not None
        }
        plan = estimate(
            self.config,
            s.training,
            s.shapes,
            search=head.search,
            repeats=s.repeats,
            held_out=len(s.held_out),
            rounds=head.rounds,
            before=self.options.evaluate_before,
            max_calls=head.max_calls,
            measured=measured,
            prices=prices,
            words=words_calls(s.shapes, s.training, tool_workers(self.config), head.learn_words)
            if head.learn_words
            else 0,
        )
        check_spend(plan, head.max_calls, head.max_cost, rounds=head.rounds)
        return plan

    def open_budget(self, runs: RewardRuns) -> tuple[int, float]:
        """What earlier attempts spent (a resume), and the budget left for this one."""
        head = self.options.head
        spent = read_spent(self.work) if self.options.resume else (0, 0.0)
        spent = (max(spent[0], runs.own_calls()), spent[1])
        runs.budget = Budget(
            max_cost=None if head.max_cost is None else head.max_cost - spent[1],
            max_calls=None if head.max_calls is None else head.max_calls - spent[0],
            exempt=frozenset({CONDUCTOR_LABEL}),
        )
        self.spent = spent
        return spent

    def project(
        self, base: Path, reads: str = "prompt", model: ResolvedModel | None = None
    ) -> tuple[Head, np.ndarray]:
        """The question as the head reads it (train/head_reads.py), reduced by PCA: the
        untrained head (zero weights) and the questions as its inputs. `reads` "prompt": the
        conductor's hidden state after the planning prompt; "question": the same with each
        question bare (its set's format line cut); "embedding": the mean state of `model` (the
        pool's largest local model, head_reads.embedder) over the bare question."""
        c, training = self.config.conductor, self.setup.training
        embedder, embedder_sha = "", ""
        if reads == "embedding":
            if model is None:
                raise InputError("no local model in the pool to embed the questions")
            embedder, embedder_sha = model.spec, model.sha256()
            embed = QuestionEmbedder(model.path, n_threads=c.n_threads)
            try:
                x = embed.many([p.question for p in training]).astype(np.float64)
            finally:
                embed.close()
            self.on_progress(Progress("features", len(training), len(training)))
        else:
            x = self._prompt_states(base, reads)
        mean, scale, components = fit_pca(x, self.options.head.pca_dims)
        zeros = np.zeros((components.shape[0] + 1, len(self.setup.shapes)))
        head0 = Head(
            mean, scale, components, zeros, tuple(self.setup.shapes), reads, embedder,
            embedder_sha,
        )  # fmt: skip
        return head0, head0.project(x)

    def _prompt_states(self, base: Path, reads: str) -> np.ndarray:
        c, training = self.config.conductor, self.setup.training
        infos = worker_infos(self.config.workers)
        self.features = PromptFeatures(
            features_model(base, trained_features(base)), n_ctx=min(c.n_ctx, 4096),
            n_threads=c.n_threads,
            kept=self.config.cache.enabled,
        )  # fmt: skip
        hidden = []
        for i, problem in enumerate(training):
            asked = plan_messages(problem.question, infos, (), c.max_steps)
            hidden.append(self.features(read_as(reads, asked, problem.question)))
            self.on_progress(Progress("features", i + 1, len(training)))
        self.features.close()
        self.features = None
        return np.stack(hidden).astype(np.float64)

    def familiarity(
        self, base: Path, inputs: np.ndarray, table: np.ndarray, fitted: _Fitted
    ) -> tuple[Familiar | None, dict[str, Any]]:
        """What the training questions were like (policy/familiar.py): their embeddings, the
        threshold below which a question goes to the best member alone, chosen by withholding
        kinds (train/familiar_fit.py); None where that earns no more than the head alone."""
        training, shapes = self.setup.training, self.setup.shapes
        kinds = [p.category or "" for p in training]
        if fitted.choice is None:
            return None, {"none": "a step policy plans step by step: no familiarity yet"}
        too_few = too_few_kinds(kinds)
        if too_few is not None:
            return None, too_few
        target = _target(shapes, table, self.options.head.step_cost)
        kind_picks, fold_picks = withheld_picks(
            inputs, target, kinds, fitted.choice.chosen,
            seed=self.options.seed, generations=self.options.head.generations,
        )  # fmt: skip
        embed = QuestionEmbedder(base, n_threads=self.config.conductor.n_threads)
        try:
            embeddings = embed.many([p.question for p in training])
        finally:
            embed.close()
        return fit_familiar(embeddings, kinds, shapes, target, fold_picks, kind_picks)

    def fit(
        self,
        head0: Head,
        inputs: np.ndarray,
        table: np.ndarray,
        index: ShapeIndex | None,
        support: np.ndarray | None = None,
    ) -> _Fitted:
        """The head (shapes) or the step policy (`index`; `support`: the runs behind each
        estimate of the table) that scores best on the table."""
        options, shapes, names = self.options, self.setup.shapes, self.setup.names
        curve: list[dict[str, float]] = []

        def generation(g: int, value: float) -> None:
            curve.append({"generation": g + 1, "train_reward": round(value, 4)})
            self.on_progress(
                Progress("evolve", g + 1, options.head.generations, f"reward {value:.3f}")
            )

        # Among shapes that are equally right, the fewer steps (--step-cost; by default a hair
        # per step, a tie-break).
        target = _target(shapes, table, options.head.step_cost)
        common = {
            "seed": options.seed,
            "generations": options.head.generations,
            "on_generation": generation,
        }
        if index is not None:
            step_weights, moves = fit_steps(
                inputs, target, shapes, names, support=support, **common
            )
            head: Head | StepHead = StepHead(
                head0.mean, head0.scale, head0.components, tuple(names), step_weights, moves
            )
            picks = index.columns(plan_steps(inputs, step_weights, moves))
        else:
            members = [i for i, s in enumerate(shapes) if len(s.workers) == 1 and not s.words]
            kinds = [p.category or "" for p in self.setup.training]
            choice = fit_head(inputs, target, kinds=kinds, members=members, **common)
            head = replace(head0, weights=choice.weights)
            picks = np.argmax(inputs @ choice.weights, axis=1)
            return _Fitted(head, picks, curve, choice)
        return _Fitted(head, picks, curve)

    def evaluate_after(self, record: dict[str, Any], runs: RewardRuns) -> None:
        """The trained conductor on the held-out questions; with rounds, also in one round (what
        its later rounds add)."""
        rounds_trained = self.options.head.rounds
        for rounds in sorted({1, rounds_trained}):
            label = "trained conductor" + (f", {rounds} rounds" if rounds_trained > 1 else "")
            after = held_out_score(
                self.runner,
                self.setup.held_out,
                self.name,
                self.options,
                label,
                self.on_progress,
                rounds,
                runs.budget,
            )
            if after is not None:
                record["evaluations"].append({"when": "after", **after.to_dict()})

    def close(self) -> None:
        spent, runs = self.spent, self.runs
        if spent is not None and runs is not None and self.work.is_dir():
            # Best effort (a full disk must not hide the error that ended the run): a resume
            # also counts the calls of this training's rows in the store.
            calls = runs.budget.stop()  # a rollout thread still running calls no more
            with contextlib.suppress(OSError):
                write_spent(self.work, spent[0] + calls, spent[1] + runs.budget.spent)
        if self.features is not None:
            self.features.close()
        self.runner.close()


def _target(shapes: Sequence[Shape], table: np.ndarray, step_cost: float) -> np.ndarray:
    """What the head maximizes: each shape's reward less its steps' cost."""
    steps = np.array([len(s.workers) for s in shapes], dtype=np.float64)
    return table - step_cost * steps


def train_head(
    config: Config,
    problems: Sequence[Problem],
    options: TrainOptions,
    *,
    data_file: Path | None = None,
    on_progress: OnProgress = lambda p: None,
    held_out_ids: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Train a shape head on `problems` for `config`'s pool; returns the training record
    (with `dry_run`: only the estimate of what it would spend).

    `held_out_ids` fixes the held-out questions (a bench comparing runs); by default they are
    a seeded `options.holdout` share.
    """
    started = time.monotonic()
    _require_cma()
    if options.head.tasks is None:
        options = replace(options, head=replace(options.head, tasks=DEFAULT_TASKS))
    name = registry.check_name(options.name)
    final = None
    if not options.head.dry_run:
        name, final = target(options)
    _check_head_options(options)
    check_keys(config)
    setup = _Setup.of(config, problems, options, held_out_ids)
    job = _HeadTraining(
        config, problems, options, setup, name, Runner(config, problems), on_progress, data_file
    )
    try:
        runs = job.reward_runs()
        plan = job.estimate(runs)
        if options.head.dry_run or final is None:
            on_progress(Progress("note", 0, 0, plan.line()))
            return {"name": name, "method": "head", "dry_run": True, "estimate": plan.to_dict()}
        base = resolve_base(config, "head")  # before the estimate is said: a bad base is all
        on_progress(Progress("note", 0, 0, plan.line()))
        return _train(job, runs, plan, base, final, started)
    except Exception as e:
        full = disk_full(e, name, job.work)
        if full is not None:
            raise full from e
        raise
    finally:
        job.close()


def _train(
    job: _HeadTraining,
    runs: RewardRuns,
    plan: Estimate,
    resolved_base: tuple[Any, Any],
    final: Path,
    started: float,
) -> dict[str, Any]:
    """The training itself, once the estimate is within the limits."""
    options, setup, work = job.options, job.setup, job.work
    head_options = options.head
    base_spec, base = resolved_base
    prepare(work, options, setup.meta)
    runs.run_id = _run_id(work)
    resumed = sum(1 for m in runs.rows.values() if m.run == runs.run_id)
    spent = job.open_budget(runs)
    head0, inputs = job.project(base.path)
    reward_limit = plan.rewards
    if head_options.max_calls is not None:  # the held-out runs' share stays theirs
        runs.budget.max_calls = reward_limit - spent[0]
    index = ShapeIndex.of(setup.shapes, setup.names) if setup.policy == "steps" else None
    explored: dict[str, int] = {}
    table, workflow_runs, support = _measure(
        runs, inputs, options, reward_limit, spent[0], job.config.cache.enabled, job.on_progress,
        index, explored,
    )  # fmt: skip
    words_notes = None
    if head_options.learn_words and index is None:
        head0, table, words_notes = _learn_words(job, runs, head0, table)
    if head_options.max_calls is not None:
        runs.budget.max_calls = head_options.max_calls - spent[0]
    table_notes = {
        "workflow_runs": workflow_runs,
        "resumed_runs": resumed,
        "worker_calls": spent[0] + runs.budget.calls,
        "budget_stopped": runs.stopped,
        **explored,
    }
    before = None
    if options.evaluate_before:
        before = held_out_score(
            job.runner,
            setup.held_out,
            job.config.conductor.model,
            options,
            "untrained conductor",
            job.on_progress,
            head_options.rounds,
            runs.budget,
        )
    fitted = job.fit(head0, inputs, table, index, support)
    compared = None
    if index is None and withholds_kinds(p.category or "" for p in setup.training):
        inputs, fitted, compared = _compare_reads(job, base.path, table, inputs, fitted)
    round_head = round_part = None
    if head_options.rounds > 1:
        round_head, round_part = train_round_head(
            job.runner,
            base.path,
            setup.training,
            [setup.shapes[i] for i in fitted.picks],
            setup.shapes,
            options,
            work,
            job.on_progress,
            TIE_BREAK,
        )
    familiar, familiar_report = job.familiarity(base.path, inputs, table, fitted)
    staged = stage(work)
    fitted.head.save(staged / registry.HEAD)
    if round_head is not None:
        round_head.save(staged / registry.ROUND_HEAD)
    if familiar is not None:
        familiar.save(staged / registry.FAMILIAR)
    extra = {
        "round_table": round_part,
        "before": before,
        "words": words_notes,
        "familiar": familiar_report,
        "reads": compared,
    }
    record = _record(job, base_spec, base.path, plan, runs, table, fitted, table_notes, extra)
    write_json(staged / registry.RECORD, record)
    install(work, final, options.force or options.resume)
    job.evaluate_after(record, runs)
    record["worker_calls"] = spent[0] + runs.budget.calls
    record["dollars"] = round(spent[1] + runs.budget.spent, 6)
    record["wall_seconds"] = round(time.monotonic() - started, 1)
    write_json(final / registry.RECORD, record)
    shutil.rmtree(work, ignore_errors=True)
    job.spent = None
    return record


def _learn_words(
    job: _HeadTraining, runs: RewardRuns, head0: Any, table: np.ndarray
) -> tuple[Any, np.ndarray, Any]:
    """The words phase: shapes whose words a pool model wrote, kept where they won, join the
    table as columns and the head as outputs (zero weights until the fit)."""
    setup, head_options = job.setup, job.options.head
    added, columns, notes = learn_words_phase(
        runs, table, head_options.step_cost, job.options.cost_weight, head_options.learn_words,
        tool_workers(job.config), job.on_progress,
    )  # fmt: skip
    if added:
        setup.shapes.extend(added)
        table = np.hstack([table, columns])
        weights = np.zeros((head0.weights.shape[0], len(setup.shapes)))
        head0 = replace(head0, weights=weights, shapes=tuple(setup.shapes))
    return head0, table, notes


def _compare_reads(
    job: _HeadTraining, base: Path, table: np.ndarray, inputs: Any, fitted: Any
) -> tuple[Any, Any, dict[str, Any] | None]:
    """Many kinds: the fit is scored on kinds it never trained on, so it can also say which
    reading of the question carries to a new kind best (train/head_reads.py). The inputs and
    fit kept, and what each reading validated."""
    first = head_reads.reading("prompt", inputs, fitted)
    if first is None:
        return inputs, fitted, None

    model = head_reads.embedder(job.config)

    def fit_reading(reads: str) -> head_reads.Reading | None:
        head0, projected = job.project(base, reads, model)
        return head_reads.reading(reads, projected, job.fit(head0, projected, table, None))

    others = ["question"]
    if model is not None:
        others.append("embedding")
    kept, compared = head_reads.compare(first, others, fit_reading)
    if model is not None:
        compared["embedder"] = model.spec
    return kept.inputs, kept.fitted, compared


def _record(
    job: _HeadTraining,
    base_spec: Any,
    base: Path,
    plan: Estimate,
    runs: RewardRuns,
    table: np.ndarray,
    fitted: _Fitted,
    table_notes: dict[str, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The trained conductor's record.json (docs/architecture.md, "Trained conductor");
    `extra`: the round head's table and the untrained conductor's held-out score, if any."""
    before, round_part = extra["before"], extra["round_table"]
    options, s = job.options, job.setup
    shapes, training = s.shapes, s.training
    fixed, fixed_reward = best_fixed_shape(table, shapes)
    picked = table[np.arange(len(training)), fitted.picks]
    return {
        **record_head(
            job.config,
            job.name,
            "head",
            base_spec,
            options,
            job.data_file,
            job.problems,
            training,
            s.held_out,
        ),
        "base_sha256": file_sha256(base),
        "worker_fingerprints": s.fingerprints,
        "hyperparameters": {
            "search": options.head.search,
            "policy": s.policy,
            "weights": fitted.head.size,
            "shapes": len(shapes),
            "max_shape_steps": max(len(shape.workers) for shape in shapes),
            "repeats": s.repeats,
            "pca_dims": int(fitted.head.components.shape[0]),
            "generations": options.head.generations,
            "cost_weight": options.cost_weight,
            "optimizer": (
                "sep-CMA-ES (cma)"
                if fitted.choice is None or fitted.choice.chosen == EVOLUTION
                else "softmax policy's expected reward, L2-penalized, Adam (numpy)"
            ),
            "tasks": options.head.tasks,
            "features": trained_features(base),
            "rounds": options.head.rounds,
            "step_cost": options.head.step_cost,
            "learn_words": options.head.learn_words,
            **({"named_shapes": [shape.label for shape in shapes]} if options.head.shapes else {}),
        },
        "estimate": plan.to_dict(),
        "reward_table": {
            "search": options.head.search,
            "workflow_runs": table_notes["workflow_runs"],
            "measured_share": round(
                table_notes["workflow_runs"] / (len(training) * len(shapes) * s.repeats), 4
            ),
            "reused_runs": sum(
                1
                for m in (runs.get(j) for j in _all_jobs(len(training), len(shapes), s.repeats))
                if m is not None and m.run != runs.run_id
            ),
            "resumed_runs": table_notes["resumed_runs"],
            "worker_calls": table_notes["worker_calls"],
            "budget_stopped": table_notes["budget_stopped"],
            **{k: v for k, v in table_notes.items() if k.startswith("explore_")},
            "failed_workers": _failed_workers(runs, s.names),
            "best_fixed_shape": fixed.label,
            "best_fixed_shape_reward": round(fixed_reward, 4),
            "head_train_reward": round(float(picked.mean()), 4),
            "picks_by_kind": _picks_by_kind(training, shapes, fitted.picks),
            "right_by_kind": _right_by_kind(runs, training, shapes, s.repeats),
            "oracle_train_reward": round(float(table.max(axis=1).mean()), 4),
        },
        **({"fit": _fit_part(fitted.choice, shapes)} if fitted.choice is not None else {}),
        **({"round_table": round_part} if round_part else {}),
        **({"learned_words": extra["words"]} if extra["words"] else {}),
        "familiar": extra["familiar"],
        **({"features_compared": extra["reads"]} if extra["reads"] else {}),
        "curve": fitted.curve,
        "evaluations": [{"when": "before", **before.to_dict()}] if before else [],
        "limits": {"max_calls": options.head.max_calls, "max_cost": options.head.max_cost},
        "worker_calls": None,
        "device": "cpu (llama.cpp)",
        "wall_seconds": None,
    }


def _fit_part(choice: HeadFit, shapes: Sequence[Shape]) -> dict[str, Any]:
    """The record's `fit`: the chosen fit's per-kind best member named by its shape's label."""
    part = choice.to_dict()
    part["kinds"] = {
        kind: {
            **scores,
            "best_member": None
            if scores.get("best_member") is None
            else shapes[scores["best_member"]].label,
        }
        for kind, scores in part["kinds"].items()
    }
    return part


def _picks_by_kind(
    training: Sequence[Problem], shapes: Sequence[Shape], picks: np.ndarray
) -> dict[str, dict[str, int]]:
    """How many of each kind's training questions the head sends to each shape, most first."""
    counts: dict[str, dict[str, int]] = {}
    for problem, pick in zip(training, picks, strict=True):
        kind = counts.setdefault(problem.category or "", {})
        label = shapes[int(pick)].label
        kind[label] = kind.get(label, 0) + 1
    return {
        kind: dict(sorted(c.items(), key=lambda item: -item[1]))
        for kind, c in sorted(counts.items())
    }


def _right_by_kind(
    runs: RewardRuns, training: Sequence[Problem], shapes: Sequence[Shape], repeats: int
) -> dict[str, dict[str, list[int]]]:
    """Per kind, each shape's [right, measured] runs on the kind's training questions (the
    adaptive search measures some runs only: those it did are counted)."""
    table: dict[str, dict[str, list[int]]] = {}
    for q, s, r in _all_jobs(len(training), len(shapes), repeats):
        m = runs.get((q, s, r))
        if m is None:
            continue
        kind = table.setdefault(training[q].category or "", {})
        counts = kind.setdefault(shapes[s].label, [0, 0])
        counts[0] += int(m.correct)
        counts[1] += 1
    return dict(sorted(table.items()))


def _all_jobs(questions: int, shapes: int, repeats: int) -> list[Job]:
    return [(q, s, r) for q in range(questions) for s in range(shapes) for r in range(repeats)]


def _require_cma() -> None:
    try:
        import cma  # noqa: F401
    except ImportError:
        raise InputError(
            "the head method needs the cma package: pip install 'conductor-cli[train-head]' "
            "(or [train], which adds torch for the LoRA methods)"
        ) from None
