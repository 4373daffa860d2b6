"""`conductor train`: turn rewards into a better conductor (head_method.py, lora_method.py).

Entry point: `train(config, problems, options, method)`; `METHODS` names the methods, in the
order the CLI offers them. Kept free of imports at load: a method's module (torch, for the
LoRA methods) is imported only when that method trains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conductor_cli.exports import lazy_exports

if TYPE_CHECKING:
    from conductor_cli.config.settings import Config
    from conductor_cli.evals.records import Problem
    from conductor_cli.train.launch import is_launched, launch_processes, note_exit
    from conductor_cli.train.shared import HeadOptions, LoraOptions, OnProgress, TrainOptions

# (config, problems, options, method, data_file, on_progress) -> the trained conductor's record
# (None on the processes of a multi-process training other than the main one)
Trainer = Callable[
    ["Config", "list[Problem]", "TrainOptions", str, "Path | None", "OnProgress"],
    "dict[str, Any] | None",
]


def _head(
    config: Config,
    problems: list[Problem],
    options: TrainOptions,
    method: str,
    data_file: Path | None,
    on_progress: OnProgress,
) -> dict[str, Any]:
    from conductor_cli.train.head_method import train_head

    return train_head(config, problems, options, data_file=data_file, on_progress=on_progress)


def _lora(
    config: Config,
    problems: list[Problem],
    options: TrainOptions,
    method: str,
    data_file: Path | None,
    on_progress: OnProgress,
) -> dict[str, Any] | None:
    """The LoRA methods, on the engine --engine names (ENGINES)."""
    engine = ENGINES.get(options.lora.engine)
    if engine is None:
        from conductor_cli.errors import InputError

        raise InputError(f"--engine {options.lora.engine!r}: use {' or '.join(ENGINES)}")
    about = TRAINERS[method].about if method in TRAINERS else method
    where = f"--method {method} ({about}) --engine {engine.name}"
    refuse_foreign(options, engine.reads, where)
    return engine.run(config, problems, options, method, data_file, on_progress)


def _ours(
    config: Config,
    problems: list[Problem],
    options: TrainOptions,
    method: str,
    data_file: Path | None,
    on_progress: OnProgress,
) -> dict[str, Any]:
    from conductor_cli.train.lora_method import train_lora

    return train_lora(
        config, problems, options, method, data_file=data_file, on_progress=on_progress
    )


def _trl(
    config: Config,
    problems: list[Problem],
    options: TrainOptions,
    method: str,
    data_file: Path | None,
    on_progress: OnProgress,
) -> dict[str, Any] | None:
    """GRPO or expert iteration on TRL (trl_engine.py), one process or several under
    `accelerate launch`; its budget (--max-calls, --max-cost) holds for all processes
    together."""
    from conductor_cli.train.trl_engine import train_trl

    return train_trl(
        config, problems, options, method, data_file=data_file, on_progress=on_progress
    )


# The options each record holds (train/shared.py): a method or engine reads some of them.
HEAD_OPTIONS = frozenset(
    ("generations", "pca_dims", "tasks", "rounds", "search", "policy", "shapes", "step_cost",
     "learn_words", "max_calls", "max_cost", "dry_run")
)  # fmt: skip
LORA_OPTIONS = frozenset(
    ("iterations", "samples", "steps", "questions_per_step", "eval_every", "learning_rate",
     "epochs", "rank", "explore", "device", "engine")
)  # fmt: skip


@dataclass(frozen=True)
class Engine:
    """Where the LoRA methods train: one entry each (the CLI's --engine)."""

    name: str
    run: Trainer
    reads: frozenset[str]  # the options of HEAD_OPTIONS and LORA_OPTIONS it reads


ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        Engine("ours", _ours, LORA_OPTIONS),
        # TRL's run keeps the head method's budget for all its processes together.
        Engine("trl", _trl, LORA_OPTIONS | {"max_calls", "max_cost"}),
    )
}


@dataclass(frozen=True)
class Method:
    """One training method: everything about it in one entry."""

    name: str
    about: str  # one line: the CLI's --method help is made of these
    run: Trainer
    # The options of HEAD_OPTIONS and LORA_OPTIONS it reads; any other given is refused by
    # name (refuse_foreign), not ignored. None: its run decides (the LoRA methods, by engine).
    reads: frozenset[str] | None = None


# Measured here (README, "Train your conductor"): the head learns routing on 2 cores in
# minutes and is the default; the LoRA methods (lora_method.py) need torch. A new method is a
# module in train/ and one entry here; the CLI's --method choices and help come from it.
TRAINERS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("head", "a head on the conductor's hidden state picks the workflow (no torch)",
               _head, HEAD_OPTIONS),
        Method("expert-iteration", "a LoRA on the conductor's weights, fit to its right "
               "workflows (torch)", _lora),
        Method("grpo", "a LoRA on the conductor's weights, by group-relative advantage (torch)",
               _lora),
    )
}  # fmt: skip
METHODS = tuple(TRAINERS)


def _readers(option: str) -> list[str]:
    """Who reads `option`: the methods and engines whose entries name it."""
    methods = [f"the {m.name} method" for m in TRAINERS.values() if m.reads and option in m.reads]
    return methods + [f"--engine {e.name}" for e in ENGINES.values() if option in e.reads]


def refuse_foreign(options: TrainOptions, reads: frozenset[str], where: str) -> None:
    """Options set away from their defaults that `where` (a method, an engine) does not
    read: one InputError naming the first, who reads it, and what to leave out."""
    from dataclasses import fields

    from conductor_cli.errors import InputError

    for record in (options.head, options.lora):
        default = type(record)()
        for f in fields(record):
            value = getattr(record, f.name)
            if f.name in reads or value == getattr(default, f.name):
                continue
            flag = "--" + f.name.replace("_", "-")
            shown = (
                ""
                if isinstance(value, bool)
                else " " + repr("; ".join(value))
                if isinstance(value, tuple)
                else f" {value}"
            )
            readers = _readers(f.name)
            verb = "reads" if len(readers) == 1 else "read"
            raise InputError(
                f"{flag}{shown}: only {' and '.join(readers)} {verb} it; leave it out with {where}"
            )


def method_help() -> str:
    return "; ".join(f"{m.name}: {m.about}" for m in TRAINERS.values()) + "."


def train(
    config: Config,
    problems: list[Problem],
    options: TrainOptions,
    method: str = "head",
    *,
    data_file: Path | None = None,
    on_progress: OnProgress | None = None,
) -> dict[str, Any] | None:
    """Train a conductor on `problems` for `config`'s pool with `method`; returns its record
    (None on a process of a multi-process training other than the main one)."""
    trainer = TRAINERS.get(method)
    if trainer is None:
        from conductor_cli.errors import InputError

        raise InputError(f"--method {method!r}: use one of {', '.join(TRAINERS)}")
    if trainer.reads is not None:
        refuse_foreign(options, trainer.reads, f"--method {method}")
    report = on_progress or (lambda p: None)
    return trainer.run(config, problems, options, method, data_file, report)


# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "is_launched": "launch",
    "launch_processes": "launch",
    "note_exit": "launch",
    "HeadOptions": "shared",
    "from_params": "shared",
    "LoraOptions": "shared",
    "TrainOptions": "shared",
}
__all__ = [
    "ENGINES",
    "METHODS",
    "TRAINERS",
    "Engine",
    "HeadOptions",
    "LoraOptions",
    "Method",
    "TrainOptions",
    "from_params",
    "is_launched",
    "launch_processes",
    "method_help",
    "note_exit",
    "refuse_foreign",
    "train",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
