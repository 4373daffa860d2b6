"""`conductor train --method expert-iteration | grpo`: a LoRA on the conductor's own weights.

Both methods share one loop body: sample workflows for training questions from the current
conductor (llama.cpp, the pool's grammar, the exported adapter: what `ask` runs), run each on
the pool through the project's engine, score the answer (1 / 0.5 / 0, minus cost), and fit the
LoRA in torch on the routing decisions of the samples (routing.py). They differ in what is fit:

- expert iteration: per question, the shape whose samples scored best on average (more than
  one execution judges it, not one lucky answer), fewest steps among equals; up to 3 of its
  right samples are fit by maximum likelihood. A share `explore` of the samples has its shape
  drawn uniformly and forced by the grammar, so no kind of question is left without a right
  example once the policy grows confident.
- GRPO (the paper's): every sample, weighted by its reward minus its group's mean over the
  group's spread; one optimizer step per batch of questions, on policy, no KL term.

Every round (or `eval_every` steps) the adapter is exported and the held-out questions are
planned greedily through `ask`'s path with it: the held-out curve in `record.json`.
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from conductor_cli.config.settings import Config
from conductor_cli.disk import paths
from conductor_cli.errors import InputError, WorkflowError
from conductor_cli.evals.datasets import fingerprint
from conductor_cli.evals.records import Problem
from conductor_cli.models.catalog import file_sha256
from conductor_cli.policy import registry
from conductor_cli.policy.shapes import Shape, enumerate_shapes, shape_grammar
from conductor_cli.run.budget import Budget
from conductor_cli.run.planner import Conductor, WorkerInfo, plan_messages, worker_infos
from conductor_cli.train.adapter_gguf import MODULES
from conductor_cli.train.checkpoint import read_checkpoint, run_checkpointed
from conductor_cli.train.examples import Encoder, Example
from conductor_cli.train.rollout import SEED_STRIDE, HeldOut, Runner, held_out_score, reward_of
from conductor_cli.train.shared import (
    OnProgress,
    Progress,
    TrainOptions,
    check_keys,
    record_head,
    resolve_base,
    split_problems,
)
from conductor_cli.train.workdir import (
    disk_full,
    install,
    prepare,
    replace_dir,
    stage,
    target,
    work_dir,
    write_json,
)

if TYPE_CHECKING:
    from conductor_cli.train.lora_model import Policy

LORA_METHODS = ("expert-iteration", "grpo")
LEARNING_RATE = {"expert-iteration": 1e-3, "grpo": 3e-4}  # measured here (PITFALLS, Learning)
KEEP_PER_QUESTION = 3
MINIBATCH = 16
TIE_BREAK = 0.001  # per step: among equally right shapes, the shorter
STATE = "state.json"
POLICY = "policy"
# Step k's policy until state.json says k is done: a stop (or a full disk) between the two
# writes must not leave a policy that has fitted step k beside a state that will fit it again.
POLICY_NEXT = "policy-next"
SAMPLES = "samples.jsonl"
STEP = "step.json"  # in POLICY_NEXT: the step its policy has fitted


@dataclass(frozen=True)
class Sample:
    q: str
    index: int
    reply: str
    shape: str
    steps: int
    forced: bool
    reward: float
    correct: float  # share of its runs that were right
    calls: int

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


class FixedShape:
    """A chooser that forces one shape; the conductor writes the tasks (exploration)."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape

    def grammar(self, messages: tuple[dict[str, str], ...], question: str) -> str:
        return shape_grammar(self.shape)

    def fixed_reply(self, messages: tuple[dict[str, str], ...], question: str) -> str | None:
        return None  # the conductor writes the tasks

    def replan_grammar(self, messages: tuple[dict[str, str], ...]) -> str | None:
        return None  # the LoRA methods train first rounds only

    def close(self) -> None:
        pass


class Sampler:
    """Samples and scores workflows with one conductor: the base GGUF, or a directory holding
    the adapter of an earlier step, resolved as `ask` resolves `conductor.model`."""

    def __init__(
        self,
        runner: Runner,
        conductor_model: str,
        infos: Sequence[WorkerInfo],
        shapes: Sequence[Shape],
        options: TrainOptions,
        budget: Budget | None = None,
    ) -> None:
        settings = replace(runner.config.conductor, model=conductor_model)
        config = replace(runner.config, conductor=settings)
        self.backend = runner.runtime.raw_conductor(config)
        self.runner = runner
        self.infos = list(infos)
        self.shapes = list(shapes)
        self.options = options
        self.max_steps = runner.config.conductor.max_steps
        self.budget = budget  # None: no limit (--engine ours); a shared ledger with TRL

    def sample(self, problem: Problem, index: int, seed: int, forced: Shape | None) -> Sample:
        conductor = Conductor(
            self.backend,
            temperature=1.0,
            seed=seed,
            chooser=FixedShape(forced) if forced else None,
        )
        try:
            plan = conductor.plan(problem.question, self.infos, (), self.max_steps)
        except WorkflowError:
            return Sample(problem.id, index, "", "", 0, forced is not None, 0.0, 0.0, 0)
        rewards = []
        right = []
        calls = 0
        for r in range(self.options.repeats):
            run, correct = self.runner.run(
                problem,
                plan.workflow,
                self.runner.config.conductor.seed + SEED_STRIDE * r,
                budget=self.budget,
            )
            rewards.append(reward_of(run, correct, self.options.cost_weight))
            right.append(correct)
            calls += run.model_calls if run else 0
        return Sample(
            problem.id,
            index,
            plan.reply,
            plan.workflow.shape,
            len(plan.workflow.steps),
            forced is not None,
            float(np.mean(rewards)),
            float(np.mean(right)),
            calls,
        )


def sample_round(
    sampler: Sampler,
    problems: Sequence[Problem],
    n: int,
    explore: float,
    seed: int,
    checkpoint: Path,
    on_progress: OnProgress,
    label: str,
) -> list[Sample]:
    """`n` scored samples per problem; each is appended to `checkpoint` as it finishes, so an
    interrupted round resumes with the samples it has."""
    done = read_checkpoint(checkpoint, lambda row: ((row["q"], int(row["index"])), Sample(**row)))
    rng = random.Random(seed)
    jobs = []
    for qi, problem in enumerate(problems):
        for i in range(n):
            # Drawn for every sample, done or not: a resumed round forces the same shapes.
            forced = rng.choice(sampler.shapes) if rng.random() < explore else None
            if (problem.id, i) not in done:
                jobs.append((problem, i, seed * 100_003 + qi * 101 + i, forced))
    total = len(problems) * n
    finished = total - len(jobs)
    on_progress(Progress(label, finished, total))

    def on_row(row: dict[str, Any]) -> None:
        nonlocal finished
        s = Sample(**row)
        done[(s.q, s.index)] = s
        finished += 1
        right = np.mean([x.correct for x in done.values()])
        on_progress(Progress(label, finished, total, f"right {right:.2f}"))

    run_checkpointed(
        jobs,
        lambda job: sampler.sample(*job).to_dict(),
        checkpoint,
        sampler.options.concurrency,
        on_row,
    )
    return [done[(p.id, i)] for p in problems for i in range(n)]


def select_experts(samples: Sequence[Sample]) -> list[Sample]:
    """Per question: the right samples of the shape that scored best over all its samples."""
    by_q: dict[str, list[Sample]] = {}
    for s in samples:
        if s.reply:
            by_q.setdefault(s.q, []).append(s)
    kept: list[Sample] = []
    for group in by_q.values():
        by_shape: dict[str, list[Sample]] = {}
        for s in group:
            by_shape.setdefault(s.shape, []).append(s)
        best = max(
            by_shape.values(),
            key=lambda ss: np.mean([s.reward for s in ss]) - TIE_BREAK * ss[0].steps,
        )
        right = [s for s in best if s.correct >= 0.5]
        kept.extend(sorted(right, key=lambda s: -s.correct)[:KEEP_PER_QUESTION])
    return kept


def minibatches(
    chosen: Sequence[Sample], size: int, rng: random.Random, epochs: int
) -> list[list[int]]:
    """Indices into `chosen`, `epochs` shuffled passes of about `size`; a question's samples
    stay in one minibatch, where they share one pass over their prompt (policy.py)."""
    by_q: dict[str, list[int]] = {}
    for i, s in enumerate(chosen):
        by_q.setdefault(s.q, []).append(i)
    groups = list(by_q.values())
    out: list[list[int]] = []
    for _ in range(epochs):
        rng.shuffle(groups)
        current: list[int] = []
        for group in groups:
            if current and len(current) + len(group) > size:
                out.append(current)
                current = []
            current.extend(group)
        if current:
            out.append(current)
    return out


def grpo_weights(samples: Sequence[Sample]) -> list[float]:
    """Each sample's advantage: its reward against its question's group (mean, spread)."""
    by_q: dict[str, list[float]] = {}
    for s in samples:
        by_q.setdefault(s.q, []).append(s.reward)
    out = []
    for s in samples:
        group = np.array(by_q[s.q])
        spread = float(group.std())
        out.append(0.0 if spread < 1e-6 else float((s.reward - group.mean()) / spread))
    return out


def save_conductor(directory: Path, policy: Policy, record: dict[str, Any]) -> Path:
    """A trained conductor in `directory` (adapter + record) that `conductor.model` may name."""
    paths.private_dir(directory)
    policy.export(directory / registry.ADAPTER)
    write_json(directory / registry.RECORD, record)
    return directory


def export_checked(
    policy: Policy, base: Path, work: Path, on_progress: OnProgress
) -> tuple[Path, dict[str, Any]]:
    """The trained adapter staged for installing (`adapter.gguf` and the peft copy) and the
    export check's verdict: llama.cpp's greedy continuations against torch's."""
    from conductor_cli.train.export_check import check_export

    staged = stage(work)
    policy.export(staged / registry.ADAPTER)
    policy.save_adapter(staged / "peft")
    on_progress(Progress("export check", 0, 1))
    export = check_export(policy, base, staged / registry.ADAPTER)
    on_progress(Progress("export check", 1, 1, f"{export['identical']}/{export['prompts']}"))
    return staged, export


def _check_lora_options(options: TrainOptions, method: str) -> None:
    if method not in LORA_METHODS:
        raise InputError(f"--method {method!r}: use one of head, {', '.join(LORA_METHODS)}")
    for flag, value in (
        ("--repeats", options.repeats),
        ("--samples", options.lora.samples),
        ("--iterations", options.lora.iterations),
        ("--steps", options.lora.steps),
    ):
        if value < 1:
            raise InputError(f"{flag} {value}: must be at least 1")


@dataclass
class _LoraTraining:
    """One LoRA training, step by step: sample workflows, fit them, save the step, and at the
    end export the adapter and write the record (train_lora runs them in order)."""

    config: Config
    problems: Sequence[Problem]
    options: TrainOptions
    method: str
    name: str
    base_spec: Any
    base: Path
    device: str
    lr: float
    training: list[Problem]
    held_out: list[Problem]
    work: Path
    state: dict[str, Any]
    runner: Runner
    encoder: Encoder
    policy: Policy
    on_progress: OnProgress
    data_file: Path | None
    fit_seconds: float = 0.0
    sample_seconds: float = 0.0

    @property
    def experts(self) -> bool:
        return self.method == "expert-iteration"

    @property
    def total(self) -> int:
        return self.options.lora.iterations if self.experts else self.options.lora.steps

    @property
    def infos(self) -> list[WorkerInfo]:
        return worker_infos(self.config.workers)

    @functools.cached_property
    def shapes(self) -> list[Shape]:
        """Every workflow shape the conductor may write for this pool (what it samples)."""
        return enumerate_shapes(
            [w.name for w in self.config.workers], self.config.conductor.max_steps
        )

    def record_of(self, **extra: Any) -> dict[str, Any]:
        head = record_head(
            self.config, self.name, self.method, self.base_spec, self.options, self.data_file,
            self.problems, self.training, self.held_out,
        )  # fmt: skip
        return {**head, **extra}

    def evaluate(self, label: str, directory: Path | None) -> HeldOut | None:
        model = str(directory) if directory is not None else self.config.conductor.model
        return held_out_score(
            self.runner, self.held_out, model, self.options, label, self.on_progress
        )

    def evaluate_before(self) -> None:
        if self.options.evaluate_before and self.state.get("before") is None:
            before = self.evaluate("untrained conductor", None)
            self.state["before"] = before.to_dict() if before is not None else None
            write_json(self.work / STATE, self.state)

    def sample(self, k: int, current: Path | None) -> tuple[list[Problem], list[Sample]]:
        """Step k's questions and the workflows the current conductor wrote for them, run."""
        options, total = self.options, self.total
        sampler = Sampler(
            self.runner, str(current or self.base_spec), self.infos, self.shapes, options
        )
        if self.experts:
            batch, explore, sampling = self.training, options.lora.explore, f"round {k}/{total}"
        else:
            order = list(range(len(self.training)))
            random.Random(options.seed).shuffle(order)
            per = options.lora.questions_per_step
            batch = [self.training[order[(i + (k - 1) * per) % len(order)]] for i in range(per)]
            explore, sampling = 0.0, f"step {k}/{total}"  # on policy
        t0 = time.monotonic()
        step_dir = self.work / f"samples-{k}"
        paths.private_dir(step_dir)
        samples = sample_round(
            sampler,
            batch,
            options.lora.samples,
            explore,
            options.seed * 1000 + k,
            step_dir / SAMPLES,
            self.on_progress,
            f"{sampling}: sampling",
        )
        self.sample_seconds += time.monotonic() - t0
        return batch, samples

    def fit_experts(
        self, k: int, batch: list[Problem], samples: list[Sample]
    ) -> tuple[int, dict[str, float | None]]:
        """Maximum likelihood on the best shape's right samples; the experts' routing log p
        per token before and after (did the fit take)."""
        c, messages, infos = self.config.conductor, {p.id: p for p in batch}, self.infos
        chosen = select_experts(samples)
        examples = [_example(self.encoder, messages[s.q], s, infos, c.max_steps) for s in chosen]
        rng = random.Random(self.options.seed + k)
        batches = minibatches(chosen, MINIBATCH, rng, self.options.lora.epochs)
        fit_before = _mean_routing_logprob(self.policy, examples)
        for done_steps, batch_ids in enumerate(batches, 1):
            part = [examples[i] for i in batch_ids]
            loss = self.policy.step(part, [1.0] * len(part), self.lr)
            label = f"round {k}/{self.total}: fitting"
            self.on_progress(Progress(label, done_steps, len(batches), f"loss {loss:.3f}"))
        fit_after = _mean_routing_logprob(self.policy, examples)
        return len(examples), {"before": fit_before, "after": fit_after}

    def fit_grpo(self, batch: list[Problem], samples: list[Sample]) -> int:
        """One on-policy step, each sample weighted by its group-relative reward."""
        c, messages, infos = self.config.conductor, {p.id: p for p in batch}, self.infos
        weights = grpo_weights(samples)
        used = [(s, w) for s, w in zip(samples, weights, strict=True) if s.reply and w]
        examples = [_example(self.encoder, messages[s.q], s, infos, c.max_steps) for s, _ in used]
        if examples:
            self.policy.step(examples, [w for _, w in used], self.lr)
        return len(examples)

    def step(self, k: int) -> None:
        """Sample, fit, evaluate when due, and save step k so that a resume never fits it
        twice."""
        work = self.work
        # The first step samples from the base, where the policy starts.
        current = work / f"adapter-{k - 1}" if k > 1 else None
        batch, samples = self.sample(k, current)
        t0 = time.monotonic()
        fit: dict[str, float | None] | None = None
        if self.experts:
            kept, fit = self.fit_experts(k, batch, samples)
        else:
            kept = self.fit_grpo(batch, samples)
        self.fit_seconds += time.monotonic() - t0
        entry = curve_entry(k, self.experts, samples, kept, fit)
        directory = save_conductor(
            work / f"adapter-{k}", self.policy, self.record_of(intermediate=k)
        )
        if self.experts or k % self.options.lora.eval_every == 0 or k == self.total:
            scored = self.evaluate(
                f"held-out after {'round' if self.experts else 'step'} {k}", directory
            )
            if scored is not None:
                entry["held_out"] = scored.to_dict()
        held = entry.get("held_out")
        latest = f", held-out {held['accuracy']:.3f}" if held else ""
        self.on_progress(
            Progress(
                "progress",
                k,
                self.total,
                f"reward {entry['mean_reward']:.2f}±{entry['reward_spread']:.2f}, "
                f"unparsed {entry['unparsed_share']:.2f}{latest}",
            )
        )
        pending = work / POLICY_NEXT
        self.policy.save(pending)
        write_json(pending / STEP, {"step": k})
        self.state["done"] = k
        self.state["curve"].append(entry)
        self.state["calls"] += sum(s.calls for s in samples)
        self.state["samples"] += len(samples)
        write_json(work / STATE, self.state)  # after the policy: a resume never fits k twice
        replace_dir(pending, work / POLICY)
        if current is not None:
            shutil.rmtree(current, ignore_errors=True)

    def finish(self, final: Path, started: float) -> dict[str, Any]:
        """Export the adapter, check the export against torch, write the record, install."""
        staged, export = export_checked(self.policy, self.base, self.work, self.on_progress)
        record = self._record(export, started)
        write_json(staged / registry.RECORD, record)
        install(self.work, final, self.options.force or self.options.resume)
        shutil.rmtree(self.work, ignore_errors=True)
        return record

    def _record(self, export: dict[str, Any], started: float) -> dict[str, Any]:
        options, state, experts = self.options, self.state, self.experts
        last = state["curve"][-1].get("held_out") if state["curve"] else None
        return self.record_of(
            base_sha256=file_sha256(self.base),
            hyperparameters={
                "iterations" if experts else "steps": self.total,
                "samples_per_question": options.lora.samples,
                "questions_per_step": options.lora.questions_per_step if not experts else None,
                "repeats": options.repeats,
                "explore": options.lora.explore if experts else 0.0,
                "epochs": options.lora.epochs if experts else 1,
                "learning_rate": self.lr,
                "lora_rank": options.lora.rank,
                "lora_alpha": self.policy.alpha,
                "lora_modules": list(MODULES),
                "loss_on": "routing decisions (worker names, sees, step count)",
                "cost_weight": options.cost_weight,
            },
            curve=state["curve"],
            evaluations=(
                ([{"when": "before", **state["before"]}] if state.get("before") else [])
                + ([{"when": "after", **last}] if last else [])
            ),
            cost={
                "workflow_samples": state["samples"],
                "worker_calls": state["calls"],
                "sampling_seconds_this_session": round(self.sample_seconds, 1),
                "fitting_seconds_this_session": round(self.fit_seconds, 1),
            },
            export_check=export,
            device=f"{self.device} (torch) + cpu (llama.cpp sampling)",
            wall_seconds=round(time.monotonic() - started, 1),
        )


def curve_entry(
    k: int,
    experts: bool,
    samples: list[Sample],
    kept: int,
    fit: dict[str, float | None] | None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "iteration" if experts else "step": k,
        "samples": len(samples),
        "right_share": round(float(np.mean([s.correct for s in samples])), 4),
        "mean_reward": round(float(np.mean([s.reward for s in samples])), 4),
        "reward_spread": round(float(np.std([s.reward for s in samples])), 4),
        "unparsed_share": round(float(np.mean([not s.reply for s in samples])), 4),
        "fitted": kept,
    }
    if fit is not None:
        # The experts' routing decisions, mean log p per token, before and after.
        entry["experts_logprob"] = fit
    return entry


def train_lora(
    config: Config,
    problems: Sequence[Problem],
    options: TrainOptions,
    method: str,
    *,
    data_file: Path | None = None,
    on_progress: OnProgress = lambda p: None,
    held_out_ids: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Train a LoRA conductor on `problems` for `config`'s pool; returns the training record."""
    from conductor_cli.train.lora_model import Policy, pick_device, require_torch

    started = time.monotonic()
    _check_lora_options(options, method)
    require_torch()
    name, final = target(options)
    check_keys(config)
    base_spec, base = resolve_base(config, method)
    device = pick_device(options.lora.device, base.path)
    lr = options.lora.learning_rate or LEARNING_RATE[method]
    training, held_out = split_problems(problems, options, held_out_ids)
    meta = {
        "method": method,
        "dataset": options.dataset,
        "problems": fingerprint(problems),
        "held_out": sorted(p.id for p in held_out),
        "seed": options.seed,
        "repeats": options.repeats,
        "samples": options.lora.samples,
        "pool": registry.pool_fingerprint(config.workers),
        "cost_weight": options.cost_weight,
        "learning_rate": lr,
        "rank": options.lora.rank,
    }
    work = work_dir(name)
    prepare(work, options, meta)
    state: dict[str, Any] = {"done": 0, "curve": [], "calls": 0, "samples": 0}
    if options.resume and (work / STATE).exists():
        state = json.loads((work / STATE).read_text(encoding="utf-8"))
    _settle_policy(work, state["done"])
    runner = Runner(config, problems)
    encoder = Encoder(base.path)
    policy_dir = work / POLICY
    policy = Policy(
        base.path,
        device=device,
        rank=options.lora.rank,
        checkpoint=policy_dir if policy_dir.exists() else None,
        seed=options.seed,
    )
    if policy_dir.exists():
        policy.load_optimizer(policy_dir, lr)
    job = _LoraTraining(
        config, problems, options, method, name, base_spec, base.path, device, lr,
        list(training), list(held_out), work, state, runner, encoder, policy, on_progress,
        data_file,
    )  # fmt: skip
    try:
        job.evaluate_before()
        while state["done"] < job.total:
            job.step(state["done"] + 1)
        return job.finish(final, started)
    except Exception as e:
        full = disk_full(e, name, work)
        if full is not None:
            raise full from e
        raise
    finally:
        encoder.close()
        runner.close()


def _settle_policy(work: Path, done: int) -> None:
    """Finish what a stop between saving step k's policy and recording k as done left: the
    saved policy takes its place if state.json says k is done, else it goes (k is fitted again
    from the policy before, on the samples kept)."""
    pending = work / POLICY_NEXT
    if not pending.exists():
        return
    try:
        step = json.loads((pending / STEP).read_text(encoding="utf-8"))["step"]
    except (OSError, ValueError, KeyError, TypeError):
        step = None
    if step == done:
        replace_dir(pending, work / POLICY)
    else:
        shutil.rmtree(pending)


def _example(
    encoder: Encoder,
    problem: Problem,
    sample: Sample,
    infos: Sequence[WorkerInfo],
    max_steps: int,
) -> Example:
    return encoder.example(plan_messages(problem.question, infos, (), max_steps), sample.reply)


def _mean_routing_logprob(policy: Policy, examples: Sequence[Example]) -> float | None:
    """Mean log p per routing token of `examples` under the policy now (no gradients)."""
    if not examples:
        return None
    import torch

    with torch.no_grad():
        sums, counts = policy.routing_logprobs(examples)
    return round(float(sums.sum() / counts.sum().clamp(min=1)), 4)
