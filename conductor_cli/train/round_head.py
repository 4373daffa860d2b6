"""`conductor train --rounds N` (head method): learn when to keep the team's answer.

Once the first head is evolved, each training question's first round is run `repeats` times with
the reward table's seeds (so those runs come from the cache), twice: the shape the head picks
(what `ask` will play) and a shape drawn at random (the head fits its training questions' draws
well, so its own first answers there are rarely wrong; held-out ones are wrong more often).
Each first answer is a situation. Its re-planning prompt (the question, the first workflow and
the team's answer, exactly as `ask` builds it in round 2) gives a hidden state, and every
action is scored: keep (the first answer's reward, no worker call) or each shape as a
corrective workflow whose steps read that answer (the attachment "answer of round 1"). A
second head over the re-planning prompt's hidden state is evolved on that table; in `ask`,
rounds 2..N ask it. One head serves every later round; it learns from round-2 situations.

A corrective round is only worth its calls where the team can fix what it got wrong. Before the
head is kept, it is cross-validated on its own situations (folds by question): where its picks
do no better than always keeping the answer on the folds it did not see, the trained conductor
always keeps (its later rounds never run a workflow), so more rounds never cost accuracy there.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli import waiting
from conductor_cli.errors import InputError
from conductor_cli.evals.records import Problem
from conductor_cli.policy.features import PromptFeatures, features_model, trained_features
from conductor_cli.policy.head import Head
from conductor_cli.policy.shapes import KEEP, Shape
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import replan_messages, worker_infos
from conductor_cli.run.workflow import Workflow
from conductor_cli.train.checkpoint import read_checkpoint, run_checkpointed
from conductor_cli.train.head_evolution import evolve, fit_pca
from conductor_cli.train.reward import reward
from conductor_cli.train.rollout import SEED_STRIDE, Runner, reward_of
from conductor_cli.train.shared import OnProgress, Progress, TrainOptions

CHECKPOINT = "rounds.jsonl"
FOLDS = 4


@dataclass(frozen=True)
class Situation:
    """A first round as the trained conductor plays it: what round 2 reads."""

    problem: Problem
    repeat: int
    variant: int  # 0: the head's pick, 1: a shape drawn at random
    workflow: Workflow
    answer: str
    correct: bool

    @property
    def seed(self) -> int:
        return SEED_STRIDE * self.repeat  # added to the conductor's seed


def first_rounds(
    runner: Runner,
    training: Sequence[Problem],
    picks: Sequence[Shape],
    shapes: Sequence[Shape],
    options: TrainOptions,
    on_progress: OnProgress,
) -> list[Situation]:
    """Each training question's first rounds (the head's pick and a random shape, `repeats`
    times each); a failed run is no situation (round 2 never runs after it)."""
    seed0 = runner.config.conductor.seed
    rng = random.Random(options.seed)
    jobs = [
        (qi, r, v, picks[qi] if v == 0 else rng.choice(shapes))
        for qi in range(len(training))
        for r in range(options.repeats)
        for v in (0, 1)
    ]

    def one(job: tuple[int, int, int, Shape]) -> Situation | None:
        qi, r, v, shape = job
        workflow = shape.workflow()
        run, correct = runner.run(training[qi], workflow, seed0 + SEED_STRIDE * r)
        if run is None:
            return None
        return Situation(training[qi], r, v, workflow, run.answer, correct)

    situations = []
    with ThreadPoolExecutor(max_workers=options.concurrency) as pool:
        for i, future in enumerate([pool.submit(one, job) for job in jobs]):
            situation = waiting.result(future)
            if situation is not None:
                situations.append(situation)
            on_progress(Progress("first rounds", i + 1, len(jobs)))
    return situations


def replan_features(
    features: PromptFeatures,
    situations: Sequence[Situation],
    infos: Sequence[Any],
    max_steps: int,
    on_progress: OnProgress,
) -> np.ndarray:
    """The hidden state after each situation's re-planning prompt (no attachments: training
    questions have none)."""
    rows = []
    for i, s in enumerate(situations):
        messages = replan_messages(s.problem.question, infos, (), max_steps, s.workflow, s.answer)
        rows.append(features(messages))
        on_progress(Progress("round features", i + 1, len(situations)))
    return np.stack(rows).astype(np.float64)


def round_table(
    runner: Runner,
    situations: Sequence[Situation],
    actions: Sequence[Shape],
    options: TrainOptions,
    checkpoint: Path,
    on_progress: OnProgress,
) -> tuple[np.ndarray, int, int]:
    """(reward per situation and action, worker calls made now, runs resumed). Action 0 is
    keep: the first answer's reward, nothing run. Every other action runs its shape with the
    first answer attached, as a corrective round does."""
    done = read_checkpoint(
        checkpoint,
        lambda row: ((row["q"], int(row["repeat"]), int(row["variant"]), int(row["action"])), row),
    )
    jobs = [
        (i, a)
        for i, s in enumerate(situations)
        for a in range(1, len(actions))
        if (s.problem.id, s.repeat, s.variant, a) not in done
    ]
    total = len(situations) * (len(actions) - 1)
    resumed = total - len(jobs)
    finished = resumed
    on_progress(Progress("round rewards", finished, total, f"{len(actions)} actions"))
    seed0 = runner.config.conductor.seed

    def one(job: tuple[int, int]) -> dict[str, Any]:
        i, a = job
        s = situations[i]
        seen = Attachment("answer of round 1", s.answer)
        run, correct = runner.run(
            s.problem, actions[a].workflow(), seed0 + s.seed, attachments=(seen,)
        )
        return {
            "q": s.problem.id,
            "repeat": s.repeat,
            "variant": s.variant,
            "action": a,
            "reward": reward_of(run, correct, options.cost_weight),
            "correct": correct,
            "calls": run.model_calls if run else 0,
        }

    def on_row(row: dict[str, Any]) -> None:
        nonlocal finished
        done[(row["q"], row["repeat"], row["variant"], row["action"])] = row
        finished += 1
        on_progress(Progress("round rewards", finished, total, f"{len(actions)} actions"))

    calls = run_checkpointed(jobs, one, checkpoint, options.concurrency, on_row)
    table = np.zeros((len(situations), len(actions)))
    for i, s in enumerate(situations):
        table[i, 0] = reward(parsed=True, correct=s.correct)
        for a in range(1, len(actions)):
            table[i, a] = done[(s.problem.id, s.repeat, s.variant, a)]["reward"]
    return table, calls, resumed


def train_round_head(
    runner: Runner,
    base: Path,
    training: Sequence[Problem],
    picks: Sequence[Shape],
    shapes: Sequence[Shape],
    options: TrainOptions,
    work: Path,
    on_progress: OnProgress,
    tie_break: float,
) -> tuple[Head, dict[str, Any]]:
    """The round head and its part of the training record."""
    c = runner.config.conductor
    situations = first_rounds(runner, training, picks, shapes, options, on_progress)
    if len(situations) < 2:
        raise InputError(
            f"--rounds: only {len(situations)} first rounds finished on the training questions; "
            "a round head needs at least 2 (check the pool with `conductor workers test`)"
        )
    # What a re-planning conductor is offered, as run/rounds lists it.
    infos = worker_infos(runner.config.workers)
    features = PromptFeatures(
        features_model(base, trained_features(base)), n_ctx=min(c.n_ctx, 4096),
        n_threads=c.n_threads,
        kept=runner.config.cache.enabled,
    )  # fmt: skip
    try:
        x = replan_features(features, situations, infos, c.max_steps, on_progress)
    finally:
        features.close()
    actions = [KEEP, *shapes]
    table, calls, resumed = round_table(
        runner, situations, actions, options, work / CHECKPOINT, on_progress
    )
    mean, scale, components = fit_pca(x, options.head.pca_dims)
    zeros = np.zeros((components.shape[0] + 1, len(actions)))
    head0 = Head(mean, scale, components, zeros, tuple(actions))
    inputs = head0.project(x)
    curve: list[dict[str, float]] = []

    def generation(g: int, value: float) -> None:
        curve.append({"generation": g + 1, "train_reward": round(value, 4)})
        on_progress(
            Progress("evolve rounds", g + 1, options.head.generations, f"reward {value:.3f}")
        )

    # Keep costs no step: among equally right actions it wins, then the fewer steps.
    steps = np.array([len(a.workers) for a in actions], dtype=np.float64)
    shaped = table - tie_break * steps
    weights = evolve(
        inputs,
        shaped,
        seed=options.seed + 101,
        generations=options.head.generations,
        on_generation=generation,
    )
    cv_head, cv_keep = cross_validate(
        inputs, table, shaped, [s.problem.id for s in situations], options
    )
    if cv_head <= cv_keep:
        weights = np.zeros_like(weights)
        weights[0, 0] = 1.0  # the bias row: keep, whatever the prompt
    head = replace(head0, weights=weights)
    picked = np.argmax(inputs @ weights, axis=1)
    right = np.array([s.correct for s in situations])
    kept = picked == 0

    def share(mask: np.ndarray) -> float | None:
        return round(float(kept[mask].mean()), 4) if mask.any() else None

    part = {
        "situations": len(situations),
        "first_right": int(right.sum()),
        "runs": len(situations) * (len(actions) - 1),
        "resumed_runs": resumed,
        "worker_calls": calls,
        "keep_reward": round(float(table[:, 0].mean()), 4),
        "best_fixed_action": actions[int(np.argmax(table.mean(axis=0)))].label,
        "best_fixed_action_reward": round(float(table.mean(axis=0).max()), 4),
        "head_train_reward": round(float(table[np.arange(len(situations)), picked].mean()), 4),
        "oracle_train_reward": round(float(table.max(axis=1).mean()), 4),
        "kept_share_first_right": share(right),
        "kept_share_first_wrong": share(~right),
        "cross_validation": {
            "folds": FOLDS,
            "head_reward": round(cv_head, 4),
            "keep_reward": round(cv_keep, 4),
            "used": "head" if cv_head > cv_keep else "keep",
        },
        "curve": curve,
    }
    return head, part


def cross_validate(
    inputs: np.ndarray,
    table: np.ndarray,
    shaped: np.ndarray,
    groups: Sequence[str],
    options: TrainOptions,
) -> tuple[float, float]:
    """(mean reward of the head's picks, of always keeping) on folds it was not evolved on;
    a question's situations stay in one fold."""
    ids = sorted(set(groups))
    random.Random(options.seed).shuffle(ids)
    fold_of = {q: i % FOLDS for i, q in enumerate(ids)}
    folds = np.array([fold_of[g] for g in groups])
    head: list[float] = []
    keep: list[float] = []
    for k in range(FOLDS):
        seen, unseen = folds != k, folds == k
        if not unseen.any() or seen.sum() < 2:
            continue
        weights = evolve(
            inputs[seen],
            shaped[seen],
            seed=options.seed + 211 + k,
            generations=options.head.generations,
        )
        picks = np.argmax(inputs[unseen] @ weights, axis=1)
        head.extend(table[unseen][np.arange(len(picks)), picks].tolist())
        keep.extend(table[unseen, 0].tolist())
    if not head:
        return 0.0, 0.0  # too few questions to tell: keep
    return float(np.mean(head)), float(np.mean(keep))
