"""Rounds (issue 20) without a model: the conductor reads its team's answer, then keeps it or
writes a corrective workflow. The run is built as api.execute builds it, on a fake runtime
(FakeRuntime: scripted conductor and worker, for fault injection); the real model's part is in
tests/test_rounds.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from conductor_cli.api import NO_TRACE, RunOptions, RunResult, TraceOptions, _Run
from conductor_cli.backends.base import Backend, Request
from conductor_cli.config.settings import ConductorSettings, Config, WorkerConfig
from conductor_cli.run.budget import Budget, Pricing
from conductor_cli.run.events import RoundEvent, event_from_dict, event_to_dict
from conductor_cli.run.pool import Pool
from conductor_cli.run.state import RunState
from conductor_cli.runtime import RunScope
from conductor_cli.storage.cache import CachedBackend, CacheMode
from conductor_cli.testing.fake_backend import FakeBackend, fake_worker, user_text

QUESTION = "What is 17 times 3?"
ONE_STEP = json.dumps({"steps": [{"worker": "w", "task": "Compute the product.", "sees": []}]})
FIX = json.dumps(
    {"steps": [{"worker": "w", "task": "Check the earlier answer and fix it.", "sees": []}]}
)
KEEP = '{"steps": []}'


def conductor_script(replans: Sequence[str]) -> Callable[[Request], str]:
    """Round 1's plan, then the re-plans in order (the last repeats)."""
    seen: list[int] = []

    def reply(request: Request) -> str:
        if len(request.messages) == 2:
            return ONE_STEP
        seen.append(1)
        return replans[min(len(seen), len(replans)) - 1]

    return reply


@dataclass
class FakeRuntime:
    """What a run takes from its Runtime (scope, pool, conductor, chooser), over fake backends
    (fault injection): calls are counted and budgeted as Runtime wraps them, never cached."""

    model: FakeBackend  # the conductor's
    worker: FakeBackend

    def scope(self, mode: CacheMode, budget: Budget | None) -> RunScope:
        return RunScope(CacheMode.OFF, budget)

    def _wrap(self, backend: Backend, label: str, scope: RunScope) -> Backend:
        return CachedBackend(
            backend,
            None,
            CacheMode.OFF,
            scope.counter,
            label=label,
            pricing=Pricing("fake", local=True),
            budget=scope.budget,
        )

    def pool(self, scope: RunScope, config: Config) -> Pool:
        return Pool((fake_worker("w", self._wrap(self.worker, "worker w", scope)),))

    def conductor(self, scope: RunScope, config: Config) -> Backend:
        return self._wrap(self.model, "conductor", scope)

    def chooser(self, config: Config) -> None:
        return None

    def pull_missing(self, config: Config, *, conductor: bool = True) -> list[str]:
        return []


def run(
    replans: Sequence[str],
    worker_reply: str | Callable[[Request], str] = "51",
    *,
    rounds: int = 3,
    max_calls: int | None = None,
    trace: TraceOptions = NO_TRACE,
) -> tuple[RunResult, list[Any], FakeRuntime]:
    fake = FakeRuntime(FakeBackend(reply=conductor_script(replans)), FakeBackend(worker_reply))
    config = Config(
        conductor=ConductorSettings(max_steps=2, max_rounds=rounds),
        workers=(WorkerConfig("w", "fake:w"),),
    )
    events: list[Any] = []
    root: Any = fake
    result = _Run(root, config, RunOptions(max_calls=max_calls), trace, events.append).compose(
        QUESTION, (), None, {}, "model"
    )
    return result, events, fake


def fold(events: list[Any]) -> RunState:
    state = RunState()
    for e in events:
        state.apply(e)
    return state


def test_one_round_never_asks_the_conductor_again() -> None:
    result, events, fake = run([KEEP], rounds=1)
    assert fake.model.calls == 1 and fake.worker.calls == 1
    assert result.rounds == () and result.totals()["rounds"] == 1
    assert not any(isinstance(e, RoundEvent) for e in events)


def test_the_conductor_keeps_the_answer_with_an_empty_workflow() -> None:
    result, events, fake = run([KEEP])
    assert result.answer == "51"
    assert [r.decision for r in result.rounds] == ["kept"]
    assert fake.model.calls == 2 and fake.worker.calls == 1  # stopped itself after round 2
    # The re-plan read round 1's workflow and the team's answer.
    replan = fake.model.requests[1]
    assert replan.messages[2] == {"role": "assistant", "content": ONE_STEP}
    assert "51" in replan.messages[3]["content"] and KEEP in replan.messages[3]["content"]
    state = fold(events)
    assert state.answer == "51" and len(state.rounds) == 1 and state.rounds[0].kept


def test_a_corrective_round_sees_the_earlier_answer_and_replaces_it() -> None:
    def worker(request: Request) -> str:
        text = user_text(request)
        return "51" if "answer of round 1" in text else "50"

    result, events, fake = run([FIX, KEEP], worker)
    assert result.answer == "51"
    assert [r.decision for r in result.rounds] == ["corrected", "kept"]
    # Round 2's step was given round 1's answer ("50") to check.
    second = fake.worker.requests[1]
    assert any("50" in m["content"] for m in second.messages)
    assert fake.model.calls == 3  # round 3 read "51" and kept it
    assert result.totals()["rounds"] == 3
    state = fold(events)
    assert [r.kept for r in state.rounds] == [False, True]
    assert state.rounds[0].answer == "51" and state.answer == "51"


def test_a_replan_invalid_twice_keeps_the_answer_with_a_note() -> None:
    result, events, fake = run(["no idea", "still no idea"])
    assert result.answer == "51" and fake.model.calls == 3  # plan, re-plan, its retry
    assert [r.decision for r in result.rounds] == ["failed"]
    assert len(result.notes) == 1 and "round 2" in result.notes[0]
    assert "answer of round 1 stands" in result.notes[0]
    assert fold(events).rounds[0].status == "failed"


def test_the_budget_caps_all_rounds_and_the_best_answer_so_far_stands() -> None:
    # Calls: plan 1, step 2, re-plan 3, corrective step 4 would cross --max-calls 3.
    result, _, fake = run([FIX], max_calls=3)
    assert result.answer == "51" and fake.worker.calls == 1
    assert [r.decision for r in result.rounds] == ["failed"]
    assert "--max-calls 3" in result.notes[0]


def test_rounds_round_trip_through_the_trace(tmp_path: Any) -> None:
    from conductor_cli.storage.trace import load_trace

    def worker(request: Request) -> str:
        return "51" if "answer of round 1" in user_text(request) else "50"

    result, _, _ = run([FIX, KEEP], worker, trace=TraceOptions(directory=tmp_path))
    assert result.trace_path is not None
    record = load_trace(result.trace_path)
    assert record["status"] == "done" and record["answer"] == "51"
    assert [r["decision"] for r in record["rounds"]] == ["corrected", "kept"]
    assert record["rounds"][0]["steps"][0]["output"] == "51"
    assert record["steps"][0]["output"] == "50"  # round 1 as it was
    # Every recorded event reads back (replay and traces show use this).
    again = [event_from_dict(e) for e in record["events"]]
    assert fold(again).rounds[1].kept
    assert [event_to_dict(e) for e in again] == record["events"]


def test_an_empty_workflow_is_only_valid_in_a_later_round() -> None:
    from conductor_cli.errors import WorkflowError
    from conductor_cli.run.workflow import gbnf_grammar, parse_workflow

    assert parse_workflow(KEEP, ["w"], 2, allow_empty=True).steps == ()
    with pytest.raises(WorkflowError, match="no steps"):
        parse_workflow(KEEP, ["w"], 2)
    assert '"]}"' in gbnf_grammar(["w"], 2, allow_empty=True)
    assert "( step0" in gbnf_grammar(["w"], 2, allow_empty=True)
    assert "( step0" not in gbnf_grammar(["w"], 2)


def test_each_round_shows_as_a_subtree_and_a_plain_line() -> None:
    import io

    from rich.console import Console

    from conductor_cli.cli.view import PlainProgress, build_tree

    def worker(request: Request) -> str:
        return "51" if "answer of round 1" in user_text(request) else "50"

    _, events, _ = run([FIX, KEEP], worker)
    console = Console(record=True, width=100, color_system=None)
    console.print(build_tree(fold(events)))
    text = console.export_text()
    assert "round 1" in text and "round 2  corrective workflow" in text
    assert "round 3  kept the answer" in text
    assert text.index("round 2") < text.index("round 3")
    out = io.StringIO()
    progress = PlainProgress(out)
    for e in events:
        progress(e)
    lines = out.getvalue().splitlines()
    assert "round 3: conductor: kept the answer" in lines
    assert any(line.startswith("round 2: step 0 w: done") for line in lines)


def test_eval_spells_rounds_on_conductor_strategies() -> None:
    from conductor_cli.errors import InputError
    from conductor_cli.evals.strategies import (
        base_strategies,
        conductor_config,
        parse_strategies,
        strategy_kind,
    )

    config = Config(workers=(WorkerConfig("w", "fake:w"),))
    chosen = parse_strategies("conductor,conductor@rounds=3,single:w", config)
    assert chosen == ["conductor", "conductor@rounds=3", "single:w"]
    assert [strategy_kind(s) for s in chosen] == ["conductor", "conductor", "single"]
    assert conductor_config(config, "conductor@rounds=3").conductor.max_rounds == 3
    assert conductor_config(config, "conductor").conductor.max_rounds == 1
    assert base_strategies(chosen, config) == chosen
    for bad, words in [
        ("conductor@rounds=9", "1 to 4 rounds"),
        ("conductor@depth=2", "@rounds=N"),
        ("single:w@rounds=2", "only conductor strategies"),
    ]:
        with pytest.raises(InputError, match=words):
            parse_strategies(bad, config)


FIX2 = json.dumps(
    {
        "steps": [
            {"worker": "w", "task": "Check the earlier answer.", "sees": []},
            {"worker": "w", "task": "Give the final answer.", "sees": [0]},
        ]
    }
)


def checker(request: Request) -> str:
    return "51" if "answer of round 1" in user_text(request) else "50"


def test_replay_live_runs_every_recorded_round_again_without_re_planning(tmp_path: Any) -> None:
    from conductor_cli.replay import rerun
    from conductor_cli.storage.trace import load_trace

    first, _, _ = run([FIX, KEEP], checker, trace=TraceOptions(directory=tmp_path))
    assert first.trace_path is not None
    record = load_trace(first.trace_path)
    assert record["conductor"]["max_rounds"] == 3

    def no_plan(request: Request) -> str:
        raise AssertionError("a replay never asks the conductor")

    fake = FakeRuntime(FakeBackend(reply=no_plan), FakeBackend(checker))
    config = Config(workers=(WorkerConfig("w", "fake:w"),))  # max_rounds 1: the trace decides
    root: Any = fake
    again = rerun(record, config=config, live=True, runtime=root)
    assert fake.model.calls == 0 and fake.worker.calls == 2  # round 1's step, round 2's step
    assert [r.decision for r in again.rounds] == ["corrected", "kept"]
    assert again.answer == "51" and again.steps[0].output == "50"
    assert any("50" in m["content"] for m in fake.worker.requests[1].messages)
    replayed = load_trace(again.trace_path) if again.trace_path else {}
    assert [r["decision"] for r in replayed["rounds"]] == ["corrected", "kept"]
    assert replayed["replay_of"] == record["id"]


def test_resume_keeps_every_finished_round_and_step_and_goes_on(tmp_path: Any) -> None:
    import threading
    import time

    from conductor_cli.errors import RunCancelled
    from conductor_cli.replay import rerun
    from conductor_cli.storage.trace import load_trace

    cancel = threading.Event()

    def interrupted_in_round_2(request: Request) -> str:
        text = user_text(request)
        if "answer of round 1" not in text:
            return "50"
        if "Give the final answer" in text:
            cancel.set()  # Ctrl-C while round 2's second step runs
            time.sleep(1.0)
        return "51"

    fake = FakeRuntime(
        FakeBackend(reply=conductor_script([FIX2])), FakeBackend(interrupted_in_round_2)
    )
    config = Config(
        conductor=ConductorSettings(max_steps=2, max_rounds=3),
        workers=(WorkerConfig("w", "fake:w"),),
    )
    root: Any = fake
    with pytest.raises(RunCancelled):
        _Run(
            root, config, RunOptions(cancel=cancel), TraceOptions(directory=tmp_path), None
        ).compose(QUESTION, (), None, {}, "model")
    (path,) = tmp_path.glob("*.json")
    record = load_trace(path)
    assert record["status"] == "interrupted"
    assert record["steps"][0]["output"] == "50"
    assert [s["status"] for s in record["rounds"][0]["steps"]] == ["done", "interrupted"]

    # Resume: round 1 and round 2's first step are kept; round 2's second step runs, then
    # round 3 (within the recorded max_rounds 3) re-plans and keeps the answer.
    later = FakeRuntime(FakeBackend(reply=conductor_script([KEEP])), FakeBackend("51"))
    root = later
    plain = Config(workers=(WorkerConfig("w", "fake:w"),))
    result = rerun(record, config=plain, resume=True, runtime=root)
    assert later.worker.calls == 1 and later.model.calls == 1
    assert "Give the final answer" in user_text(later.worker.requests[0])
    assert [r.decision for r in result.rounds] == ["corrected", "kept"]
    assert result.answer == "51"
    done = load_trace(path)  # the same file, finished
    assert done["status"] == "done" and done["answer"] == "51"
    assert done["steps"][0]["output"] == "50"
    assert [r["decision"] for r in done["rounds"]] == ["corrected", "kept"]
    assert [s["status"] for s in done["rounds"][0]["steps"]] == ["done", "done"]


def test_a_steps_late_trace_write_never_overwrites_the_interrupted_ending(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI's kill test once left a trace "running" after a SIGTERM: the step's thread was still
    writing StepFinished when the main thread, interrupted, wrote the ending; the step's older
    text landed last. Every event of a run now reaches the trace one at a time."""
    import threading
    import time

    from conductor_cli.errors import RunCancelled
    from conductor_cli.storage import trace
    from conductor_cli.storage.trace import load_trace

    cancel = threading.Event()
    real_write = trace.atomic_write

    def slow_atomic_write_fake(path: Any, data: bytes, mode: int = 0o600) -> None:
        # Fault injection: the write of StepFinished is slow, and Ctrl-C comes during it.
        events = json.loads(data)["events"]
        if events[-1]["type"] == "StepFinished" and not cancel.is_set():
            cancel.set()
            time.sleep(0.5)
        real_write(path, data, mode)

    monkeypatch.setattr(trace, "atomic_write", slow_atomic_write_fake)
    fake = FakeRuntime(FakeBackend(reply=conductor_script([KEEP])), FakeBackend("51"))
    config = Config(workers=(WorkerConfig("w", "fake:w"),))
    root: Any = fake
    with pytest.raises(RunCancelled):
        _Run(
            root, config, RunOptions(cancel=cancel), TraceOptions(directory=tmp_path), None
        ).compose(QUESTION, (), None, {}, "model")
    time.sleep(0.7)  # the step's thread has finished its write by now
    (path,) = tmp_path.glob("*.json")
    record = load_trace(path)
    assert record["status"] == "interrupted"
    assert [e["type"] for e in record["events"]][-2:] == ["StepFinished", "RunFailed"]


def test_ctrl_c_during_the_write_of_done_still_ends_the_trace_interrupted(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conductor_cli.storage import trace
    from conductor_cli.storage.trace import load_trace

    real_write = trace.atomic_write
    hit: list[bool] = []

    def interrupted_atomic_write_fake(path: Any, data: bytes, mode: int = 0o600) -> None:
        # Fault injection: Ctrl-C lands while "done" is being written (the file keeps "running").
        if json.loads(data)["events"][-1]["type"] == "RunFinished" and not hit:
            hit.append(True)
            raise KeyboardInterrupt
        real_write(path, data, mode)

    monkeypatch.setattr(trace, "atomic_write", interrupted_atomic_write_fake)
    fake = FakeRuntime(FakeBackend(reply=conductor_script([KEEP])), FakeBackend("51"))
    root: Any = fake
    with pytest.raises(KeyboardInterrupt):
        _Run(
            root,
            Config(workers=(WorkerConfig("w", "fake:w"),)),
            RunOptions(),
            TraceOptions(directory=tmp_path),
            None,
        ).compose(QUESTION, (), None, {}, "model")
    (path,) = tmp_path.glob("*.json")
    assert hit and load_trace(path)["status"] == "interrupted"
