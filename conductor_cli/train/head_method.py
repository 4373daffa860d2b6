"""`conductor train --method head`: learn which workflow shape fits which question.

1. Split the dataset by a seeded shuffle into training and held-out questions.
2. Read the conductor's hidden state after its planning prompt for every question (llama.cpp).
3. Run every shape of at most two steps on every training question, `repeats` times, through
   the project's own engine (cache, retries, parallel steps), and score each answer with
   eval's scorers: the reward table. Each run is appended to a checkpoint as it finishes, so
   an interrupted run resumes where it stopped.
4. Evolve a linear head over the PCA-reduced hidden states with sep-CMA-ES to maximize the
   mean reward of the shapes it picks.
5. Score the untrained conductor and the trained one on the held-out questions through the
   planning path `ask` uses (the trained one: shape from the head, tasks from the conductor).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.config.settings import MAX_ROUNDS_LIMIT, Config
from conductor_cli.errors import InputError
from conductor_cli.evals.datasets import fingerprint
from conductor_cli.evals.records import Problem
from conductor_cli.models.catalog import file_sha256
from conductor_cli.run.planner import plan_messages, worker_infos
from conductor_cli.train import registry
from conductor_cli.train.chooser import TASKS
from conductor_cli.train.features import PromptFeatures
from conductor_cli.train.head import Head, best_fixed_shape, evolve, fit_pca
from conductor_cli.train.round_head import train_round_head
from conductor_cli.train.session import (
    SEED_STRIDE,
    OnProgress,
    Progress,
    Runner,
    TrainOptions,
    check_keys,
    disk_full,
    held_out_score,
    install,
    prepare,
    read_checkpoint,
    record_head,
    resolve_base,
    reward_of,
    run_checkpointed,
    split_problems,
    stage,
    target,
    work_dir,
    write_json,
)
from conductor_cli.train.shapes import Shape, enumerate_shapes

CHECKPOINT = "rewards.jsonl"
TIE_BREAK = 0.001


def _reward_table(
    runner: Runner,
    training: Sequence[Problem],
    shapes: Sequence[Shape],
    options: TrainOptions,
    checkpoint: Path,
    on_progress: OnProgress,
) -> tuple[np.ndarray, int, int]:
    """(mean reward per question and shape, worker calls made now, runs resumed)."""
    done = read_checkpoint(
        checkpoint, lambda row: ((row["q"], int(row["shape"]), int(row["repeat"])), row)
    )
    jobs = [
        (qi, si, r)
        for qi in range(len(training))
        for si in range(len(shapes))
        for r in range(options.repeats)
        if (training[qi].id, si, r) not in done
    ]
    total = len(training) * len(shapes) * options.repeats
    resumed = total - len(jobs)
    finished = resumed
    on_progress(Progress("rewards", finished, total, f"{len(shapes)} shapes"))
    seed0 = runner.config.conductor.seed

    def one(job: tuple[int, int, int]) -> dict[str, Any]:
        qi, si, r = job
        problem = training[qi]
        run, correct = runner.run(problem, shapes[si].workflow(), seed0 + SEED_STRIDE * r)
        return {
            "q": problem.id,
            "shape": si,
            "repeat": r,
            "reward": reward_of(run, correct, options.cost_weight),
            "correct": correct,
            "calls": run.model_calls if run else 0,
        }

    def on_row(row: dict[str, Any]) -> None:
        nonlocal finished
        done[(row["q"], row["shape"], row["repeat"])] = row
        finished += 1
        on_progress(Progress("rewards", finished, total, f"{len(shapes)} shapes"))

    calls = run_checkpointed(jobs, one, checkpoint, options.concurrency, on_row)
    table = np.zeros((len(training), len(shapes)))
    for qi, problem in enumerate(training):
        for si in range(len(shapes)):
            rewards = [done[(problem.id, si, r)]["reward"] for r in range(options.repeats)]
            table[qi, si] = float(np.mean(rewards))
    return table, calls, resumed


def train_head(
    config: Config,
    problems: Sequence[Problem],
    options: TrainOptions,
    *,
    data_file: Path | None = None,
    on_progress: OnProgress = lambda p: None,
    held_out_ids: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Train a shape head on `problems` for `config`'s pool; returns the training record.

    `held_out_ids` fixes the held-out questions (a bench comparing runs); by default they are
    a seeded `options.holdout` share.
    """
    started = time.monotonic()
    _require_cma()
    name, final = target(options)
    if options.repeats < 1:
        raise InputError(f"--repeats {options.repeats}: must be at least 1")
    if not 1 <= options.rounds <= MAX_ROUNDS_LIMIT:
        raise InputError(f"--rounds {options.rounds}: give 1 to {MAX_ROUNDS_LIMIT} rounds.")
    if options.tasks not in TASKS:
        raise InputError(f"--tasks {options.tasks!r}: use one of {', '.join(TASKS)}")
    check_keys(config)
    c = config.conductor
    base_spec, base = resolve_base(config, "head")
    shapes = enumerate_shapes([w.name for w in config.workers], c.max_steps)
    training, held_out = split_problems(problems, options, held_out_ids)
    meta = {
        "dataset": options.dataset,
        "problems": fingerprint(problems),
        "holdout": options.holdout,
        "held_out": sorted(p.id for p in held_out),
        "seed": options.seed,
        "repeats": options.repeats,
        "pool": registry.pool_fingerprint(config.workers),
        "cost_weight": options.cost_weight,
        **({"rounds": options.rounds} if options.rounds > 1 else {}),
    }
    work = work_dir(name)
    prepare(work, options, meta)

    runner = Runner(config, problems)
    features: PromptFeatures | None = None
    try:
        infos = worker_infos(config.workers)
        features = PromptFeatures(base.path, n_ctx=min(c.n_ctx, 4096), n_threads=c.n_threads)
        hidden = []
        for i, problem in enumerate(training):
            hidden.append(features(plan_messages(problem.question, infos, (), c.max_steps)))
            on_progress(Progress("features", i + 1, len(training)))
        features.close()
        features = None
        table, calls, resumed = _reward_table(
            runner, training, shapes, options, work / CHECKPOINT, on_progress
        )
        before = None
        if options.evaluate_before:
            before = held_out_score(
                runner,
                held_out,
                c.model,
                options,
                "untrained conductor",
                on_progress,
                options.rounds,
            )
        x = np.stack(hidden).astype(np.float64)
        mean, scale, components = fit_pca(x, options.pca_dims)
        zeros = np.zeros((components.shape[0] + 1, len(shapes)))
        head0 = Head(mean, scale, components, zeros, tuple(shapes))
        inputs = head0.project(x)
        curve: list[dict[str, float]] = []

        def generation(g: int, value: float) -> None:
            curve.append({"generation": g + 1, "train_reward": round(value, 4)})
            on_progress(Progress("evolve", g + 1, options.generations, f"reward {value:.3f}"))

        # Among shapes that are equally right, the fewer steps (a hair per step breaks ties).
        steps = np.array([len(s.workers) for s in shapes], dtype=np.float64)
        weights = evolve(
            inputs,
            table - TIE_BREAK * steps,
            seed=options.seed,
            generations=options.generations,
            on_generation=generation,
        )
        head = replace(head0, weights=weights)
        picks = np.argmax(inputs @ weights, axis=1)
        fixed, fixed_reward = best_fixed_shape(table, shapes)
        round_head = round_part = None
        if options.rounds > 1:
            round_head, round_part = train_round_head(
                runner,
                base.path,
                training,
                [shapes[i] for i in picks],
                shapes,
                options,
                work,
                on_progress,
                TIE_BREAK,
            )
        staged = stage(work)
        head.save(staged / registry.HEAD)
        if round_head is not None:
            round_head.save(staged / registry.ROUND_HEAD)
        record: dict[str, Any] = {
            **record_head(
                config, name, "head", base_spec, options, data_file, problems, training, held_out
            ),
            "base_sha256": file_sha256(base.path),
            "hyperparameters": {
                "shapes": len(shapes),
                "max_shape_steps": 2,
                "repeats": options.repeats,
                "pca_dims": int(components.shape[0]),
                "generations": options.generations,
                "cost_weight": options.cost_weight,
                "optimizer": "sep-CMA-ES (cma)",
                "tasks": options.tasks,
                "rounds": options.rounds,
            },
            "reward_table": {
                "workflow_runs": len(training) * len(shapes) * options.repeats,
                "resumed_runs": resumed,
                "worker_calls": calls,
                "best_fixed_shape": fixed.label,
                "best_fixed_shape_reward": round(fixed_reward, 4),
                "head_train_reward": round(float(table[np.arange(len(training)), picks].mean()), 4),
                "oracle_train_reward": round(float(table.max(axis=1).mean()), 4),
            },
            **({"round_table": round_part} if round_part else {}),
            "curve": curve,
            "evaluations": [{"when": "before", **before.to_dict()}] if before else [],
            "device": "cpu (llama.cpp)",
            "wall_seconds": None,
        }
        write_json(staged / registry.RECORD, record)
        install(work, final, options.force or options.resume)
        # With rounds, the trained conductor in one round too: what its later rounds add.
        for rounds in sorted({1, options.rounds}):
            label = "trained conductor" + (f", {rounds} rounds" if options.rounds > 1 else "")
            after = held_out_score(runner, held_out, name, options, label, on_progress, rounds)
            if after is not None:
                record["evaluations"].append({"when": "after", **after.to_dict()})
        record["wall_seconds"] = round(time.monotonic() - started, 1)
        write_json(final / registry.RECORD, record)
        shutil.rmtree(work, ignore_errors=True)
        return record
    except Exception as e:
        full = disk_full(e, name, work)
        if full is not None:
            raise full from e
        raise
    finally:
        if features is not None:
            features.close()
        runner.close()


def _require_cma() -> None:
    try:
        import cma  # noqa: F401
    except ImportError:
        raise InputError(
            "the head method needs the cma package: pip install 'conductor-cli[train-head]' "
            "(or [train], which adds torch for the LoRA methods)"
        ) from None
