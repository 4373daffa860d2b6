"""`conductor train`: train a conductor on your pool and data (the library: conductor_cli.train)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from conductor_cli.cli.common import (
    ConfigOption,
    DatasetArg,
    DatasetFileArg,
    ScorerOption,
    config_path,
    handle_errors,
)
from conductor_cli.train import method_help

# The command's options, one alias each, so the command reads as its list of parameters.
OutOption = Annotated[
    str,
    typer.Option("--out", help="Name of the trained conductor (conductor.model = NAME)."),
]
MethodOption = Annotated[
    str,
    typer.Option(
        "--method",
        help=method_help(),
    ),
]
TasksOption = Annotated[
    str | None,
    typer.Option(
        "--tasks",
        help="head: who writes each step's task at planning time: fixed (the words the "
        "rewards were measured with; the default) or written (the conductor).",
        show_default=False,
    ),
]
RoundsOption = Annotated[
    int,
    typer.Option(
        "--rounds",
        help="head: rounds the trained conductor plays (1-4); 2 or more also learns when "
        "to keep the team's answer and when to correct it.",
    ),
]
SearchOption = Annotated[
    str,
    typer.Option(
        "--search",
        help="head: adaptive (each worker once a question, then calls where the policy is "
        "unsure) or all (every workflow shape on every question, --repeats times).",
    ),
]
PolicyOption = Annotated[
    str,
    typer.Option(
        "--policy",
        help="head: shapes (one score per workflow shape, at most 60 shapes), steps "
        "(step by step over workers as vectors, any pool) or auto (shapes where they fit).",
    ),
]
ShapesOption = Annotated[
    str | None,
    typer.Option(
        "--shapes",
        help="head: the workflow shapes it chooses among, by label, separated by ';' (e.g. "
        "'coder; coder > python<0; coder > python<0 > coder<0,1'; a step sees the steps after "
        "'<'; words in brackets: coder[program]) [default: every shape of the pool].",
        show_default=False,
    ),
]
MaxCallsOption = Annotated[
    int | None,
    typer.Option(
        "--max-calls",
        help="head: worker calls this training may make, held-out runs included "
        "[default: adaptive 2.5 a question per worker; all: what it needs].",
        min=1,
        show_default=False,
    ),
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        help="head: USD this training may spend (every worker needs a price).",
        min=0,
        show_default=False,
    ),
]
DryRunOption = Annotated[
    bool,
    typer.Option("--dry-run", help="Print the estimate of calls and dollars, make no call."),
]
LimitOption = Annotated[
    int | None,
    typer.Option("--limit", help="Only the first N problems.", show_default=False),
]
# As eval's --sample: a mix of public sets (`a+b+c`) is drawn set by set, so that a training
# on several kinds sees each of them (--limit takes the first N, all of the first set).
SampleOption = Annotated[
    int | None,
    typer.Option(
        "--sample",
        help="A random N problems (see --seed); of a mix of sets joined by +, N of each.",
        show_default=False,
    ),
]
HoldoutOption = Annotated[
    float,
    typer.Option(
        "--holdout",
        help="Share of problems held out for the proof (0: train on all, prove with eval).",
    ),
]
SeedOption = Annotated[
    int, typer.Option("--seed", help="Seed of --sample, the split and the search.")
]
RepeatsOption = Annotated[
    int, typer.Option("--repeats", help="Runs of each (question, workflow shape).", min=1)
]
GenerationsOption = Annotated[int, typer.Option("--generations", help="CMA-ES generations.", min=1)]
CostWeightOption = Annotated[
    float,
    typer.Option("--cost-weight", help="Reward minus this x cost ($, or 1k tokens)."),
]
LearnWordsOption = Annotated[
    int,
    typer.Option(
        "--learn-words",
        help="head: rounds of learning each kind of question's words by reflection (the "
        "step's own model proposes words from its failures; words right more often become "
        "shapes the head can pick); 0: the shapes' own words.",
        min=0,
    ),
]
StepCostOption = Annotated[
    float,
    typer.Option(
        "--step-cost",
        help="head: the reward a workflow step costs (0.001: a tie-break; 0.02: a second step "
        "must be right 4 % more often than one step to be chosen).",
        min=0.0,
    ),
]
ConcurrencyOption = Annotated[
    int, typer.Option("--concurrency", help="Workflow runs at once.", min=1)
]
IterationsOption = Annotated[
    int, typer.Option("--iterations", help="expert-iteration: rounds.", min=1)
]
SamplesOption = Annotated[
    int, typer.Option("--samples", help="LoRA methods: workflows sampled per question.", min=1)
]
StepsOption = Annotated[int, typer.Option("--steps", help="grpo: optimizer steps.", min=1)]
QuestionsPerStepOption = Annotated[
    int, typer.Option("--questions-per-step", help="grpo: questions a step.", min=1)
]
EvalEveryOption = Annotated[
    int, typer.Option("--eval-every", help="grpo: held-out score every N steps.", min=1)
]
LearningRateOption = Annotated[
    float | None,
    typer.Option("--lr", help="LoRA learning rate [default: 1e-3 EI, 3e-4 GRPO].", min=0),
]
EpochsOption = Annotated[
    int, typer.Option("--epochs", help="expert-iteration: passes a round.", min=1)
]
RankOption = Annotated[int, typer.Option("--rank", help="LoRA rank.", min=1)]
ExploreOption = Annotated[
    float,
    typer.Option("--explore", help="expert-iteration: share of samples with a random shape."),
]
DeviceOption = Annotated[
    str, typer.Option("--device", help="LoRA methods: auto (CUDA if seen), cpu or cuda.")
]
EngineOption = Annotated[
    str,
    typer.Option(
        "--engine",
        help="grpo: ours (one process) or trl (TRL's GRPOTrainer; several processes under "
        "`accelerate launch`).",
    ),
]
ProcessesOption = Annotated[
    int,
    typer.Option(
        "--processes",
        help="--engine trl: train in N processes on this machine (accelerate's launcher: one "
        "per GPU, or CPU processes over gloo).",
        min=1,
    ),
]
ForceOption = Annotated[bool, typer.Option("--force", help="Replace a conductor of that name.")]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="Continue an interrupted training of --out.")
]
AsJsonOption = Annotated[bool, typer.Option("--json", help="Print the training record.")]


@handle_errors
def train_cmd(
    ctx: typer.Context,
    dataset: DatasetArg,
    file: DatasetFileArg = None,
    out: OutOption = "my-conductor",
    method: MethodOption = "head",
    tasks: TasksOption = None,
    rounds: RoundsOption = 1,
    search: SearchOption = "adaptive",
    policy: PolicyOption = "auto",
    shapes: ShapesOption = None,
    max_calls: MaxCallsOption = None,
    max_cost: MaxCostOption = None,
    dry_run: DryRunOption = False,
    scorer: ScorerOption = "exact",
    limit: LimitOption = None,
    sample: SampleOption = None,
    holdout: HoldoutOption = 0.2,
    seed: SeedOption = 0,
    repeats: RepeatsOption = 2,
    generations: GenerationsOption = 60,
    cost_weight: CostWeightOption = 0.0,
    step_cost: StepCostOption = 0.001,
    learn_words: LearnWordsOption = 0,
    concurrency: ConcurrencyOption = 4,
    iterations: IterationsOption = 3,
    samples: SamplesOption = 8,
    steps: StepsOption = 40,
    questions_per_step: QuestionsPerStepOption = 4,
    eval_every: EvalEveryOption = 10,
    learning_rate: LearningRateOption = None,
    epochs: EpochsOption = 6,
    rank: RankOption = 16,
    explore: ExploreOption = 0.25,
    device: DeviceOption = "auto",
    engine: EngineOption = "ours",
    processes: ProcessesOption = 1,
    force: ForceOption = False,
    resume: ResumeOption = False,
    as_json: AsJsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Train a conductor on your pool: it learns which workflow fits which question.

    head: every workflow shape is run on the training questions and scored; a small head over
    the conductor's hidden state learns to pick the best one. expert-iteration and grpo:
    workflows sampled from the conductor are run and scored, and a LoRA on its weights is fit
    to the right ones (or by advantage). Held-out questions measure the untrained and the
    trained conductor. Ctrl-C keeps the work done; --resume continues.
    """
    params = dict(ctx.params)  # each option, by the name of the field it fills
    from conductor_cli.config import load_config
    from conductor_cli.errors import InputError
    from conductor_cli.evals import draw, load_dataset
    from conductor_cli.train import (
        METHODS,
        HeadOptions,
        LoraOptions,
        TrainOptions,
        from_params,
        is_launched,
        launch_processes,
        train,
    )

    if method not in METHODS:
        raise InputError(f"--method {method!r}: use one of {', '.join(METHODS)}")
    if processes > 1 and not is_launched():
        if engine != "trl":
            raise InputError(
                f"--processes {processes}: only --engine trl trains in several processes"
            )
        raise typer.Exit(launch_processes(sys.argv[1:], processes, device))
    cfg = load_config(config_path(ctx, config))
    # A public set trains on its own training split, never on a test item.
    problems = draw(
        load_dataset(dataset, file, scorer, split="train"),
        dataset,
        limit=limit,
        sample=sample,
        seed=seed,
    )
    params["shapes"] = tuple(x.strip() for x in (shapes or "").split(";") if x.strip())
    params["name"] = out
    options = from_params(TrainOptions, {
        **params,
        "head": from_params(HeadOptions, params),
        "lora": from_params(LoraOptions, params),
    })  # fmt: skip
    with _Display() as display, _interrupted_note(out), _exit_noted():
        record = train(cfg, problems, options, method, data_file=file, on_progress=display.show)
    if record is not None:  # None: a process of several, not the main one
        from conductor_cli.cli.train_summary import summary

        typer.echo(json.dumps(record, indent=2) if as_json else summary(record))


@contextlib.contextmanager
def _exit_noted() -> Iterator[None]:
    """In a process `--processes` launched: the exit code it ends with, for the launcher."""
    from conductor_cli.errors import EXIT_INTERRUPTED, ConductorError
    from conductor_cli.train import note_exit

    try:
        yield
    except ConductorError as e:
        note_exit(e.exit_code)
        raise
    except KeyboardInterrupt:
        note_exit(EXIT_INTERRUPTED)
        raise


@contextlib.contextmanager
def _interrupted_note(out: str) -> Iterator[None]:
    """Ctrl-C says how to continue; the runs done are kept by the library."""
    try:
        yield
    except KeyboardInterrupt:
        sys.stderr.write(
            f"conductor: training interrupted; the runs done are kept: "
            f"`conductor train ... --out {out} --resume` continues\n"
        )
        raise


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
        if p.stage == "note":  # a line to keep (the estimate), not a bar
            if self._progress is not None:
                self._progress.console.print(f"conductor: {p.detail}", highlight=False)
            else:
                sys.stderr.write(f"conductor: {p.detail}\n")
            return
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
