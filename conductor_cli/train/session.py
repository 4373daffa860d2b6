"""What every training method shares: options, the split, the runner that executes and scores
workflows through the project's own engine, the held-out score through `ask`'s planning path,
and the work dir that makes an interrupted training resumable."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from conductor_cli import waiting
from conductor_cli.api import NO_TRACE, RunOptions, RunResult, execute
from conductor_cli.config.settings import Config, atomic_write
from conductor_cli.errors import BudgetError, ConductorError, ConfigError, InputError
from conductor_cli.evals import scoring
from conductor_cli.evals.datasets import fingerprint
from conductor_cli.evals.records import Problem
from conductor_cli.models.catalog import ResolvedModel, load_catalog, resolve_gguf
from conductor_cli.models.spec import ModelSpec
from conductor_cli.run.budget import Budget
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import Workflow
from conductor_cli.runtime import Runtime, pull_models_for
from conductor_cli.sandbox import Sandbox
from conductor_cli.storage import paths
from conductor_cli.train import registry
from conductor_cli.train.head import GENERATIONS, PCA_DIMS
from conductor_cli.train.reward import reward, run_cost

SPLIT = "split.json"
# Repeat r of a run uses the conductor's seed + SEED_STRIDE * r (the reward tables and the
# first rounds a round head reads must draw the same runs, so they come from the cache).
SEED_STRIDE = 7919
K = TypeVar("K")
V = TypeVar("V")
J = TypeVar("J")


@dataclass(frozen=True)
class TrainOptions:
    name: str
    dataset: str  # humaneval | mcq | qa
    holdout: float = 0.2
    seed: int = 0
    repeats: int = 2  # runs of each (question, shape): one lucky answer is not a policy
    cost_weight: float = 0.0
    generations: int = GENERATIONS
    pca_dims: int = PCA_DIMS
    concurrency: int = 4
    force: bool = False
    resume: bool = False
    evaluate_before: bool = True
    # head: who writes each step's task once the head has chosen the shape: "written" (the
    # conductor, under the shape's grammar) or "fixed" (the words the rewards were measured
    # with, shapes.ANSWER_TASK / CHECK_TASK: what was measured is what runs).
    tasks: str = "written"
    # The LoRA methods (lora_method.py)
    iterations: int = 3  # expert iteration: rounds of sample -> run -> keep the right -> fit
    samples: int = 8  # workflows sampled per question (a round, or a GRPO group)
    steps: int = 40  # GRPO: optimizer steps
    questions_per_step: int = 4  # GRPO
    eval_every: int = 10  # GRPO: held-out score every N steps
    learning_rate: float | None = None  # None: the method's default
    epochs: int = 6  # expert iteration: passes over the kept workflows per round
    rank: int = 16
    explore: float = 0.25  # share of a question's samples whose shape is drawn uniformly
    device: str = "auto"  # auto | cpu | cuda
    # head: rounds the trained conductor plays; >= 2 also trains the round head (keep the
    # team's answer or correct it), rewarded on the answer after the last round
    rounds: int = 1
    # head: "adaptive" (each worker once a question, then calls where the policy is unsure:
    # explore.py) or "all" (every shape on every question, `repeats` times)
    search: str = "adaptive"
    max_calls: int | None = None  # worker calls this training may make (spend.py)
    max_cost: float | None = None  # USD
    dry_run: bool = False  # print the estimate, make no call


@dataclass(frozen=True)
class Progress:
    stage: str  # features | rewards | evolve | held-out
    done: int
    total: int
    detail: str = ""


OnProgress = Callable[[Progress], None]


@dataclass(frozen=True)
class HeldOut:
    """A conductor's score on the held-out questions."""

    accuracy: float
    reward: float
    n: int
    by_category: dict[str, float]
    shapes: dict[str, int]  # workflow shape label -> how many questions got it
    max_rounds: int = 1
    rounds: float = 1.0  # mean rounds whose workflow ran (a round that kept the answer ran none)
    # max_rounds >= 2: round 2's decisions after a right and after a wrong first answer
    second_round: dict[str, dict[str, int]] | None = None
    budget_stopped: bool = False  # --max-calls/--max-cost ended it before the last question

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "accuracy": round(self.accuracy, 4),
            "reward": round(self.reward, 4),
            "n": self.n,
            "by_category": {k: round(v, 4) for k, v in self.by_category.items()},
            "shapes": self.shapes,
        }
        if self.budget_stopped:
            out["budget_stopped"] = True
        if self.max_rounds > 1:
            out |= {
                "max_rounds": self.max_rounds,
                "rounds": round(self.rounds, 3),
                "second_round": self.second_round,
            }
        return out


def split(problems: Sequence[Problem], holdout: float, seed: int) -> tuple[list, list]:
    """(training, held-out) by a seeded shuffle; each keeps the dataset's order.

    `holdout` 0 trains on every problem: the proof is then `conductor eval` on a file of its own.
    """
    if not 0.0 <= holdout < 1.0:
        raise InputError(
            f"--holdout {holdout}: give a share from 0 (hold none out) to below 1, e.g. 0.2"
        )
    order = list(range(len(problems)))
    random.Random(seed).shuffle(order)
    n_held = max(1, round(len(problems) * holdout)) if holdout > 0 else 0
    held = set(order[:n_held])
    training = [p for i, p in enumerate(problems) if i not in held]
    held_out = [p for i, p in enumerate(problems) if i in held]
    if len(training) < 2:
        raise InputError(
            f"{len(problems)} problems leave {len(training)} to train on after holding out "
            f"{len(held_out)}; give at least 3 problems or a smaller --holdout"
        )
    return training, held_out


def check_keys(config: Config) -> None:
    """Every remote worker's key, before any training starts (a run would fail on each)."""
    for i, w in enumerate(config.workers):
        if w.api_key_env and not os.environ.get(w.api_key_env):
            raise ConfigError(
                f"workers[{i}] ({w.name}): environment variable {w.api_key_env} is not set; "
                f"export {w.api_key_env}=... before training (every rollout calls it)."
            )


class Runner:
    """Runs workflows and scores their answers, sharing models and litellm's helper."""

    def __init__(self, config: Config, problems: Sequence[Problem]) -> None:
        self.config = config
        self.runtime = Runtime(config)
        self.sandbox = Sandbox() if any(p.kind == "code" for p in problems) else None

    def run(
        self,
        problem: Problem,
        workflow: Workflow | None,
        seed: int,
        config: Config | None = None,
        attachments: Sequence[Attachment] = (),
        budget: Budget | None = None,
    ) -> tuple[RunResult | None, bool]:
        """(the run, whether its answer is right); (None, False) when the run failed. A call
        that would cross `budget` raises BudgetError: that run measured nothing."""
        try:
            run = execute(
                problem.question,
                config=config or self.config,
                attachments=attachments,
                workflow=workflow,
                options=RunOptions(seed=seed, budget=budget),
                trace=NO_TRACE,
                runtime=self.runtime,
            )
        except BudgetError:
            raise
        except ConductorError:
            return None, False  # a failed run is a wrong answer
        correct, _, _ = scoring.score(problem, run.answer, self.sandbox)
        return run, correct

    def close(self) -> None:
        self.runtime.close()


def reward_of(run: RunResult | None, correct: bool, cost_weight: float) -> float:
    if run is None:
        return reward(parsed=True, correct=False)
    totals = run.totals()
    cost = run_cost(totals["cost"], totals["tokens_in"] + totals["tokens_out"])
    return reward(parsed=True, correct=correct, cost=cost, cost_weight=cost_weight)


def work_dir(name: str) -> Path:
    return registry.conductors_dir() / f".{name}.training"


def prepare(work: Path, options: TrainOptions, meta: dict[str, Any]) -> None:
    """A fresh or resumed work dir whose split matches this run's."""
    split_file = work / SPLIT
    if work.exists() and options.resume:
        try:
            old = json.loads(split_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if old != meta:
            raise InputError(
                f"--resume: the interrupted training in {work} used another dataset, split or "
                "pool; run without --resume to start over"
            )
        return
    if work.exists():
        shutil.rmtree(work)
    paths.private_dir(work)
    write_json(split_file, meta)  # whole or absent: a full disk leaves no torn split


def held_out_score(
    runner: Runner,
    held_out: Sequence[Problem],
    conductor_model: str,
    options: TrainOptions,
    label: str,
    on_progress: OnProgress,
    max_rounds: int = 1,
    budget: Budget | None = None,
) -> HeldOut | None:
    """The conductor `conductor_model` planning (greedy, as `ask` does) on every question, in
    at most `max_rounds` rounds; None when nothing is held out (`--holdout 0`) or the budget
    allowed no question."""
    if not held_out:
        return None
    settings = replace(runner.config.conductor, model=conductor_model, max_rounds=max_rounds)
    config = replace(runner.config, conductor=settings)
    rewards: list[float] = []
    right: list[bool] = []
    used: list[int] = []
    shapes: Counter[str] = Counter()
    by_category: dict[str, list[bool]] = {}
    second: dict[str, Counter[str]] = {"first_right": Counter(), "first_wrong": Counter()}
    stopped = False
    for i, problem in enumerate(held_out):
        try:
            run, correct = runner.run(problem, None, config.conductor.seed, config, budget=budget)
        except BudgetError:
            stopped = True
            break
        rewards.append(reward_of(run, correct, options.cost_weight))
        right.append(correct)
        if run is not None:
            shapes[run.workflow.shape] += 1
            used.append(1 + sum(r.decision == "corrected" for r in run.rounds))
            if run.rounds and run.steps:
                first, _, _ = scoring.score(problem, run.steps[-1].output, runner.sandbox)
                side = second["first_right" if first else "first_wrong"]
                side["n"] += 1
                side[run.rounds[0].decision] += 1
        by_category.setdefault(problem.category or "all", []).append(correct)
        on_progress(Progress("held-out", i + 1, len(held_out), label))
    if not right:
        return None
    return HeldOut(
        accuracy=float(np.mean(right)),
        reward=float(np.mean(rewards)),
        n=len(right),
        by_category={k: float(np.mean(v)) for k, v in sorted(by_category.items())},
        shapes=dict(shapes.most_common()),
        max_rounds=max_rounds,
        rounds=float(np.mean(used)) if used else 0.0,
        second_round={k: dict(v) for k, v in second.items()} if max_rounds > 1 else None,
        budget_stopped=stopped,
    )


def replace_dir(new: Path, target: Path) -> None:
    """`new` takes `target`'s place; the old one is removed only once the new one is in place."""
    old = target.with_name(f".{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    if old.exists():
        shutil.rmtree(old)


def stage(work: Path) -> Path:
    """An empty `work/final`, where a method writes what `install` moves into place."""
    staged = work / "final"
    if staged.exists():
        shutil.rmtree(staged)
    paths.private_dir(staged)
    return staged


def install(work: Path, final: Path, force: bool) -> None:
    """Move the trained files into place; an older conductor of that name goes only now."""
    if final.exists() and not force:
        raise InputError(f"{final} exists; add --force to replace it")
    replace_dir(work / "final", final)


def target(options: TrainOptions) -> tuple[str, Path]:
    """(the checked name, its directory), refusing to overwrite without --force or --resume."""
    name = registry.check_name(options.name)
    final = registry.conductors_dir() / name
    if final.exists() and not (options.force or options.resume):
        raise InputError(f"a conductor named {name!r} exists ({final}); add --force to replace it")
    return name, final


def split_problems(
    problems: Sequence[Problem], options: TrainOptions, held_out_ids: frozenset[str] | None
) -> tuple[list[Problem], list[Problem]]:
    """(training, held-out): `held_out_ids` when a bench fixes them, else a seeded split."""
    if held_out_ids is None:
        return split(problems, options.holdout, options.seed)
    training = [p for p in problems if p.id not in held_out_ids]
    held_out = [p for p in problems if p.id in held_out_ids]
    return training, held_out


def record_head(
    config: Config,
    name: str,
    method: str,
    base_spec: str,
    options: TrainOptions,
    data_file: Path | None,
    problems: Sequence[Problem],
    training: Sequence[Problem],
    held_out: Sequence[Problem],
) -> dict[str, Any]:
    """The part of `record.json` every method writes: what was trained, for which pool, on what."""
    return {
        "name": name,
        "method": method,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "base_model": base_spec,
        "pool": [
            {"name": w.name, "model": w.model, "description": w.description} for w in config.workers
        ],
        "pool_fingerprint": registry.pool_fingerprint(config.workers),
        "max_steps": config.conductor.max_steps,
        "dataset": {
            "kind": options.dataset,
            "file": str(data_file) if data_file else None,
            "fingerprint": fingerprint(problems),
            "problems": len(problems),
            "training": len(training),
            "held_out": len(held_out),
            "holdout": options.holdout,
            "split_seed": options.seed,
        },
    }


def read_checkpoint(path: Path, parse: Callable[[dict[str, Any]], tuple[K, V]]) -> dict[K, V]:
    """A JSONL checkpoint's rows by key; a line torn by Ctrl-C is skipped, so its work is done
    again."""
    done: dict[K, V] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            key, value = parse(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        done[key] = value
    return done


def run_checkpointed(
    jobs: Sequence[J],
    one: Callable[[J], dict[str, Any]],
    checkpoint: Path,
    concurrency: int,
    on_row: Callable[[dict[str, Any]], None],
) -> int:
    """Run `jobs` on `concurrency` threads; each row is appended to `checkpoint` as it finishes,
    in the jobs' order, then given to `on_row`. Returns the worker calls made (`calls`). Ctrl-C
    cancels the jobs not started; the rows written stay for a resume."""
    calls = 0
    with Checkpoint(checkpoint) as out, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(one, job) for job in jobs]
        try:
            for future in futures:
                row = waiting.result(future)
                out.append(row)
                calls += row["calls"]
                on_row(row)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return calls


class Checkpoint:
    """A JSONL checkpoint open for appending, one whole line or nothing: a row that a full disk
    (or Ctrl-C) cuts short is taken back, so the rows before stay exactly as they were, and a
    torn tail left by a killed run is cut on opening, so no new row is glued to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self._end = self._cut_torn_tail()
        except BaseException:
            os.close(self._fd)
            raise

    def _cut_torn_tail(self) -> int:
        """The file's length up to its last newline, after cutting whatever follows it."""
        size = end = os.fstat(self._fd).st_size
        while end > 0:
            start = max(0, end - 65536)
            newline = os.pread(self._fd, end - start, start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end < size:
            os.ftruncate(self._fd, end)  # shrinking needs no free space
        return end

    def append(self, row: dict[str, Any]) -> None:
        data = (json.dumps(row) + "\n").encode("utf-8")
        try:
            written = 0
            while written < len(data):
                n = os.write(self._fd, data[written:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += n
        except BaseException as e:
            # If even this fails, the next opening cuts the torn tail; the loader skips it.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._end)
            if isinstance(e, OSError) and e.filename is None:
                raise OSError(e.errno, e.strerror, str(self.path)) from e
            raise
        self._end += len(data)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def disk_full(error: BaseException, name: str, work: Path) -> ConductorError | None:
    """The one line for a full disk (or quota) met while training `name`, else None: what
    could not be written, that the checkpoint in `work` is kept, and how to continue."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            where = cause.filename or f"{paths.data_dir()} or {paths.cache_dir()}"
            reason = cause.strerror or os.strerror(cause.errno)
            break
        if isinstance(cause, sqlite3.OperationalError) and (
            getattr(cause, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "disk is full" in str(cause)
        ):
            where, reason = f"the response cache in {paths.cache_dir()}", str(cause)
            break
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    else:
        return None
    return ConductorError(
        f"disk full: cannot write {where} ({reason}); the checkpoint in {work} keeps the work "
        f"done before: free space, then `conductor train ... --out {name} --resume` continues"
    )


def write_json(path: Path, data: dict[str, Any]) -> None:
    # A reader sees the old record or the new one, never half of one.
    atomic_write(path, json.dumps(data, indent=2).encode("utf-8"))


def resolve_base(config: Config, method: str) -> tuple[str, ResolvedModel]:
    """(the base model's spec, its GGUF): a trained conductor trains again from its base."""
    c = config.conductor
    base_spec = c.model
    trained_base = registry.find(base_spec)
    if trained_base is not None:
        base_spec = trained_base.base_model
    spec = ModelSpec.for_conductor(base_spec)
    if not spec.local:
        raise InputError(
            f"conductor.model {c.model!r} is served through litellm; --method {method} trains "
            "the conductor's own weights or hidden state, so train a local GGUF conductor"
        )
    catalog = load_catalog()
    pull_models_for(config, catalog)  # the one download step (the base included) before training
    base = resolve_gguf(spec.name, catalog, "conductor.model")
    return base_spec, base
