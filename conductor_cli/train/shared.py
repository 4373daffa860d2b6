"""What every training method shares: its options, the split, the keys checked before a
rollout, the base model, and the part of `record.json` every method writes. The runner is in
runner.py, the work dir in workdir.py, checkpoints in checkpoint.py."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from conductor_cli.config.settings import Config
from conductor_cli.errors import ConfigError, InputError
from conductor_cli.evals.datasets import fingerprint
from conductor_cli.evals.records import Problem
from conductor_cli.models.catalog import ResolvedModel, load_catalog, resolve_gguf
from conductor_cli.models.spec import ModelSpec
from conductor_cli.policy import registry
from conductor_cli.policy.head import PCA_DIMS
from conductor_cli.runtime import pull_models_for
from conductor_cli.train.head_evolution import GENERATIONS

T = TypeVar("T")


def from_params(cls: type[T], params: Mapping[str, Any]) -> T:
    """An options record from the parameters of the same names (a command's options: each
    field of HeadOptions, LoraOptions and TrainOptions is the `--option` of its name); a field
    not among them keeps its default."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in params.items() if k in names})


@dataclass(frozen=True)
class HeadOptions:
    """`--method head` (head_method.py, round_head.py)."""

    generations: int = GENERATIONS
    pca_dims: int = PCA_DIMS
    # Who writes each step's task once the head has chosen the shape: "written" (the
    # conductor, under the shape's grammar) or "fixed" (the words the rewards were measured
    # with, shapes.ANSWER_TASK / CHECK_TASK: what was measured is what runs). None: the head
    # method's default, fixed (a conductor as small as SmolLM2 writes words that cost its
    # workers: ARC-Easy 0.58 written against 0.68 fixed, word sorting 0.66 against 0.88).
    tasks: str | None = None
    # Rounds the trained conductor plays; >= 2 also trains the round head (keep the team's
    # answer or correct it), rewarded on the answer after the last round.
    rounds: int = 1
    # "adaptive" (each worker once a question, then calls where the policy is unsure:
    # explore.py) or "all" (every shape on every question, `repeats` times)
    search: str = "adaptive"
    # "shapes" (one score per workflow shape: head.py), "steps" (step by step over workers as
    # vectors: step_head.py) or "auto" (shapes where the pool's shapes fit, steps beyond)
    policy: str = "auto"
    # The workflow shapes the head chooses among, by label (`coder > python<0`, words in
    # brackets: policy/shapes.parse_shape); empty: every shape the pool makes
    # (head_method.candidate_shapes).
    shapes: tuple[str, ...] = ()
    # The reward a step costs the shape head (its target: reward - step_cost x steps): at the
    # least a tie-break among equally right shapes; more makes one step worth its seconds.
    step_cost: float = 0.001
    # Rounds of the words search per kind of question (head_words.py); 0: the shapes' words.
    learn_words: int = 0
    max_calls: int | None = None  # worker calls this training may make (spend.py)
    max_cost: float | None = None  # USD
    dry_run: bool = False  # print the estimate, make no call


@dataclass(frozen=True)
class LoraOptions:
    """`--method expert-iteration` and `grpo` (lora_method.py)."""

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
    engine: str = "ours"  # ours (lora_method.py) | trl (trl_engine.py: TRL, accelerate)


@dataclass(frozen=True)
class TrainOptions:
    """What every method reads, and each method's own options."""

    name: str
    dataset: str  # humaneval | mcq | qa | mixed
    holdout: float = 0.2
    seed: int = 0
    repeats: int = 2  # runs of each (question, workflow): one lucky answer is not a policy
    cost_weight: float = 0.0
    concurrency: int = 4
    force: bool = False
    resume: bool = False
    evaluate_before: bool = True
    head: HeadOptions = HeadOptions()
    lora: LoraOptions = LoraOptions()


@dataclass(frozen=True)
class Progress:
    stage: str  # features | rewards | evolve | held-out
    done: int
    total: int
    detail: str = ""


OnProgress = Callable[[Progress], None]


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
