"""Views of a run: a live Rich tree for terminals and plain progress lines for everything else.

Both are subscribers: the engine emits events and never calls into this module. `RunState`
folds events into what the tree shows, so a live run, a replay and `conductor traces show`
(which feeds recorded events) all render through the same code.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text
from rich.tree import Tree

from conductor_cli.run.events import (
    NestedEvent,
    PlanReady,
    PlanStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    Source,
    StepFailed,
    StepFinished,
    StepRetry,
    StepSkipped,
    StepStarted,
    StepToken,
)
from conductor_cli.run.workflow import Workflow

StepStatus = Literal[
    "waiting", "running", "retrying", "done", "failed", "skipped", "cached", "replayed"
]
PlanStatus = Literal["waiting", "planning", "planned", "failed"]

_FINISHED_STATUS: dict[str, StepStatus] = {"model": "done", "cache": "cached", "trace": "replayed"}

# Streamed output is only ever shown by its end, so a long generation need not be kept whole
# until StepFinished brings the full text.
TAIL_KEEP = 2000
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


@dataclass
class StepState:
    index: int
    worker: str
    task: str
    sees: tuple[int, ...] = ()
    status: StepStatus = "waiting"
    started: float | None = None
    seconds: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None  # None: the price is unknown, not zero
    output: str = ""  # the streamed tail while running; the full output once finished
    error: str | None = None


@dataclass
class RunState:
    question: str = ""
    conductor: str = ""
    planning: PlanStatus = "waiting"
    plan_started: float | None = None
    plan_seconds: float | None = None
    plan_source: Source | None = None
    workflow: Workflow | None = None
    steps: list[StepState] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None
    interrupted: bool = False
    # The time of the latest event: a recorded run is drawn as of its end, not as of today.
    last_at: float | None = None
    # Workflows the conductor wrote as a step (recursion), by step index.
    nested: dict[int, RunState] = field(default_factory=dict)

    def apply(self, event: Any) -> None:
        """Fold one event into the state; events that make no sense here are ignored."""
        at = getattr(event, "at", None)
        if isinstance(at, int | float):
            self.last_at = at if self.last_at is None else max(self.last_at, at)
        match event:
            case NestedEvent():
                if self._step(event.step):
                    self.nested.setdefault(event.step, RunState()).apply(event.event)
            case RunStarted():
                self.question = event.question
            case PlanStarted():
                self.conductor = event.conductor
                self.planning = "planning"
                self.plan_started = event.at
            case PlanReady():
                self.planning = "planned"
                self.plan_seconds = event.seconds
                self.plan_source = event.source
                self.workflow = event.workflow
                self.steps = [
                    StepState(i, s.worker, s.task, tuple(s.sees))
                    for i, s in enumerate(event.workflow.steps)
                ]
            case StepStarted():
                if step := self._step(event.index):
                    step.worker, step.task = event.worker, event.task
                    step.status, step.started = "running", event.at
                    step.output, step.error, step.seconds = "", None, None
            case StepToken():
                step = self._step(event.index)
                # Tokens arriving after the step ended (a late thread) must not touch its output.
                if step and step.status in ("running", "retrying"):
                    step.output = (step.output + event.text)[-TAIL_KEEP:]
            case StepFinished():
                if step := self._step(event.index):
                    step.status = _FINISHED_STATUS.get(event.source, "done")
                    step.worker, step.output = event.worker, event.output
                    step.seconds, step.cost = event.seconds, event.cost
                    step.tokens_in, step.tokens_out = event.tokens_in, event.tokens_out
            case StepFailed():
                if step := self._step(event.index):
                    step.status, step.error = "failed", event.error
                    step.seconds = _since(step.started, event.at)
            case StepRetry():
                if step := self._step(event.index):
                    # The next try streams its output afresh.
                    step.status, step.worker, step.output = "retrying", event.worker, ""
                    step.error = event.error
            case StepSkipped():
                if step := self._step(event.index):
                    step.status, step.error = "skipped", event.reason
            case RunFinished():
                self.answer = event.answer
            case RunFailed():
                self.error, self.interrupted = event.error, event.interrupted
                if self.planning == "planning":
                    self.planning = "failed"
                # Steps cut off by the failure would otherwise spin forever in the final tree.
                reason = "interrupted" if event.interrupted else "stopped: the run failed"
                for step in self.steps:
                    if step.status in ("running", "retrying"):
                        step.status, step.error = "failed", reason
                        step.seconds = _since(step.started, event.at)

    def _step(self, index: int) -> StepState | None:
        return self.steps[index] if 0 <= index < len(self.steps) else None


def _since(start: float | None, end: float) -> float | None:
    return None if start is None else max(0.0, end - start)


# ---------------------------------------------------------------------------- formatting

_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")
_SPACE = re.compile(r"\s+")


def one_line(text: str) -> str:
    """Text with escape sequences dropped and every run of whitespace made one space."""
    return _SPACE.sub(" ", _CONTROL.sub("", text)).strip()


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


def _source_note(source: Source | None) -> str:
    return {"cache": " (cached)", "trace": " (replayed)"}.get(source or "", "")


# ---------------------------------------------------------------------------- the tree


def _conductor_label(state: RunState, now: float, spin: str) -> Text:
    label = Text()
    # A GGUF identity is a full path; its file name says enough on one line.
    model = (
        state.conductor.rsplit("/", 1)[-1]
        if state.conductor.startswith("gguf:")
        else state.conductor
    )
    name = f"conductor {model}" if state.conductor else "conductor"
    if state.planning == "planning":
        label.append(f"{spin} ", style="cyan").append(name, style="bold")
        label.append(" planning…", style="cyan")
        if elapsed := _since(state.plan_started, now):
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
    style = _STYLES[step.status]
    live = step.status in ("running", "retrying")
    marker = spin if live else _MARKERS[step.status]
    label = Text()
    label.append(f"{marker} {step.status}", style=style)
    label.append(f" step {step.index} ")
    label.append(step.worker, style="bold")
    label.append(f"  {clip(step.task, TASK_CHARS)}")
    meta = [_sees(step.sees)]
    elapsed = _since(step.started, now) if live else step.seconds
    if elapsed is not None:
        meta.append(format_seconds(elapsed))
    if step.tokens_in is not None and step.tokens_out is not None:
        meta.append(f"{step.tokens_in}→{step.tokens_out} tok")
    if step.cost is not None:
        meta.append(format_cost(step.cost))
    label.append("  " + " · ".join(meta), style="dim")
    return label


def build_tree(state: RunState, *, now: float | None = None, spinner_frame: int = 0) -> Tree:
    """The run as a tree: the question, the conductor's plan, then one line per step.

    Labels are Text objects, never markup strings, so brackets in questions, tasks, outputs
    and errors are shown as written instead of being read as Rich markup.
    """
    now = time.time() if now is None else now
    spin = SPINNER[spinner_frame % len(SPINNER)]
    tree = Tree(Text(clip(state.question, QUESTION_CHARS) or "conductor", style="bold"))
    _add_workflow(tree, state, now, spin)
    if state.interrupted:
        tree.add(Text("✗ interrupted", style="yellow"))
    elif state.error is not None:
        tree.add(Text(f"✗ run failed: {clip(state.error, ERROR_CHARS)}", style="red"))
    return tree


def _add_workflow(node: Tree, state: RunState, now: float, spin: str) -> None:
    """The conductor's line and one line per step; a recursive step holds its own subtree."""
    node.add(_conductor_label(state, now, spin))
    for step in state.steps:
        child = node.add(_step_label(step, now, spin))
        if step.index in state.nested:
            _add_workflow(child, state.nested[step.index], now, spin)
        if step.status in ("running", "retrying") and one_line(step.output):
            child.add(Text(tail(step.output, TAIL_CHARS), style="dim"))
        elif step.status in ("failed", "skipped") and step.error:
            child.add(Text(clip(step.error, ERROR_CHARS), style="red"))


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
