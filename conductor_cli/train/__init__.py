"""`conductor train`: turn rewards into a better conductor (see head_method.py).

Entry point: `train(config, problems, options)`. Kept free of imports so that pool building,
which looks trained conductors up in `registry`, loads nothing else of this package.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Config
    from ..evals.records import Problem
    from .head_method import OnProgress, TrainOptions

# Measured here: the head learns routing on 2 cores in minutes (README, "Train your
# conductor"); the LoRA methods of the issue (expert iteration, GRPO) are not built yet.
METHODS = ("head",)


def train(
    config: Config,
    problems: list[Problem],
    options: TrainOptions,
    *,
    data_file: Path | None = None,
    on_progress: OnProgress | None = None,
) -> dict[str, Any]:
    """Train a conductor on `problems` for `config`'s pool; returns its training record."""
    from .head_method import train_head

    return train_head(
        config,
        problems,
        options,
        data_file=data_file,
        on_progress=on_progress or (lambda p: None),
    )
