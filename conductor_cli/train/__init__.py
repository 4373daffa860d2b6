"""`conductor train`: turn rewards into a better conductor (head_method.py, lora_method.py).

Entry point: `train(config, problems, options)`. Kept free of imports so that pool building,
which looks trained conductors up in `registry`, loads nothing else of this package.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conductor_cli.config.settings import Config
    from conductor_cli.evals.records import Problem
    from conductor_cli.train.session import OnProgress, TrainOptions

# Measured here (README, "Train your conductor"): the head learns routing on 2 cores in
# minutes and is the default; the LoRA methods (lora_method.py) need torch.
METHODS = ("head", "expert-iteration", "grpo")


def train(
    config: Config,
    problems: list[Problem],
    options: TrainOptions,
    method: str = "head",
    *,
    data_file: Path | None = None,
    on_progress: OnProgress | None = None,
) -> dict[str, Any]:
    """Train a conductor on `problems` for `config`'s pool with `method`; returns its record."""
    if method != "head" and options.head.tasks != "written":
        from conductor_cli.errors import InputError

        raise InputError(
            f"--tasks {options.head.tasks}: only the head method fixes the words; the LoRA methods "
            "train the conductor that writes them (leave --tasks out)"
        )
    if method != "head" and options.head.rounds != 1:
        from conductor_cli.errors import InputError

        raise InputError(
            f"--rounds {options.head.rounds}: only the head method learns rounds (when to keep the "
            "team's answer); leave --rounds out with --method " + method
        )
    head = options.head
    if method != "head" and (
        head.max_calls is not None or head.max_cost is not None or head.dry_run
    ):
        from conductor_cli.errors import InputError

        raise InputError(
            "--max-calls, --max-cost and --dry-run budget the head method's training; the LoRA "
            f"methods sample as many workflows as --samples says (leave them out with --method "
            f"{method})"
        )
    if method != "head":
        from conductor_cli.train.lora_method import train_lora

        return train_lora(
            config,
            problems,
            options,
            method,
            data_file=data_file,
            on_progress=on_progress or (lambda p: None),
        )
    from conductor_cli.train.head_method import train_head

    return train_head(
        config,
        problems,
        options,
        data_file=data_file,
        on_progress=on_progress or (lambda p: None),
    )
