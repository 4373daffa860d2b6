"""`conductor eval`: compare the conductor with single workers and the usual baselines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from conductor_cli.cli.common import (
    ConfigOption,
    DatasetArg,
    DatasetFileArg,
    ScorerOption,
    Verbose,
    config_path,
    handle_errors,
)
from conductor_cli.evals import strategies_help

# The command's options, one alias each, so the command reads as its list of parameters.
StrategiesOption = Annotated[
    str | None,
    typer.Option(
        "--strategies",
        help=strategies_help(),
        show_default=False,
    ),
]
LimitOption = Annotated[
    int | None, typer.Option("--limit", help="Only the first N problems.", show_default=False)
]
SampleOption = Annotated[
    int | None,
    typer.Option("--sample", help="A random N problems (see --seed).", show_default=False),
]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed for --sample and the router.")]
ConcurrencyOption = Annotated[
    int, typer.Option("--concurrency", help="Problems run at once.", min=1)
]
VoteNOption = Annotated[int, typer.Option("--vote-n", help="Samples per vote.", min=1)]
MoaLayersOption = Annotated[int, typer.Option("--moa-layers", help="MoA layers.", min=1)]
AggregatorOption = Annotated[
    str | None,
    typer.Option(
        "--aggregator", help="MoA's aggregator (default: the first worker).", show_default=False
    ),
]
JsonOutOption = Annotated[
    Path | None,
    typer.Option(
        "--json-out", help="Write the results as JSON.", show_default=False, dir_okay=False
    ),
]
CsvOutOption = Annotated[
    Path | None,
    typer.Option("--csv-out", help="Write the results as CSV.", show_default=False, dir_okay=False),
]
PlotOption = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="Draw accuracy against cost (PNG; needs the plot extra).",
        show_default=False,
        dir_okay=False,
    ),
]
RestartOption = Annotated[
    bool, typer.Option("--restart", help="Forget this eval's stored results; start over.")
]
NoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Neither read nor write the response cache.")
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress or notes; only the table.")
]


@handle_errors
def eval_cmd(
    ctx: typer.Context,
    dataset: DatasetArg,
    file: DatasetFileArg = None,
    scorer: ScorerOption = "exact",
    strategies: StrategiesOption = None,
    limit: LimitOption = None,
    sample: SampleOption = None,
    seed: SeedOption = 0,
    concurrency: ConcurrencyOption = 1,
    vote_n: VoteNOption = 3,
    moa_layers: MoaLayersOption = 1,
    aggregator: AggregatorOption = None,
    json_out: JsonOutOption = None,
    csv_out: CsvOutOption = None,
    plot: PlotOption = None,
    restart: RestartOption = False,
    no_cache: NoCacheOption = False,
    quiet: QuietOption = False,
    verbose: Verbose = False,
    config: ConfigOption = None,
) -> None:
    """Run a dataset through every strategy and print accuracy, tokens, cost and time.

    Results are stored per (strategy, problem) as they finish: run the same command again to
    continue an interrupted eval.
    """
    from conductor_cli.config import load_config
    from conductor_cli.errors import InputError
    from conductor_cli.evals import DATASET_KINDS, EvalRequest, open_eval
    from conductor_cli.public import is_public, names
    from conductor_cli.storage import CacheMode

    if dataset not in DATASET_KINDS and not is_public(dataset):
        known = ", ".join(dict.fromkeys([*DATASET_KINDS, *names()]))
        raise InputError(f"unknown dataset {dataset!r}; use one of {known}")
    request = EvalRequest(
        dataset=dataset,
        file=file,
        scorer=scorer,
        strategies=strategies,
        limit=limit,
        sample=sample,
        seed=seed,
        concurrency=concurrency,
        vote_n=vote_n,
        moa_layers=moa_layers,
        aggregator=aggregator,
        restart=restart,
        cache_mode=CacheMode.OFF if no_cache else CacheMode.USE,
    )
    session = open_eval(request, load_config(config_path(ctx, config)))
    if not quiet:
        from conductor_cli.evals import trained_notes

        for note in trained_notes(session.config, session.strategies):
            sys.stderr.write(f"conductor: note: {note}\n")
    try:
        with _Progress(session.total, quiet=quiet, verbose=verbose) as progress:
            outcome = session.run(on_result=progress.result)
    except KeyboardInterrupt:
        sys.stderr.write(
            f"conductor: eval interrupted; {len(session.store)} results are kept in "
            f"{session.store.path}: run the same command again to continue\n"
        )
        raise
    _write_outcome(outcome, json_out, csv_out, plot, quiet)


def _write_outcome(
    outcome: Any, json_out: Path | None, csv_out: Path | None, plot: Path | None, quiet: bool
) -> None:
    """The files asked for, a note on reused results, then the table (plain when piped)."""
    from conductor_cli.evals import report

    if json_out:
        report.write_json(json_out, outcome.summaries, outcome.meta, outcome.results)
    if csv_out:
        report.write_csv(csv_out, outcome.summaries)
    if plot:
        from conductor_cli.evals import plot as plots

        plots.plot(outcome.summaries, plot, f"{outcome.dataset}: {outcome.n_problems} problems")
    if outcome.resumed and not quiet:
        sys.stderr.write(
            f"conductor: note: {outcome.resumed} of {outcome.resumed + outcome.computed} results "
            f"came from an earlier run of this eval ({outcome.store_path}); --restart "
            "recomputes them\n"
        )
    if sys.stdout.isatty():
        from rich.console import Console

        Console().print(report.table(outcome.summaries))
    else:
        sys.stdout.write(report.plain_table(outcome.summaries))


class _Progress:
    """A Rich bar with ETA on a terminal; `-v` lines when piped; nothing with -q."""

    def __init__(self, total: int, *, quiet: bool, verbose: bool) -> None:
        self.total = total
        self.done = 0
        self.quiet = quiet
        self.verbose = verbose
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.quiet or not sys.stderr.isatty():
            return self
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=Console(stderr=True),
            transient=True,
        )
        self._bar.__enter__()
        self._task = self._bar.add_task("", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def result(self, result: Any, resumed: bool) -> None:
        self.done += 1
        mark = "ok" if result.correct else ("error" if result.error else "wrong")
        if self._bar is not None:
            self._bar.update(
                self._task, advance=1, description=f"{result.strategy} {result.problem_id}: {mark}"
            )
        elif self.verbose and not self.quiet:
            source = " (stored)" if resumed else ""
            sys.stderr.write(
                f"conductor: [{self.done}/{self.total}] {result.strategy} "
                f"{result.problem_id}: {mark}{source}\n"
            )
            sys.stderr.flush()
