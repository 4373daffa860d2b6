"""Views of a run: a live Rich tree for terminals and plain progress lines for everything else.

Both are subscribers: the engine emits events and never calls into this module. The tree is
drawn from `run/state.RunState`, the fold of the events that the trace is written from too,
so a live run, a replay and `conductor traces show` (which feeds recorded events) all render
through the same code and show what the trace records.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, Literal, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text
from rich.tree import Tree

from conductor_cli.cli.safe_text import flat
from conductor_cli.models import ModelSpec
from conductor_cli.run import (
    NestedEvent,
    PlanReady,
    PlanStarted,
    RoundEvent,
    RunState,
    Source,
    StepFailed,
    StepFinished,
    StepRetry,
    StepSkipped,
    StepStarted,
    StepState,
)

# What a step's line says: the run state's status, with a finished step's source made visible
# and every way of not finishing (its own failure, an interrupt, the run failing) as "failed".
ShownStatus = Literal[
    "waiting", "running", "retrying", "done", "failed", "skipped", "cached", "replayed"
]

_FINISHED_STATUS: dict[str, ShownStatus] = {
    "model": "done",
    "cache": "cached",
    "trace": "replayed",
    "kept": "done",
}
_SHOWN_STATUS: dict[str, ShownStatus] = {
    "pending": "waiting",
    "running": "running",
    "retrying": "retrying",
    "failed": "failed",
    "skipped": "skipped",
    "interrupted": "failed",
    "stopped": "failed",
}
# Why a step cut off by the run's end did not finish.
_CUT_OFF: dict[str, str] = {"interrupted": "interrupted", "stopped": "stopped: the run failed"}

QUESTION_CHARS = 100
TASK_CHARS = 70
TAIL_CHARS = 100
ERROR_CHARS = 300

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_MARKERS: dict[str, str] = {
    "waiting": "○",
    "done": "✓",
    "cached": "⚡",
    "replayed": "↺",
    "failed": "✗",
    "skipped": "⊘",
}
_STYLES: dict[str, str] = {
    "waiting": "dim",
    "planning": "cyan",
    "running": "cyan",
    "planned": "green",
    "done": "green",
    "cached": "blue",
    "replayed": "blue",
    "failed": "red",
    "skipped": "dim",
    "retrying": "yellow",
}


def shown_status(step: StepState) -> ShownStatus:
    if step.status == "done":
        return _FINISHED_STATUS.get(step.source or "model", "done")
    return _SHOWN_STATUS[step.status]


def shown_error(step: StepState) -> str | None:
    """The reason under a step that did not finish: its own error, or why the run cut it off."""
    return _CUT_OFF.get(step.status, step.error)


# ---------------------------------------------------------------------------- formatting


def one_line(text: str) -> str:
    """Text with escape sequences dropped, other control made visible and every run of
    whitespace made one space (cli/safe_text.flat)."""
    return flat(text)


def clip(text: str, limit: int) -> str:
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tail(text: str, limit: int) -> str:
    text = one_line(text)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :].lstrip()


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def format_cost(cost: float) -> str:
    return "<$0.0001" if 0 < cost < 0.0001 else f"${cost:.4f}"


def _sees(sees: tuple[int, ...]) -> str:
    return "sees " + (",".join(str(i) for i in sees) if sees else "—")


# A finished step whose generation did not end by itself says how it ended.
FINISH_NOTES = {"length": "cut at max_tokens", "loop": "stopped repeating itself"}


def _source_note(source: Source | None) -> str:
    notes = {"cache": " (cached)", "trace": " (replayed)", "kept": " (kept: nothing to repair)"}
    return notes.get(source or "", "")


# ---------------------------------------------------------------------------- the tree


def _conductor_label(state: RunState, now: float, spin: str) -> Text:
    label = Text()
    # A GGUF identity is a full path; its file name says enough on one line.
    spec = ModelSpec.for_worker(state.conductor)
    model = spec.name.rsplit("/", 1)[-1] if spec.local else state.conductor
    name = f"conductor {model}" if state.conductor else "conductor"
    if state.planning == "planning":
        label.append(f"{spin} ", style="cyan").append(name, style="bold")
        label.append(" planning…", style="cyan")
        if state.plan_started is not None and (elapsed := max(0.0, now - state.plan_started)):
            label.append(f" {format_seconds(elapsed)}", style="dim")
    elif state.planning == "planned":
        n = len(state.steps)
        seconds = format_seconds(state.plan_seconds or 0.0)
        label.append("✓ ", style="green").append(name, style="bold")
        label.append(f" planned {n} step{'' if n == 1 else 's'} in {seconds}", style="green")
        label.append(_source_note(state.plan_source), style="dim")
    elif state.planning == "failed":
        label.append("✗ ", style="red").append(name, style="bold")
        label.append(" planning failed", style="red")
    else:
        label.append("○ ", style="dim").append(name, style="bold").append(" waiting", style="dim")
    return label


def _step_label(step: StepState, now: float, spin: str) -> Text:
    status = shown_status(step)
    marker = spin if step.live else _MARKERS[status]
    label = Text()
    label.append(f"{marker} {status}", style=_STYLES[status])
    label.append(f" step {step.index} ")
    label.append(step.current_worker or step.worker, style="bold")
    label.append(f"  {clip(step.task, TASK_CHARS)}")
    meta = [_sees(step.sees)]
    elapsed = step.elapsed(now)
    if elapsed is not None:
        meta.append(format_seconds(elapsed))
    if step.tokens_in is not None and step.tokens_out is not None:
        meta.append(f"{step.tokens_in}→{step.tokens_out} tok")
    if step.cost is not None:
        meta.append(format_cost(step.cost))
    if step.finish in FINISH_NOTES:
        meta.append(FINISH_NOTES[step.finish])
    label.append("  " + " · ".join(meta), style="dim")
    return label


def build_tree(state: RunState, *, now: float | None = None, spinner_frame: int = 0) -> Tree:
    """The run as a tree: the question, the conductor's plan, then one line per step.

    Labels are Text objects, never markup strings, so brackets in questions, tasks, outputs
    and errors are shown as written instead of being read as Rich markup.
    """
    now = time.time() if now is None else now
    spin = SPINNER[spinner_frame % len(SPINNER)]
    tree = Tree(Text(clip(state.question or "", QUESTION_CHARS) or "conductor", style="bold"))
    if state.rounds:
        _add_workflow(tree.add(Text("round 1", style="bold")), state, now, spin)
        for number, later in enumerate(state.rounds, 2):
            _add_workflow(tree.add(_round_label(number, later)), later, now, spin)
    else:
        _add_workflow(tree, state, now, spin)
    if state.interrupted:
        tree.add(Text("✗ interrupted", style="yellow"))
    elif state.error is not None:
        tree.add(Text(f"✗ run failed: {clip(state.error, ERROR_CHARS)}", style="red"))
    return tree


def _round_label(number: int, state: RunState) -> Text:
    """A later round: the conductor read the answer, then kept it or corrected it."""
    label = Text(f"round {number}", style="bold")
    if state.kept:
        label.append("  kept the answer", style="green")
    elif state.status == "failed":
        label.append("  did not finish: the earlier answer stands", style="yellow")
    elif state.workflow is not None:
        label.append("  corrective workflow", style="cyan")
    else:
        label.append("  reading the answer", style="cyan")
    return label


def _add_workflow(node: Tree, state: RunState, now: float, spin: str) -> None:
    """The conductor's line and one line per step; a nested step (older traces) holds its own
    subtree."""
    node.add(_conductor_label(state, now, spin))
    for step in state.steps:
        child = node.add(_step_label(step, now, spin))
        if step.nested is not None:
            _add_workflow(child, step.nested, now, spin)
        error = shown_error(step)
        if step.live and one_line(step.tail):
            child.add(Text(tail(step.tail, TAIL_CHARS), style="dim"))
        elif shown_status(step) in ("failed", "skipped") and error:
            child.add(Text(clip(error, ERROR_CHARS), style="red"))


def render_static(state: RunState, console: Console) -> None:
    """Print the tree once, as of the last event (for `conductor traces show`)."""
    console.print(build_tree(state, now=state.last_at))


# ---------------------------------------------------------------------------- subscribers


class LiveTreeView:
    """A tree redrawn in place while the run goes; the last drawing stays on screen."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.state = RunState()
        # Events arrive on worker threads while Live draws on its own refresh thread.
        self._lock = threading.Lock()
        self._live: Live | None = None

    def __call__(self, event: Any) -> None:
        with self._lock:
            self.state.apply(event)

    def _renderable(self) -> Tree:
        now = time.time()
        with self._lock:
            return build_tree(self.state, now=now, spinner_frame=int(now * 10))

    def start(self) -> None:
        if self._live is not None:
            return
        # stdout is left alone: the answer may be piped while the tree is drawn on stderr.
        self._live = Live(
            get_renderable=self._renderable,
            console=self.console,
            refresh_per_second=8,
            transient=False,
            redirect_stdout=False,
        )
        self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def __enter__(self) -> LiveTreeView:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class PlainProgress:
    """One plain line per meaningful event, for `--verbose` when stderr is not a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        # Lines come from several worker threads; each must reach the stream whole.
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        line = self._line(event)
        if line is None:
            return
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    @staticmethod
    def _line(event: Any) -> str | None:
        match event:
            case NestedEvent():
                inner = PlainProgress._line(event.event)
                return f"  step {event.step} > {inner}" if inner else None
            case RoundEvent():
                inner = PlainProgress._line(event.event)
                if isinstance(event.event, PlanReady) and not event.event.workflow.steps:
                    inner = "conductor: kept the answer"
                return f"round {event.round}: {inner}" if inner else None
            case PlanStarted():
                return "conductor: planning"
            case PlanReady():
                n = len(event.workflow.steps)
                return (
                    f"conductor: planned {n} step{'' if n == 1 else 's'} in "
                    f"{format_seconds(event.seconds)}{_source_note(event.source)}"
                )
            case StepStarted():
                return f"step {event.index} {one_line(event.worker)}: running"
            case StepFinished():
                status = _FINISHED_STATUS.get(event.source, "done")
                extra = f"{event.tokens_in}→{event.tokens_out} tok"
                if event.cost is not None:
                    extra += f", {format_cost(event.cost)}"
                if event.finish in FINISH_NOTES:
                    extra += f", {FINISH_NOTES[event.finish]}"
                return (
                    f"step {event.index} {one_line(event.worker)}: {status} in "
                    f"{format_seconds(event.seconds)} ({extra})"
                )
            case StepFailed():
                return (
                    f"step {event.index} {one_line(event.worker)}: failed: {one_line(event.error)}"
                )
            case StepRetry():
                how = "falls back to" if event.fallback else f"try {event.attempt} on"
                return (
                    f"step {event.index}: {how} {one_line(event.worker)} in "
                    f"{format_seconds(event.delay)} after: {one_line(event.error)}"
                )
            case StepSkipped():
                return f"step {event.index} {one_line(event.worker)}: skipped: {event.reason}"
        # Tokens would flood a log; the run's own end is reported by the caller.
        return None
