"""The one fold of a run's events (run/state.py) and the trace written from it.

The trace files under tests/data/run_state/ were written by the trace writer as it was before
the fold was shared (it folded the events into a dict of its own) for the event sequences
below; the writer of today, fed the same events, must write the same bytes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from conductor_cli.config.settings import Config, config_from_dict
from conductor_cli.errors import TraceError
from conductor_cli.replay import play
from conductor_cli.run.events import (
    NestedEvent,
    PlanReady,
    PlanStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFailed,
    StepFinished,
    StepRetry,
    StepSkipped,
    StepStarted,
    StepToken,
)
from conductor_cli.run.state import TAIL_KEEP, RunState
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.storage.trace import (
    TraceWriter,
    load_trace,
    resumed_state,
    run_record,
    step_record,
)

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "run_state"
RUN_KEYS = ("status", "finished_at", "workflow", "steps", "answer", "error")

T0 = 1_700_000_000.0
HELLO = ({"role": "user", "content": "Say hello."},)

FOUR = Workflow(
    (
        Step("local", "List the facts in the question.", ()),
        Step("remote", "Write code that checks the facts.", (0,)),
        Step("critic", "Review both answers and decide.", (0, 1)),
        Step("local", "Summarise the decision for the user.", (2,)),
    )
)
TWO_RECURSIVE = Workflow(
    (
        Step("local", "List the facts in the question.", ()),
        Step("conductor", "Plan how to check the facts.", (0,)),
    )
)
SUB = Workflow(
    (
        Step("local", "Restate the facts briefly.", ()),
        Step("critic", "Check the restated facts.", (0,)),
    )
)


def retried_run() -> list[Any]:
    """Step 1 retried, then on its fallback; step 2 failed; step 3 skipped; the run failed."""
    return [
        RunStarted("What is 2+2?", at=T0),
        PlanStarted("qwen-0.5b", at=T0 + 0.1),
        PlanReady(FOUR, 1.25, tokens_in=50, tokens_out=30, at=T0 + 1.35),
        StepStarted(0, "local", "List the facts in the question.", HELLO, at=T0 + 2),
        StepToken(0, "Two plus", at=T0 + 2.5),
        StepFinished(0, "local", "Two plus two.", 12, 40, 1.23456, cost=0.0012, at=T0 + 3.2),
        StepStarted(1, "remote", "Write code that checks the facts.", HELLO, at=T0 + 3.3),
        StepRetry(1, "remote", 2, "rate limited", 0.5, at=T0 + 3.5),
        StepRetry(1, "alt", 1, "server down", 0.0, fallback=True, at=T0 + 4.0),
        StepFinished(1, "alt", "print(4)", 20, 5, 0.75, source="cache", at=T0 + 4.75),
        StepStarted(2, "critic", "Review both answers and decide.", HELLO, at=T0 + 5),
        StepFailed(2, "critic", "the server closed the connection", at=T0 + 7),
        StepSkipped(3, "local", "step 2 failed", at=T0 + 7.1),
        RunFailed("step 2 (critic): the server closed the connection", at=T0 + 7.2),
    ]


def _nested(event: Any) -> NestedEvent:
    return NestedEvent(1, event, at=event.at)


def recursive_run() -> list[Any]:
    """Step 1 is the conductor again: a nested run of two steps, then the answer."""
    return [
        RunStarted("Is 7 prime?", at=T0),
        PlanStarted("qwen-0.5b", at=T0 + 0.1),
        PlanReady(TWO_RECURSIVE, 1.0, at=T0 + 1.1),
        StepStarted(0, "local", "List the facts in the question.", HELLO, at=T0 + 1.2),
        StepFinished(0, "local", "7 has no divisors.", 10, 8, 0.5, at=T0 + 1.7),
        StepStarted(1, "conductor", "Plan how to check the facts.", (), at=T0 + 1.8),
        _nested(RunStarted("Plan how to check the facts.", at=T0 + 1.8)),
        _nested(PlanStarted("qwen-0.5b", at=T0 + 1.9)),
        _nested(PlanReady(SUB, 0.5, at=T0 + 2.4)),
        _nested(StepStarted(0, "local", "Restate the facts briefly.", HELLO, at=T0 + 2.5)),
        _nested(StepToken(0, "Seven", at=T0 + 2.6)),
        _nested(StepFinished(0, "local", "Seven is odd.", 5, 4, 0.3, at=T0 + 2.8)),
        _nested(StepStarted(1, "critic", "Check the restated facts.", HELLO, at=T0 + 2.9)),
        _nested(StepFinished(1, "critic", "Yes, prime.", 6, 3, 0.4, cost=0.5, at=T0 + 3.3)),
        _nested(RunFinished("Yes, prime.", at=T0 + 3.3)),
        StepFinished(1, "conductor", "Yes, prime.", 11, 7, 1.5, cost=0.5, at=T0 + 3.4),
        RunFinished("Yes, prime.", at=T0 + 3.5),
    ]


def interrupted_run() -> list[Any]:
    """Ctrl-C while step 1's nested run and step 2 (retrying) are under way; a late report."""
    three = Workflow((*TWO_RECURSIVE.steps, Step("critic", "Check the first answer.", (0,))))
    return [
        RunStarted("Is 7 prime?", at=T0),
        PlanStarted("qwen-0.5b", at=T0 + 0.1),
        PlanReady(three, 1.0, source="cache", at=T0 + 1.1),
        StepStarted(0, "local", "List the facts in the question.", HELLO, at=T0 + 1.2),
        StepFinished(0, "local", "7 has no divisors.", 10, 8, 0.5, at=T0 + 1.7),
        StepStarted(1, "conductor", "Plan how to check the facts.", (), at=T0 + 1.8),
        StepStarted(2, "critic", "Check the first answer.", HELLO, at=T0 + 1.8),
        _nested(RunStarted("Plan how to check the facts.", at=T0 + 1.8)),
        _nested(PlanStarted("qwen-0.5b", at=T0 + 1.9)),
        _nested(PlanReady(SUB, 0.5, at=T0 + 2.4)),
        _nested(StepStarted(0, "local", "Restate the facts briefly.", HELLO, at=T0 + 2.5)),
        StepToken(2, "It is", at=T0 + 2.6),
        StepRetry(2, "critic", 2, "timed out", 1.0, at=T0 + 2.7),
        RunFailed("interrupted", interrupted=True, at=T0 + 3.0),
        StepFailed(2, "critic", "llama.cpp: the model was closed", at=T0 + 3.1),
    ]


def planning_failed_run() -> list[Any]:
    return [
        RunStarted("What is 2+2?", at=T0),
        PlanStarted("qwen-0.5b", at=T0 + 0.1),
        RunFailed("the conductor's reply is not a workflow", at=T0 + 2.0),
    ]


SCENARIOS = {
    "retried": retried_run,
    "recursive": recursive_run,
    "interrupted": interrupted_run,
    "planning_failed": planning_failed_run,
}


def fold(events: list[Any]) -> RunState:
    state = RunState()
    for event in events:
        state.apply(event)
    return state


def pool_config() -> Config:
    return config_from_dict(
        {
            "workers": [
                {"name": n, "model": "gguf:smollm2-135m-instruct"}
                for n in ("local", "remote", "critic", "alt")
            ]
        }
    )


def write_trace(name: str, directory: Path) -> dict[str, Any]:
    events = SCENARIOS[name]()
    writer = TraceWriter(
        question=events[0].question,
        attachments=(),
        config=pool_config(),
        conductor_identity="test",
        directory=directory,
        trace_id=name,
    )
    for event in events:
        writer(event)
    return json.loads(writer.path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------- the typed state


def test_a_retried_then_failed_run_folds_into_typed_steps() -> None:
    state = fold(retried_run())
    assert state.status == "failed" and not state.interrupted
    assert state.error == "step 2 (critic): the server closed the connection"
    assert state.finished_at == T0 + 7.2 and state.last_at == T0 + 7.2
    assert (state.conductor, state.planning, state.plan_seconds) == ("qwen-0.5b", "planned", 1.25)
    assert (state.plan_tokens_in, state.plan_tokens_out) == (50, 30)
    assert state.workflow == FOUR
    first, retried, failed, skipped = state.steps
    assert first.status == "done" and first.source == "model" and first.output == "Two plus two."
    assert (first.tokens_in, first.tokens_out, first.cost) == (12, 40, 0.0012)
    assert first.seconds == 1.23456 and first.messages == HELLO and first.error is None
    # One try again on its own worker, then its fallback, whose cached answer finished it.
    assert retried.status == "done" and retried.source == "cache"
    assert (retried.retries, retried.fallback, retried.last_error) == (1, "alt", "server down")
    assert retried.worker == "remote" and retried.current_worker == "alt"
    assert retried.elapsed(T0 + 100) == 0.75
    assert failed.status == "failed" and failed.error == "the server closed the connection"
    assert failed.output is None and failed.source is None
    assert failed.elapsed(T0 + 100) == 2.0  # from its start to its failure
    assert skipped.status == "skipped" and skipped.error == "step 2 failed"
    assert skipped.messages is None and skipped.elapsed(T0 + 100) is None


def test_a_recursive_step_holds_its_nested_run() -> None:
    state = fold(recursive_run())
    assert state.status == "done" and state.answer == "Yes, prime."
    assert state.steps[0].nested is None
    step = state.steps[1]
    assert step.status == "done" and step.output == "Yes, prime." and step.cost == 0.5
    nested = step.nested
    assert nested is not None
    assert nested.question == "Plan how to check the facts." and nested.workflow == SUB
    assert nested.status == "done" and nested.answer == "Yes, prime."
    assert nested.finished_at == T0 + 3.3 and nested.planning == "planned"
    assert [s.status for s in nested.steps] == ["done", "done"]
    assert nested.steps[0].tail == "Seven" and nested.steps[0].output == "Seven is odd."
    assert nested.steps[1].cost == 0.5


def test_an_interrupt_cuts_off_running_steps_and_nested_runs() -> None:
    events = interrupted_run()
    late = events.pop()  # the report of a step's thread that arrives after the end
    state = fold(events)
    assert state.status == "interrupted" and state.interrupted and state.error == "interrupted"
    done, recursive, retrying = state.steps
    assert done.status == "done"
    assert recursive.status == "interrupted" and recursive.elapsed(T0 + 100) == pytest.approx(1.2)
    nested = recursive.nested
    assert nested is not None and nested.status == "interrupted"
    assert nested.finished_at == T0 + 3.0 and nested.error == "interrupted"
    assert [s.status for s in nested.steps] == ["interrupted", "pending"]
    # The retry dropped the first try's streamed text; the interrupt kept what it knew.
    assert retrying.status == "interrupted" and retrying.tail == ""
    assert (retrying.retries, retrying.last_error, retrying.error) == (1, "timed out", None)
    assert not retrying.live and retrying.elapsed(T0 + 100) == pytest.approx(1.2)
    # The fold takes a late report as it comes (the trace writer stops listening at the end).
    assert state.apply(late)
    assert retrying.status == "failed" and retrying.error == "llama.cpp: the model was closed"


def test_a_failed_run_stops_running_steps_and_planning() -> None:
    state = fold(
        [
            RunStarted("q", at=T0),
            PlanReady(FOUR, 1.0, at=T0 + 1),
            StepStarted(0, "local", "t", HELLO, at=T0 + 2),
            RunFailed("budget exceeded", at=T0 + 5),
        ]
    )
    assert state.status == "failed" and state.steps[0].status == "stopped"
    assert state.steps[0].elapsed(T0 + 100) == 3.0
    assert step_record(state.steps[0])["status"] == "failed"  # the trace's word for it
    assert [s.status for s in state.steps[1:]] == ["pending"] * 3
    planning = fold(planning_failed_run())
    assert planning.planning == "failed" and planning.steps == []


def test_apply_says_which_events_settle_something() -> None:
    state = RunState()
    settled = {type(e).__name__: state.apply(e) for e in retried_run()}
    assert settled == {
        "RunStarted": False,
        "PlanStarted": False,
        "PlanReady": True,
        "StepStarted": False,
        "StepToken": False,
        "StepFinished": True,
        "StepRetry": False,
        "StepFailed": True,
        "StepSkipped": True,
        "RunFailed": True,
    }
    assert not state.apply(StepFinished(9, "w", "o", 1, 1, 1.0))  # no such step
    assert not state.apply(NestedEvent(9, RunFinished("x")))
    assert state.apply(NestedEvent(0, RunFinished("x")))  # a nested run's end is settled


def test_streamed_text_keeps_only_its_end_and_late_tokens_are_ignored() -> None:
    state = fold(
        [
            PlanReady(FOUR, 1.0),
            StepStarted(0, "local", "t", ()),
            StepToken(0, "a" * TAIL_KEEP),
            StepToken(0, "bc"),
        ]
    )
    assert len(state.steps[0].tail) == TAIL_KEEP and state.steps[0].tail.endswith("bc")
    state.apply(StepFinished(0, "local", "whole", 1, 1, 0.1))
    state.apply(StepToken(0, "late"))
    assert state.steps[0].output == "whole" and not state.steps[0].tail.endswith("late")


def test_nonsense_events_are_ignored() -> None:
    state = fold([StepStarted(0, "w", "t", ()), StepFailed(-1, "w", "e"), object()])
    state.apply("not an event")
    assert state == RunState(last_at=state.last_at)


# ---------------------------------------------------------------------------- the trace from it


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_trace_is_written_as_before_byte_for_byte(name: str, tmp_path: Path) -> None:
    golden_text = (GOLDEN / f"{name}.json").read_text(encoding="utf-8")
    golden = json.loads(golden_text)
    record = write_trace(name, tmp_path)
    assert {k: record[k] for k in RUN_KEYS} == {k: golden[k] for k in RUN_KEYS}
    # Only the clock and the defaults of a worker's settings may differ; keys, their order
    # and every value the events decide are as the old writer wrote them.
    for key in ("started_at", "pool", "conductor"):
        record[key] = golden[key]
    assert json.dumps(record, ensure_ascii=False, indent=1) == golden_text


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_an_old_trace_refolds_to_what_it_holds(name: str) -> None:
    record = load_trace(GOLDEN / f"{name}.json")
    assert run_record(resumed_state(record)) == {k: record[k] for k in RUN_KEYS}


def test_a_real_runs_trace_refolds_to_what_it_holds() -> None:
    # Written by a real `ask` on the embedded model: its steps' messages are real prompts.
    record = load_trace(DATA / "sample_trace.json")
    state = resumed_state(record)
    assert run_record(state) == {k: record[k] for k in RUN_KEYS}
    assert all(s.messages for s in state.steps)


def test_a_replayed_trace_folds_like_the_live_run() -> None:
    record = load_trace(GOLDEN / "recursive.json")
    replayed = RunState()
    play(record, replayed.apply)
    live = fold(recursive_run())
    # A replay marks what it re-emits as coming from the trace; all else is the same.
    assert [s.source for s in replayed.steps] == ["trace", "trace"]
    assert replayed.plan_source == "trace"
    for step in [*replayed.steps, *live.steps]:
        step.source = None
    replayed.plan_source = live.plan_source = None
    # Prompts are not recorded in events, and a replay has no tokens to stream.
    for state in (replayed, live):
        for step in [*state.steps, *(state.steps[1].nested.steps if state.steps[1].nested else [])]:
            step.messages, step.tail = None, ""
    assert replayed == live


def test_resuming_keeps_writing_the_interrupted_trace(tmp_path: Path) -> None:
    write_trace("interrupted", tmp_path)
    base = load_trace(tmp_path / "interrupted.json")
    writer = TraceWriter(
        question="Is 7 prime?",
        attachments=(),
        config=pool_config(),
        conductor_identity="test",
        base=copy.deepcopy(base),
    )
    writer(RunStarted("Is 7 prime?", at=T0 + 100))
    first = json.loads(writer.path.read_text(encoding="utf-8"))
    # Until the plan comes again the file holds the interrupted run's steps, prompts included.
    assert first["status"] == "running" and first["error"] is None
    assert first["steps"] == base["steps"]
    assert first["finished_at"] == base["finished_at"]
    assert len(first["events"]) == len(base["events"]) + 1
    three = Workflow((*TWO_RECURSIVE.steps, Step("critic", "Check the first answer.", (0,))))
    writer(PlanReady(three, 0.0, "trace", at=T0 + 100))
    writer(StepStarted(0, "local", "List the facts in the question.", HELLO, at=T0 + 100))
    writer(StepFinished(0, "local", "7 has no divisors.", 10, 8, 0.5, at=T0 + 100))
    writer(RunFailed("boom", at=T0 + 101))
    last = load_trace(writer.path)
    assert last["status"] == "failed" and last["error"] == "boom"
    assert [s["status"] for s in last["steps"]] == ["done", "pending", "pending"]
    assert "nested" not in last["steps"][1]  # the new plan's steps start afresh


def test_resuming_a_trace_with_a_damaged_event_is_a_trace_error(tmp_path: Path) -> None:
    record = load_trace(GOLDEN / "retried.json")
    record["events"][3]["index"] = "zero"
    with pytest.raises(TraceError, match="a recorded event is damaged"):
        resumed_state(record)
