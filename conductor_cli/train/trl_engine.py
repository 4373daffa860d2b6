"""`conductor train --method grpo --engine trl`: GRPO on TRL's GRPOTrainer, the field's engine
for it, so that a training grows past one process: `accelerate launch` runs it data-parallel
(DDP over gloo on CPUs, NCCL on GPUs, DeepSpeed or FSDP by accelerate's config), one slice of
each step's questions a process.

What stays ours is what TRL cannot know: the rollouts. TRL's `rollout_func` hands each process
its questions; each sample is a workflow the current conductor writes in llama.cpp under the
pool's grammar (a 135M conductor writes no parseable workflow without it, PITFALLS), from the
adapter as it stands at that step (exported to GGUF, what `ask` runs), run on the pool through
the same runner and cache as `--engine ours`, and scored (1 / 0.5 / 0, minus cost). TRL gets
the prompt's and reply's tokens, the reward, and a mask that trains only the routing decisions
(`env_mask`, as lora_method.py's loss). The worker calls of every process are counted in one
ledger (ledger.py), so `--max-calls` and `--max-cost` hold for the sum.

The result is installed as lora_method.py installs its own: adapter.gguf checked against torch,
the peft adapter, record.json with the curve TRL logged.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conductor_cli.config.settings import Config
from conductor_cli.disk import paths
from conductor_cli.errors import BudgetError, InputError
from conductor_cli.evals.records import Problem
from conductor_cli.models.catalog import file_sha256
from conductor_cli.policy import registry
from conductor_cli.policy.shapes import enumerate_shapes
from conductor_cli.run.planner import plan_messages, worker_infos
from conductor_cli.runtime import CONDUCTOR_LABEL
from conductor_cli.train import base_copy
from conductor_cli.train.adapter_gguf import MODULES
from conductor_cli.train.checkpoint import read_checkpoint
from conductor_cli.train.examples import Encoder
from conductor_cli.train.ledger import LEDGER, SharedBudget, read_totals
from conductor_cli.train.lora_method import (
    LEARNING_RATE,
    MINIBATCH,
    POLICY,
    Sample,
    Sampler,
    curve_entry,
    export_checked,
    sample_round,
    save_conductor,
    select_experts,
)
from conductor_cli.train.rollout import Runner, held_out_score
from conductor_cli.train.shared import (
    OnProgress,
    Progress,
    TrainOptions,
    check_keys,
    record_head,
    resolve_base,
    split_problems,
)
from conductor_cli.train.workdir import install, prepare, target, work_dir, write_json

SCALE_EXTRA = "pip install 'conductor-cli[scale]' (trl, accelerate, datasets)"
CHECKPOINTS = "trl"  # TRL's checkpoints (adapter, optimizer, step) under the work folder
ROUNDS = "rounds.json"  # expert iteration: the rounds done and their curve
MAX_REPLY_TOKENS = 512  # a workflow reply under the grammar is far shorter


def require_trl() -> None:
    """One line naming what is missing (looked up, not imported: trl imports in seconds)."""
    from conductor_cli.train.lora_model import installed

    modules = ("torch", "transformers", "peft", "gguf", "trl", "accelerate", "datasets")
    missing = [m for m in modules if not installed(m)]
    if missing:
        raise InputError(f"--engine trl needs {', '.join(missing)}: {SCALE_EXTRA}")


@dataclass
class _Rollouts:
    """TRL's rollout_func: each process samples and scores its questions' workflows."""

    runner: Runner
    encoder: Encoder
    config: Config
    options: TrainOptions
    problems: dict[str, Problem]
    base_spec: str
    policy: Any  # train/lora_model.Policy: its peft model is the one TRL trains
    work: Path
    rank: int
    budget: SharedBudget
    record: dict[str, Any]
    samples: int = 0
    seconds: float = 0.0
    _current: Path | None = field(default=None, repr=False)

    def conductor_at(self, step: int) -> str:
        """The conductor as it stands at `step`: the base before any step, else the adapter
        exported to a folder of this process's own (a new folder a step: loaded models are
        keyed by path)."""
        if step == 0:
            return self.base_spec
        directory = self.work / f"rollout-{self.rank}" / f"step-{step}"
        if not directory.exists():
            staged = directory.with_name(f".{directory.name}.tmp")
            shutil.rmtree(staged, ignore_errors=True)
            save_conductor(staged, self.policy, self.record).rename(directory)
            if self._current is not None and self._current != directory:
                shutil.rmtree(self._current, ignore_errors=True)
            self._current = directory
        return str(directory)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        started = time.monotonic()
        step = int(trainer.state.global_step)
        infos = worker_infos(self.config.workers)
        shapes = enumerate_shapes(
            [w.name for w in self.config.workers], self.config.conductor.max_steps
        )
        sampler = Sampler(
            self.runner, self.conductor_at(step), infos, shapes, self.options, budget=self.budget
        )
        out: dict[str, list[Any]] = {
            "prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
            "conductor_reward": [],
        }  # fmt: skip
        seen: dict[str, int] = {}
        for qid in prompts:
            problem = self.problems[str(qid)]
            index = seen.get(problem.id, 0)
            seen[problem.id] = index + 1
            # A stable seed (not hash(): it differs between processes).
            seed = (self.options.seed * 1000 + step) * 100_003 + zlib.crc32(problem.id.encode())
            seed = seed % 2**31 + index
            sample = sampler.sample(problem, index, seed, None)
            messages = plan_messages(problem.question, infos, (), self.config.conductor.max_steps)
            if sample.reply:
                example = self.encoder.example(messages, sample.reply)
                prompt, reply, mask = example.prompt, example.reply, example.mask
            else:  # no parseable workflow: an end of turn that trains nothing
                prompt = tuple(self.encoder.prompt(messages))
                reply, mask = (self.encoder.eos,), (False,)
            out["prompt_ids"].append(list(prompt))
            out["completion_ids"].append(list(reply))
            out["env_mask"].append([int(m) for m in mask])
            out["conductor_reward"].append(sample.reward)
            self.samples += 1
        out["logprobs"] = None  # type: ignore[assignment]  # TRL recomputes them in torch
        self.seconds += time.monotonic() - started
        return out


def _silent(progress: Progress) -> None:
    pass


def _reward(completions: list[Any], conductor_reward: list[float], **_: Any) -> list[float]:
    """TRL's reward function: the reward each rollout measured by running its workflow."""
    return [float(r) for r in conductor_reward]


def train_trl(
    config: Config,
    problems: Sequence[Problem],
    options: TrainOptions,
    method: str = "grpo",
    *,
    data_file: Path | None = None,
    on_progress: OnProgress = lambda p: None,
) -> dict[str, Any] | None:
    """GRPO (or expert iteration) with TRL on this process's share; the training record on
    the main process, None on the others (they print nothing)."""
    require_trl()
    from accelerate import PartialState

    from conductor_cli.train.lora_model import Policy, pick_device

    started = time.monotonic()
    lora = options.lora
    experts = method == "expert-iteration"
    if lora.samples < 2 and not experts:
        raise InputError(f"--samples {lora.samples}: GRPO compares a group; give at least 2")
    name, final = target(options)
    check_keys(config)
    base_spec, base = resolve_base(config, method)
    device = pick_device(lora.device, base.path)
    # Under `accelerate launch` (or torchrun) on CPUs, the processes meet over gloo only when
    # the state is told it is a CPU one; the Trainer's Accelerator shares this state.
    state = PartialState(cpu=device == "cpu")
    if not state.is_main_process:  # one display: the main process's
        on_progress = _silent
    lr = lora.learning_rate or LEARNING_RATE[method]
    training, held_out = split_problems(problems, options, None)
    work = work_dir(name)
    meta = {
        "method": method, "engine": "trl", "dataset": options.dataset,
        "held_out": sorted(p.id for p in held_out), "seed": options.seed,
        "samples": lora.samples, "pool": registry.pool_fingerprint(config.workers),
        "learning_rate": lr, "rank": lora.rank,
    }  # fmt: skip
    if state.is_main_process:
        prepare(work, options, meta)
    state.wait_for_everyone()
    head = record_head(
        config, name, method, base_spec, options, data_file, problems, training, held_out
    )
    runner = Runner(config, problems)
    encoder = Encoder(base.path)
    try:
        kept = work / POLICY  # expert iteration's adapter after its last finished round
        policy = Policy(
            base.path, device=device, rank=lora.rank, seed=options.seed,
            checkpoint=kept if experts and options.resume and kept.is_dir() else None,
        )  # fmt: skip
        budget = SharedBudget(
            max_calls=options.head.max_calls,
            max_cost=options.head.max_cost,
            exempt=frozenset({CONDUCTOR_LABEL}),
            ledger=work / LEDGER,
            process=state.process_index,
        )
        rollouts = _Rollouts(
            runner, encoder, config, options, {p.id: p for p in training}, base_spec, policy,
            work, state.process_index, budget, {**head, "intermediate": True},
        )  # fmt: skip
        fit = _fit_experts if experts else _fit
        curve = fit(rollouts, base.path, training, lr, state, on_progress)
        if not state.is_main_process:
            return None
        return _finish(
            rollouts, base.path, head, held_out, final, curve, device, lr, started, on_progress,
        )  # fmt: skip
    finally:
        encoder.close()
        runner.close()


def _fit(
    rollouts: _Rollouts,
    base: Path,
    training: Sequence[Problem],
    lr: float,
    state: Any,
    on_progress: OnProgress,
) -> list[dict[str, Any]]:
    """TRL's GRPO loop, checkpointed every step; the curve of what it logged."""
    import datasets
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    policy, options, work = rollouts.policy, rollouts.options, rollouts.work
    lora = options.lora
    world = state.num_processes
    accumulate = _per_process(lora.questions_per_step, world)
    args = GRPOConfig(
        output_dir=str(work / CHECKPOINTS),
        per_device_train_batch_size=lora.samples,  # one question's group a micro-step
        gradient_accumulation_steps=accumulate,
        num_generations=lora.samples,
        max_steps=lora.steps,
        learning_rate=lr,
        beta=0.0,  # no KL term, as --engine ours
        loss_type="grpo",
        max_completion_length=MAX_REPLY_TOKENS,
        use_cpu=policy.device == "cpu",
        gradient_checkpointing=_checkpoints_activations(policy.device),
        report_to=[],
        logging_steps=1,
        save_strategy="steps",
        save_steps=1,
        save_total_limit=1,
        seed=options.seed,
        disable_tqdm=True,
        remove_unused_columns=False,
        bf16=False,
        ddp_find_unused_parameters=False,  # LoRA's parameters all take part in every step
    )
    curve_file = work / "curve.json"
    last = _last_checkpoint(work / CHECKPOINTS) if options.resume else None
    curve: list[dict[str, Any]] = []
    if last is not None and curve_file.exists():
        done = int(last.name.split("-")[-1])
        curve = [e for e in json.loads(curve_file.read_text(encoding="utf-8")) if e["step"] <= done]

    class Progressed(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, st: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "reward" in logs:
                entry = {
                    "step": int(st.global_step),
                    "mean_reward": round(float(logs["reward"]), 4),
                    "reward_spread": round(float(logs.get("reward_std", 0.0)), 4),
                    "loss": round(float(logs.get("loss", 0.0)), 6),
                }
                curve.append(entry)
                if state.is_main_process:  # kept as it grows: a resumed training goes on
                    write_json(curve_file, curve)
                on_progress(
                    Progress(
                        "progress", entry["step"], lora.steps,
                        f"reward {entry['mean_reward']:.2f}±{entry['reward_spread']:.2f}",
                    )
                )  # fmt: skip

    dataset = datasets.Dataset.from_list([{"prompt": p.id} for p in training])
    tokenizer = base_copy.load_tokenizer(base)
    with _quiet():
        trainer = GRPOTrainer(
            model=policy.model,
            reward_funcs=_reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollouts,
            callbacks=[Progressed()],
        )
        # The Trainer prints every log line on stdout (without tqdm): the display is ours, and
        # stdout carries --json.
        trainer.remove_callback(PrinterCallback)
        try:
            trainer.train(resume_from_checkpoint=str(last) if last else None)
        except BudgetError as e:
            raise InputError(f"{e} {_kept(work)}") from None
    return curve


def _checkpoints_activations(device: str) -> bool:
    """TRL's configs compute every layer's forward pass again in the backward one (gradient
    checkpointing, on by default) to save accelerator memory. On a CPU, memory is the
    plentiful part and compute the scarce one, so it is off there; the gradients are the same
    either way."""
    return device != "cpu"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """transformers', peft's and TRL's warnings (deprecations, the experimental rollout_func)
    say nothing a user of `conductor train` can act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _fit_experts(
    rollouts: _Rollouts,
    base: Path,
    training: Sequence[Problem],
    lr: float,
    state: Any,
    on_progress: OnProgress,
) -> list[dict[str, Any]]:
    """Expert iteration on TRL's SFTTrainer, round by round: every process samples its share
    of the questions (llama.cpp, the pool's grammar, `--explore` of the shapes forced), each
    question's best shape's right samples are kept (lora_method.select_experts, over every
    process's samples), and SFT fits them for `--epochs` with the loss on their routing
    tokens only (labels -100 elsewhere), as --engine ours does. A finished round is saved
    (adapter, curve); --resume goes on from the next, with a round's samples kept as they
    finished."""

    policy, options, work = rollouts.policy, rollouts.options, rollouts.work
    lora = options.lora
    rounds_file = work / ROUNDS
    saved: dict[str, Any] = {"done": 0, "curve": []}
    if options.resume and rounds_file.exists() and (work / POLICY).is_dir():
        saved = json.loads(rounds_file.read_text(encoding="utf-8"))
    curve: list[dict[str, Any]] = list(saved["curve"])
    infos = worker_infos(rollouts.config.workers)
    max_steps = rollouts.config.conductor.max_steps
    shapes = enumerate_shapes([w.name for w in rollouts.config.workers], max_steps)
    tokenizer = base_copy.load_tokenizer(base)
    by_id = {p.id: p for p in training}
    rank, world = state.process_index, state.num_processes
    for k in range(int(saved["done"]) + 1, lora.iterations + 1):
        label = f"round {k}/{lora.iterations}"
        sampler = Sampler(
            rollouts.runner, rollouts.conductor_at(k - 1), infos, shapes, options,
            budget=rollouts.budget,
        )  # fmt: skip
        folder = paths.private_dir(work / f"samples-{k}")
        started = time.monotonic()
        try:
            sample_round(
                sampler, list(training)[rank::world], lora.samples, lora.explore,
                options.seed * 1000 + k, folder / f"rank-{rank}.jsonl", on_progress,
                f"{label}: sampling",
            )  # fmt: skip
        except BudgetError as e:
            raise InputError(f"{e} {_kept(work)}") from None
        rollouts.seconds += time.monotonic() - started
        state.wait_for_everyone()
        samples = [
            sample
            for part in sorted(folder.glob("rank-*.jsonl"))
            for sample in read_checkpoint(part, _sample_row).values()
        ]
        rows = [
            _expert_row(rollouts, by_id[s.q].question, s.reply, infos, max_steps)
            for s in select_experts(samples)
        ]
        if rows:
            _sft(rollouts, rows, tokenizer, lr, options.seed + k, world)
        entry = curve_entry(k, True, samples, len(rows), None)
        curve.append(entry)
        if state.is_main_process:
            policy.save(work / POLICY)
            write_json(rounds_file, {"done": k, "curve": curve})  # after the adapter
        state.wait_for_everyone()
        on_progress(
            Progress(
                "progress", k, lora.iterations,
                f"reward {entry['mean_reward']:.2f}±{entry['reward_spread']:.2f}, "
                f"fitted {len(rows)}",
            )
        )  # fmt: skip
    return curve


def _expert_row(
    rollouts: _Rollouts, question: str, reply: str, infos: Any, max_steps: int
) -> dict[str, list[int]]:
    """One kept sample as SFT's row: the loss on its routing tokens only (labels -100
    elsewhere), as --engine ours fits it."""
    messages = plan_messages(question, infos, (), max_steps)
    e = rollouts.encoder.example(messages, reply)
    labels = [t if m else -100 for t, m in zip(e.reply, e.mask, strict=True)]
    return {"input_ids": [*e.prompt, *e.reply], "labels": [-100] * len(e.prompt) + labels}


def _sft(
    rollouts: _Rollouts,
    rows: list[dict[str, list[int]]],
    tokenizer: Any,
    lr: float,
    seed: int,
    world: int,
) -> None:
    """One round's fit of the kept samples on TRL's SFTTrainer, `--epochs` passes."""
    import datasets
    from transformers import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    policy, lora = rollouts.policy, rollouts.options.lora
    args = SFTConfig(
        output_dir=str(rollouts.work / "sft"),
        num_train_epochs=lora.epochs,
        learning_rate=lr,
        per_device_train_batch_size=max(1, MINIBATCH // world),
        lr_scheduler_type="constant",
        use_cpu=policy.device == "cpu",
        gradient_checkpointing=_checkpoints_activations(policy.device),
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        seed=seed,
        disable_tqdm=True,
        bf16=False,
        max_length=None,
        ddp_find_unused_parameters=False,
    )
    with _quiet():
        trainer = SFTTrainer(
            model=policy.model,
            args=args,
            train_dataset=datasets.Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()


def _sample_row(row: dict[str, Any]) -> tuple[tuple[str, int], Sample]:
    return (row["q"], int(row["index"])), Sample(**row)


def _kept(work: Path) -> str:
    return (
        f"The training's checkpoints are kept in {work}; `conductor train ... --resume` "
        "continues from the last one."
    )


def _last_checkpoint(directory: Path) -> Path | None:
    found = sorted(
        (p for p in directory.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    return found[-1] if found else None


def _finish(
    rollouts: _Rollouts,
    base: Path,
    head: dict[str, Any],
    held_out: Sequence[Problem],
    final: Path,
    curve: list[dict[str, Any]],
    device: str,
    lr: float,
    started: float,
    on_progress: OnProgress,
) -> dict[str, Any]:
    """Export, check the export against torch, score the held-out questions, install."""
    policy, options, work = rollouts.policy, rollouts.options, rollouts.work
    staged, export = export_checked(policy, base, work, on_progress)
    scored = held_out_score(
        rollouts.runner, held_out, str(save_conductor(work / "held-out", policy, head)), options,
        "held-out after training", on_progress,
    )  # fmt: skip
    if scored is not None and curve:
        curve[-1]["held_out"] = scored.to_dict()
    calls, dollars, by_process = read_totals(work / LEDGER)
    record = {
        **head,
        "engine": "trl",
        "base_sha256": file_sha256(base),
        "hyperparameters": _hyperparameters(rollouts, policy.alpha, lr),
        "curve": curve,
        "evaluations": [{"when": "after", **scored.to_dict()}] if scored is not None else [],
        "cost": {
            "worker_calls": calls,
            "dollars": round(dollars, 6),
            "processes": int(_world()),
            "worker_calls_by_process": by_process,
            "workflow_samples": _samples(rollouts, curve),
            "main_process_sampling_seconds": round(rollouts.seconds, 1),
        },
        "limits": {"max_calls": options.head.max_calls, "max_cost": options.head.max_cost},
        "export_check": export,
        "device": f"{device} (torch, TRL) + cpu (llama.cpp sampling)",
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    write_json(staged / registry.RECORD, record)
    install(work, final, options.force or options.resume)
    shutil.rmtree(work, ignore_errors=True)
    return record


def _hyperparameters(rollouts: _Rollouts, alpha: float, lr: float) -> dict[str, Any]:
    options, lora = rollouts.options, rollouts.options.lora
    experts = rollouts.record["method"] == "expert-iteration"
    method: dict[str, Any] = (
        {"iterations": lora.iterations, "explore": lora.explore, "epochs": lora.epochs,
         "fit": "TRL SFTTrainer, labels on the routing tokens"}
        if experts
        else {"steps": lora.steps, "questions_per_step": lora.questions_per_step,
              "loss_type": "grpo (TRL GRPOTrainer), beta 0"}
    )  # fmt: skip
    return {
        **method,
        "samples_per_question": lora.samples,
        "repeats": options.repeats,
        "learning_rate": lr,
        "lora_rank": lora.rank,
        "lora_alpha": alpha,
        "lora_modules": list(MODULES),
        "loss_on": "routing decisions (worker names, sees, step count)",
        "cost_weight": options.cost_weight,
        "gradient_checkpointing": _checkpoints_activations(rollouts.policy.device),
    }


def _samples(rollouts: _Rollouts, curve: list[dict[str, Any]]) -> int:
    """Workflows sampled over the whole training (resumed sessions included)."""
    if rollouts.record["method"] == "expert-iteration":
        return sum(int(e.get("samples", 0)) for e in curve)
    lora, world = rollouts.options.lora, _world()
    return len(curve) * world * _per_process(lora.questions_per_step, world) * lora.samples


def _per_process(questions_per_step: int, world: int) -> int:
    """Questions each process takes a step (TRL's gradient accumulation): at least one."""
    return max(1, questions_per_step // world)


def _world() -> int:
    from accelerate import PartialState

    return PartialState().num_processes
