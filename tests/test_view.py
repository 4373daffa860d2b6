"""The live tree, the plain progress lines and the state they share, fed hand-made events."""

from __future__ import annotations

import io
import time
from typing import Any

from rich.console import Console

from conductor_cli.cli.view import (
    SPINNER,
    LiveTreeView,
    PlainProgress,
    build_tree,
    render_static,
    shown_status,
)
from conductor_cli.run.events import (
    NestedEvent,
    PlanReady,
    PlanStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFailed,
    StepFinished,
    StepStarted,
    StepToken,
    event_from_dict,
    event_to_dict,
)
from conductor_cli.run.state import RunState
from conductor_cli.run.workflow import Step, Workflow

T0 = 1_000_000.0

WORKFLOW = Workflow(
    (
        Step("local", "list the facts in the question", ()),
        Step("coder", "write code that checks the facts", (0,)),
        Step("critic", "review both answers and decide", (0, 1)),
    )
)


def console(width: int = 100) -> Console:
    return Console(record=True, width=width, force_terminal=True, color_system=None)


def render(state: RunState, now: float = T0 + 10, frame: int = 0, width: int = 100) -> str:
    c = console(width)
    c.print(build_tree(state, now=now, spinner_frame=frame))
    return c.export_text()


def fold(events: list[Any]) -> RunState:
    state = RunState()
    for e in events:
        state.apply(e)
    return state


def line_with(text: str, needle: str) -> str:
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1, (needle, text)
    return lines[0]


def planned() -> list[Any]:
    return [
        RunStarted("What is 2+2?", at=T0),
        PlanStarted("qwen-0.5b", at=T0),
        PlanReady(WORKFLOW, 1.25, tokens_in=50, tokens_out=30, at=T0 + 1.25),
    ]


def full_run() -> list[Any]:
    return [
        *planned(),
        StepStarted(0, "local", "list the facts in the question", (), at=T0 + 2),
        StepToken(0, "Two plus", at=T0 + 2.5),
        StepToken(0, " two.", at=T0 + 3),
        StepFinished(0, "local", "Two plus two.", 12, 40, 1.2, cost=0.0012, at=T0 + 3.2),
        StepStarted(1, "coder", "write code that checks the facts", (), at=T0 + 3.3),
        StepFinished(1, "coder", "print(4)", 20, 5, 0.0, source="cache", at=T0 + 3.3),
        StepStarted(2, "critic", "review both answers and decide", (), at=T0 + 3.4),
        StepFailed(2, "critic", "the server closed the connection", at=T0 + 5.4),
    ]


def test_full_run_shows_every_step_with_its_status() -> None:
    text = render(fold(full_run()))
    assert line_with(text, "What is 2+2?")
    assert "planned 3 steps in 1.2s" in line_with(text, "conductor qwen-0.5b")
    first = line_with(text, "step 0")
    assert "local" in first and "done" in first and "✓" in first
    assert "1.2s" in first and "12→40 tok" in first and "$0.0012" in first
    assert "sees —" in first
    second = line_with(text, "step 1")
    assert "coder" in second and "cached" in second and "sees 0" in second
    third = line_with(text, "step 2")
    assert "critic" in third and "failed" in third and "sees 0,1" in third
    assert "2.0s" in third  # from its start to the failure
    assert "the server closed the connection" in text
    # The error sits under the failed step, not on its line.
    assert "connection" not in third


def test_running_step_shows_spinner_elapsed_and_streamed_tail() -> None:
    events = full_run()[:6]  # step 0 started and streamed two pieces
    text = render(fold(events), now=T0 + 3.5, frame=3)
    step = line_with(text, "step 0")
    assert "running" in step and SPINNER[3] in step and "1.5s" in step
    assert "tok" not in step  # no counts until the step finishes
    assert "Two plus two." in line_with(text, "Two plus")
    assert "running" in line_with(text, "step 0") and "planned" in text
    # A later frame draws a different spinner character.
    assert SPINNER[4] in line_with(render(fold(events), frame=4), "step 0")


def test_steps_wait_until_they_start() -> None:
    text = render(fold(planned()))
    for i, worker in enumerate(["local", "coder", "critic"]):
        line = line_with(text, f"step {i}")
        assert "waiting" in line and "○" in line and worker in line
        assert "running" not in line


def test_conductor_node_follows_planning() -> None:
    planning = render(fold(planned()[:2]), now=T0 + 0.7)
    assert "planning…" in line_with(planning, "conductor")
    assert "0.7s" in line_with(planning, "conductor")
    assert "step 0" not in planning

    cached = [*planned()[:2], PlanReady(WORKFLOW, 0.01, source="cache", at=T0)]
    assert "planned 3 steps in 0.0s (cached)" in render(fold(cached))

    failed = fold([*planned()[:2], RunFailed("no workflow in the reply", at=T0 + 2)])
    text = render(failed)
    assert "planning failed" in text and "no workflow in the reply" in text


def test_long_streamed_output_shows_only_its_end_on_one_line() -> None:
    body = "".join(f"line {i}\n" for i in range(200))
    state = fold([*planned(), StepStarted(0, "local", "t", (), at=T0), StepToken(0, body)])
    text = render(state, width=140)  # wide enough that the tail itself does not wrap
    tail_lines = [line for line in text.splitlines() if "line 199" in line]
    assert len(tail_lines) == 1
    shown = tail_lines[0].split("…", 1)[1].strip()
    assert 80 <= len(shown) < 100
    assert "line 198 line 199" in shown  # newlines collapsed to spaces
    assert "line 150 " not in text


def test_markup_looking_text_is_shown_literally() -> None:
    events = [
        RunStarted("why [bold]x[/bold]?", at=T0),
        PlanStarted("c", at=T0),
        PlanReady(Workflow((Step("w[1]", "read [0] and [red]", ()), Step("w", "t [/]", ()))), 1),
        StepStarted(0, "w[1]", "read [0] and [red]", (), at=T0),
        StepToken(0, "out [/bold] [link=x]"),
        StepStarted(1, "w", "t [/]", (), at=T0),
        StepFailed(1, "w", "bad [/red] thing [i]"),
    ]
    text = render(fold(events))
    for literal in [
        "why [bold]x[/bold]?",
        "w[1]",
        "read [0] and [red]",
        "out [/bold] [link=x]",
        "t [/]",
        "bad [/red] thing [i]",
    ]:
        assert literal in text, literal


def test_finished_step_status_follows_its_source() -> None:
    for source, word in [("model", "done"), ("cache", "cached"), ("trace", "replayed")]:
        state = fold([*planned(), StepFinished(0, "local", "out", 1, 2, 0.5, source=source)])
        assert state.steps[0].status == "done" and shown_status(state.steps[0]) == word
        assert word in line_with(render(state), "step 0")


def test_finished_output_replaces_streamed_text_and_late_tokens_are_ignored() -> None:
    state = fold(
        [
            *planned(),
            StepStarted(0, "local", "t", (), at=T0),
            StepToken(0, "partial"),
            StepFinished(0, "local", "the whole answer", 1, 2, 0.5),
            StepToken(0, " late"),
        ]
    )
    assert state.steps[0].output == "the whole answer"
    assert "partial" not in render(state)


def test_out_of_order_and_unknown_events_do_not_crash() -> None:
    state = RunState()
    for event in [
        StepToken(0, "too early"),
        StepStarted(3, "w", "t", ()),
        StepFinished(0, "w", "o", 1, 1, 1.0),
        StepFailed(-1, "w", "e"),
        object(),
        "not an event",
        RunFinished("4"),
    ]:
        state.apply(event)
    assert state.steps == [] and state.answer == "4"
    render(state)  # no question, no plan: still draws

    state = fold([*planned(), StepToken(7, "x"), StepFinished(5, "w", "o", 1, 1, 1.0)])
    assert [shown_status(s) for s in state.steps] == ["waiting"] * 3


def test_interrupt_stops_running_steps() -> None:
    state = fold(
        [
            *planned(),
            StepStarted(0, "local", "t", (), at=T0 + 2),
            RunFailed("interrupted", interrupted=True, at=T0 + 4),
        ]
    )
    assert state.steps[0].status == "interrupted" and shown_status(state.steps[0]) == "failed"
    assert state.steps[0].elapsed(T0 + 100) == 2.0
    text = render(state, now=T0 + 100)
    assert "2.0s" in line_with(text, "step 0")
    assert "interrupted" in text
    assert all(ch not in text for ch in SPINNER)


def test_interrupt_stops_a_nested_runs_steps_too() -> None:
    # The trace always marked a nested run's running steps interrupted; the tree, drawn from
    # the same state now, no longer leaves them spinning.
    sub = Workflow((Step("local", "restate the facts", ()),))
    events = [
        *planned(),
        StepStarted(0, "local", "t", (), at=T0 + 2),
        NestedEvent(0, PlanReady(sub, 0.5, at=T0 + 2.5), at=T0 + 2.5),
        NestedEvent(0, StepStarted(0, "local", "restate the facts", (), at=T0 + 3), at=T0 + 3),
        RunFailed("interrupted", interrupted=True, at=T0 + 4),
    ]
    text = render(fold(events), now=T0 + 100)
    assert all(ch not in text for ch in SPINNER)
    nested = line_with(text, "restate the facts")
    assert "failed" in nested and "1.0s" in nested
    assert text.count("interrupted") == 3  # under both cut-off steps, and the run's end


def test_recorded_events_render_the_same_as_live_ones() -> None:
    again = [event_from_dict(event_to_dict(e)) for e in full_run()]
    assert render(fold(again)) == render(fold(full_run()))


def test_render_static_draws_as_of_the_last_event() -> None:
    # A trace that stops while step 0 runs: its elapsed time is counted to the last event,
    # not to the moment the trace is shown.
    events = [*planned(), StepStarted(0, "local", "t", (), at=T0 + 2), StepToken(0, "x", T0 + 3)]
    c = console()
    render_static(fold(events), c)
    assert "1.0s" in line_with(c.export_text(), "step 0")


def test_plain_progress_writes_plain_lines() -> None:
    stream = io.StringIO()
    progress = PlainProgress(stream)
    for event in [*full_run(), RunFinished("4")]:
        progress(event)
    assert stream.getvalue().splitlines() == [
        "conductor: planning",
        "conductor: planned 3 steps in 1.2s",
        "step 0 local: running",
        "step 0 local: done in 1.2s (12→40 tok, $0.0012)",
        "step 1 coder: running",
        "step 1 coder: cached in 0.0s (20→5 tok)",
        "step 2 critic: running",
        "step 2 critic: failed: the server closed the connection",
    ]
    assert "\x1b[" not in stream.getvalue()


def test_plain_progress_keeps_each_event_on_one_line() -> None:
    stream = io.StringIO()
    progress = PlainProgress(stream)
    progress(StepToken(0, "ignored"))
    progress(StepFailed(1, "w", "first\nsecond \x1b[31mred\x1b[0m [x]"))
    progress(PlanReady(Workflow((Step("w", "t", ()),)), 0.5, source="trace"))
    assert stream.getvalue() == (
        "step 1 w: failed: first second red [x]\nconductor: planned 1 step in 0.5s (replayed)\n"
    )


def test_live_view_leaves_the_final_tree_on_screen() -> None:
    c = console()
    view = LiveTreeView(c)
    with view:
        for event in full_run():
            view(event)
            time.sleep(0.01)
        time.sleep(0.3)  # let the refresh thread draw at least once mid-run
    view.stop()  # a second stop is harmless
    text = c.export_text()
    # The last drawing is the finished run.
    final = text[text.rindex("What is 2+2?") :]
    assert "done" in line_with(final, "step 0")
    assert "cached" in line_with(final, "step 1")
    assert "failed" in line_with(final, "step 2")
    assert "the server closed the connection" in final
    assert view.state.steps[2].status == "failed"


def test_live_view_start_stop_without_events() -> None:
    c = console()
    view = LiveTreeView(c)
    view.start()
    view.start()  # already started: no second Live
    view.stop()
    assert "conductor" in c.export_text()
