"""`conductor train`: train a conductor on your pool and data (the library: conductor_cli.train)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from .common import (
    ConfigOption,
    DatasetArg,
    DatasetFileArg,
    ScorerOption,
    config_path,
    handle_errors,
)

METHODS = ("head",)  # conductor_cli.train.METHODS, without importing it


@handle_errors
def train_cmd(
    ctx: typer.Context,
    dataset: DatasetArg,
    file: DatasetFileArg = None,
    out: Annotated[
        str,
        typer.Option("--out", help="Name of the trained conductor (conductor.model = NAME)."),
    ] = "my-conductor",
    method: Annotated[
        str, typer.Option("--method", help="head: a head on the conductor's hidden state.")
    ] = "head",
    scorer: ScorerOption = "exact",
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Only the first N problems.", show_default=False),
    ] = None,
    holdout: Annotated[
        float, typer.Option("--holdout", help="Share of problems held out for the proof.")
    ] = 0.2,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split and the search.")] = 0,
    repeats: Annotated[
        int, typer.Option("--repeats", help="Runs of each (question, workflow shape).", min=1)
    ] = 2,
    generations: Annotated[
        int, typer.Option("--generations", help="CMA-ES generations.", min=1)
    ] = 60,
    cost_weight: Annotated[
        float,
        typer.Option("--cost-weight", help="Reward minus this x cost ($, or 1k tokens)."),
    ] = 0.0,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Workflow runs at once.", min=1)
    ] = 4,
    force: Annotated[bool, typer.Option("--force", help="Replace a conductor of that name.")] = (
        False
    ),
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted training of --out.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the training record.")] = False,
    config: ConfigOption = None,
) -> None:
    """Train a conductor on your pool: it learns which workflow fits which question.

    Every workflow shape is run on the training questions and scored; a small head over the
    conductor's hidden state learns to pick the best one. Held-out questions measure the
    untrained and the trained conductor. Ctrl-C keeps the runs done; --resume continues.
    """
    from ..config import load_config
    from ..errors import InputError
    from ..evals.datasets import load_dataset, select
    from ..train import train
    from ..train.head_method import TrainOptions

    if method not in METHODS:
        raise InputError(f"--method {method!r}: use one of {', '.join(METHODS)}")
    cfg = load_config(config_path(ctx, config))
    problems = select(load_dataset(dataset, file, scorer), limit=limit)
    options = TrainOptions(
        name=out,
        dataset=dataset,
        holdout=holdout,
        seed=seed,
        repeats=repeats,
        cost_weight=cost_weight,
        generations=generations,
        concurrency=concurrency,
        force=force,
        resume=resume,
    )
    with _Display() as display:
        try:
            record = train(cfg, problems, options, data_file=file, on_progress=display.show)
        except KeyboardInterrupt:
            sys.stderr.write(
                f"conductor: training interrupted; the runs done are kept: "
                f"`conductor train ... --out {out} --resume` continues\n"
            )
            raise
    if as_json:
        typer.echo(json.dumps(record, indent=2))
        return
    typer.echo(summary(record))


def summary(record: dict[str, Any]) -> str:
    evaluations = {e["when"]: e for e in record.get("evaluations", [])}
    lines = [f"trained conductor {record['name']} (method {record['method']})"]
    table = record["reward_table"]
    lines.append(
        f"  reward table: {table['workflow_runs']} workflow runs, {table['worker_calls']} "
        f"worker calls; best fixed shape {table['best_fixed_shape']} "
        f"(reward {table['best_fixed_shape_reward']})"
    )
    for when, label in (("before", "untrained"), ("after", "trained")):
        if when in evaluations:
            e = evaluations[when]
            lines.append(
                f"  held-out, {label}: accuracy {e['accuracy']:.3f}, reward {e['reward']:.3f} "
                f"({e['n']} questions)"
            )
    lines.append(f"  use it: conductor config set conductor.model {record['name']}")
    return "\n".join(lines)


class _Display:
    """A Rich progress bar on a terminal; one plain line per stage and every 10 % when piped."""

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._shown: dict[str, int] = {}

    def __enter__(self) -> _Display:
        if self.live:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self._progress.start()
        return self

    def show(self, p: Any) -> None:
        if self._progress is not None:
            task = self._tasks.get(p.stage)
            if task is None:
                task = self._progress.add_task(p.stage, total=p.total, detail=p.detail)
                self._tasks[p.stage] = task
            self._progress.update(task, completed=p.done, total=p.total, detail=p.detail)
            return
        step = max(1, p.total // 10)
        last = self._shown.get(p.stage)
        if last is None or p.done == p.total or p.done - last >= step:
            self._shown[p.stage] = p.done
            sys.stderr.write(f"conductor: {p.stage} {p.done}/{p.total} {p.detail}".rstrip() + "\n")

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
