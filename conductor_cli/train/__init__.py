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
) -> dict[str, Any]:
    if options.lora.engine == "trl":
        return _trl(config, problems, options, method, data_file, on_progress)
    if options.lora.engine != "ours":
        from conductor_cli.errors import InputError

        raise InputError(f"--engine {options.lora.engine!r}: use ours or trl")
    _refuse_head_options(options, method)
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
    from conductor_cli.errors import InputError

    head = options.head
    if head.tasks is not None or head.rounds != 1 or head.dry_run:
        raise InputError(
            "--tasks, --rounds and --dry-run are the head method's; leave them out with "
            "--engine trl"
        )
    from conductor_cli.train.trl_engine import train_trl

    return train_trl(
        config, problems, options, method, data_file=data_file, on_progress=on_progress
    )


def _refuse_head_options(options: TrainOptions, method: str) -> None:
    """Options only the head method reads, refused by name rather than ignored."""
    from conductor_cli.errors import InputError

    head = options.head
    if head.tasks is not None:
        raise InputError(
            f"--tasks {head.tasks}: only the head method fixes the words; the LoRA methods "
            "train the conductor that writes them (leave --tasks out)"
        )
    if head.rounds != 1:
        raise InputError(
            f"--rounds {head.rounds}: only the head method learns rounds (when to keep the "
            "team's answer); leave --rounds out with --method " + method
        )
    if head.shapes:
        raise InputError(
            "--shapes names the workflows the head method chooses among; the LoRA methods "
            f"sample workflows from the conductor (leave --shapes out with --method {method})"
        )
    if head.max_calls is not None or head.max_cost is not None or head.dry_run:
        raise InputError(
            "--max-calls, --max-cost and --dry-run budget the head method's training; the LoRA "
            f"methods sample as many workflows as --samples says (leave them out with --method "
            f"{method})"
        )


@dataclass(frozen=True)
class Method:
    """One training method: everything about it in one entry."""

    name: str
    about: str  # one line: the CLI's --method help is made of these
    run: Trainer


# Measured here (README, "Train your conductor"): the head learns routing on 2 cores in
# minutes and is the default; the LoRA methods (lora_method.py) need torch. A new method is a
# module in train/ and one entry here; the CLI's --method choices and help come from it.
TRAINERS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("head", "a head on the conductor's hidden state picks the workflow (no torch)",
               _head),
        Method("expert-iteration", "a LoRA on the conductor's weights, fit to its right "
               "workflows (torch)", _lora),
        Method("grpo", "a LoRA on the conductor's weights, by group-relative advantage (torch)",
               _lora),
    )
}  # fmt: skip
METHODS = tuple(TRAINERS)


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
    "METHODS",
    "TRAINERS",
    "HeadOptions",
    "LoraOptions",
    "Method",
    "TrainOptions",
    "from_params",
    "is_launched",
    "launch_processes",
    "method_help",
    "note_exit",
    "train",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
