"""`conductor eval`: compare answering strategies on a dataset of problems with known answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conductor_cli.exports import lazy_exports

# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "DATASET_KINDS": "datasets",
    "QA_SCORERS": "answers",
    "load_dataset": "datasets",
    "select": "datasets",
    "draw": "datasets",
    "export_grpo": "export",
    "EvalRequest": "eval_job",
    "open_eval": "eval_job",
    "trained_notes": "strategies",
    "strategies_help": "strategies",
    "datasets_help": "datasets",
}
__all__ = [
    "DATASET_KINDS",
    "QA_SCORERS",
    "EvalRequest",
    "datasets_help",
    "draw",
    "export_grpo",
    "load_dataset",
    "open_eval",
    "plot",
    "report",
    "select",
    "strategies_help",
    "trained_notes",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.evals.answers import (
        QA_SCORERS,
    )
    from conductor_cli.evals.datasets import (
        DATASET_KINDS,
        draw,
        load_dataset,
        select,
    )
    from conductor_cli.evals.eval_job import (
        EvalRequest,
        open_eval,
    )
    from conductor_cli.evals.export import (
        export_grpo,
    )
    from conductor_cli.evals.strategies import (
        trained_notes,
    )
