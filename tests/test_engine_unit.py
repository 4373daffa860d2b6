"""The engine alone, its workers FakeBackends: scheduling, access lists, retries, fallbacks,
events, streaming and the budget stop, in milliseconds rather than through a model or HTTP."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from conductor_cli.errors import BudgetError, WorkerError
from conductor_cli.run.budget import Budget
from conductor_cli.run.engine import Engine, StepResult
from conductor_cli.run.events import (
    RunStarted,
    StepFailed,
    StepFinished,
    StepRetry,
    StepSkipped,
    StepStarted,
    StepToken,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.pool import Pool, Worker
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.storage.cache import CachedBackend, CacheMode, CallCounter
from conductor_cli.testing.fake_backend import (
    FakeBackend,
    by_task,
    conversation,
    fake_worker,
    permanent,
    seen_steps,
    task_of,
    transient,
    user_text,
    wait_at,
)

QUESTION = "What is the airspeed of an unladen swallow?"
# Long enough for a serial run to show as a broken barrier, short enough to fail fast.
BARRIER_S = 5.0


class Recorder:
    """A subscriber that keeps every event, and a fake sleep that keeps every delay."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.sleeps: list[float] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def of(self, kind: type, index: int | None = None) -> list[Any]:
        return [
            e
            for e in self.events
            if isinstance(e, kind) and (index is None or getattr(e, "index", None) == index)
        ]


def engine(workers: Sequence[Worker], rec: Recorder, **options: Any) -> Engine:
    """Built as api.execute builds it, with a recording subscriber and no real sleeping."""
    return Engine(Pool(tuple(workers)), rec, sleep=rec.sleep, rng=random.Random(0), **options)


def flow(*steps: tuple[str, str, tuple[int, ...]]) -> Workflow:
    return Workflow(tuple(Step(w, t, s) for w, t, s in steps))


# ---------------------------------------------------------------------------- scheduling


def test_independent_steps_run_at_the_same_time() -> None:
    # Each call waits until all three are in flight: run one after another, the first call
    # would wait alone and break the barrier.
    barrier = threading.Barrier(3, timeout=BARRIER_S)
    fake = FakeBackend(
        reply=by_task({"A1": "one", "A2": "two", "A3": "three"}), on_call=wait_at(barrier)
    )
    rec = Recorder()
    wf = flow(("w", "A1", ()), ("w", "A2", ()), ("w", "A3", ()))
    results = engine([fake_worker("w", fake, max_concurrency=3)], rec).run_steps(QUESTION, wf, ())
    assert [r.output for r in results] == ["one", "two", "three"]
    assert fake.peak_in_flight == 3


def test_max_concurrency_one_runs_a_workers_steps_one_at_a_time() -> None:
    fake = FakeBackend(delay=0.05)
    rec = Recorder()
    wf = flow(("w", "A1", ()), ("w", "A2", ()), ("w", "A3", ()))
    engine([fake_worker("w", fake, max_concurrency=1)], rec).run_steps(QUESTION, wf, ())
    assert fake.calls == 3
    assert fake.peak_in_flight == 1
    # Strictly alternating: each call ends before the next begins.
    assert [kind for kind, _ in fake.log] == ["start", "end"] * 3


def test_workers_have_separate_concurrency_limits() -> None:
    # Worker a allows one call at a time; b's step must not queue behind a's.
    barrier = threading.Barrier(2, timeout=BARRIER_S)
    a = FakeBackend(reply="from a", on_call=wait_at(barrier))
    b = FakeBackend(reply="from b", on_call=wait_at(barrier))
    rec = Recorder()
    wf = flow(("a", "A1", ()), ("b", "B1", ()))
    workers = [fake_worker("a", a, max_concurrency=1), fake_worker("b", b, max_concurrency=1)]
    results = engine(workers, rec).run_steps(QUESTION, wf, ())
    assert [r.output for r in results] == ["from a", "from b"]


def test_a_step_starts_only_after_every_step_it_sees_has_finished() -> None:
    fake = FakeBackend(reply=by_task({"slow": "S", "fast": "F", "join": "J"}))
    release = threading.Event()

    def on_call(request: Any) -> None:
        if task_of(request) == "slow":
            release.wait(BARRIER_S)
        elif task_of(request) == "fast":
            release.set()

    fake.on_call = on_call
    rec = Recorder()
    wf = flow(("w", "slow", ()), ("w", "fast", ()), ("w", "join", (0, 1)))
    results = engine([fake_worker("w", fake)], rec).run_steps(QUESTION, wf, ())
    log = fake.log
    join_start = log.index(("start", "join"))
    assert join_start > log.index(("end", "slow"))
    assert join_start > log.index(("end", "fast"))
    assert results[2].output == "J"


def test_results_keep_the_workflows_order_and_the_last_output_is_the_answer() -> None:
    # Step 0 finishes last, yet comes first in the results.
    first_done = threading.Event()

    def on_call(request: Any) -> None:
        if task_of(request) == "late":
            first_done.wait(BARRIER_S)
        else:
            first_done.set()

    fake = FakeBackend(reply=by_task({"late": "L", "early": "E"}), on_call=on_call)
    rec = Recorder()
    wf = flow(("w", "late", ()), ("w", "early", ()))
    results = engine([fake_worker("w", fake)], rec).run_steps(QUESTION, wf, ())
    assert fake.log.index(("end", "early")) < fake.log.index(("end", "late"))
    assert [(r.index, r.output) for r in results] == [(0, "L"), (1, "E")]
    assert [e.index for e in rec.of(StepFinished)] == [1, 0]


# ---------------------------------------------------------------------------- access lists


def test_each_step_reads_exactly_the_outputs_its_access_list_names() -> None:
    outputs = {"t0": "OUT-ZERO", "t1": "OUT-ONE", "t2": "OUT-TWO", "t3": "OUT-THREE"}
    # Step 0 ends after step 1 has finished, so when step 2 starts every output it must not
    # see exists already: a filter that passed on all finished outputs would leak OUT-ONE.
    one_done = threading.Event()
    rec = Recorder()

    def subscriber(event: Any) -> None:
        rec(event)
        if isinstance(event, StepFinished) and event.index == 1:
            one_done.set()

    def on_call(request: Any) -> None:
        if task_of(request) == "t0":
            one_done.wait(BARRIER_S)

    fake = FakeBackend(reply=by_task(outputs), on_call=on_call)
    # Steps 2 and 3 by another worker: none continues its own conversation (the next test).
    wf = flow(("w", "t0", ()), ("w", "t1", ()), ("v", "t2", (0,)), ("v", "t3", (1, 2)))
    eng = Engine(Pool((fake_worker("w", fake), fake_worker("v", fake))), subscriber)
    results = eng.run_steps(QUESTION, wf, ())
    assert fake.log.index(("end", "t1")) < fake.log.index(("end", "t0"))
    prompts = {task_of(r): conversation(r) for r in fake.requests}
    seen = {task_of(r): seen_steps(r) for r in fake.requests}
    assert seen == {"t0": (), "t1": (), "t2": (0,), "t3": (1, 2)}
    for task, expected in {"t2": {"t0"}, "t3": {"t1", "t2"}}.items():
        for other, text in outputs.items():
            assert (text in prompts[task]) == (other in expected), (task, other)
    assert "OUT" not in prompts["t0"] + prompts["t1"]
    # A seen step comes as an earlier exchange: its worker and task, then its output.
    step2 = next(r for r in fake.requests if task_of(r) == "t2")
    assert step2.messages[:2] == (
        {"role": "user", "content": "Step 0 (w): t0"},
        {"role": "assistant", "content": "OUT-ZERO"},
    )
    # The StepResult and StepStarted events carry the same messages the model got.
    by_index = {e.index: e.messages for e in rec.of(StepStarted)}
    for r in results:
        request = next(q for q in fake.requests if task_of(q) == r.task)
        assert r.messages == request.messages == by_index[r.index]
        assert r.sees == wf.steps[r.index].sees


def test_a_step_whose_first_seen_step_is_its_own_workers_continues_that_conversation() -> None:
    a, b = FakeBackend(), FakeBackend()
    workers = [fake_worker("alice", a), fake_worker("bob", b)]
    wf = flow(("alice", "Draft it", ()), ("bob", "Test it", ()), ("alice", "Fix it", (0, 1)))
    results = engine(workers, Recorder()).run_steps(QUESTION, wf, ())
    first, third = a.requests
    assert third.messages == (
        *first.messages,  # what alice was asked, then what she answered
        {"role": "assistant", "content": results[0].output},
        {"role": "user", "content": "Step 1 (bob): Test it"},
        {"role": "assistant", "content": results[1].output},
        {"role": "user", "content": f"{QUESTION}\n\nFix it"},
    )
    # Seen second, her own step is named by its task as before.
    wf = flow(("alice", "Draft it", ()), ("bob", "Test it", ()), ("alice", "Fix it", (1, 0)))
    engine(workers, Recorder()).run_steps(QUESTION, wf, ())
    assert a.requests[-1].messages[0] == {"role": "user", "content": "Step 1 (bob): Test it"}
    assert a.requests[-1].messages[2] == {"role": "user", "content": "Step 0 (alice): Draft it"}
    # The code pipeline's repair keeps the layout it was measured with.
    from conductor_cli.tools.examples import REPAIR

    wf = flow(("alice", "Draft it", ()), ("bob", "Test it", ()), ("alice", REPAIR, (0, 1)))
    engine(workers, Recorder()).run_steps(QUESTION, wf, ())
    assert a.requests[-1].messages[0] == {"role": "user", "content": "Step 0 (alice): Draft it"}


def test_every_prompt_holds_the_question_then_the_task_and_no_persona() -> None:
    a, b = FakeBackend(), FakeBackend()
    rec = Recorder()
    workers = [
        fake_worker("alice", a, description="checks proofs"),
        fake_worker("bob", b, description="writes code"),
    ]
    wf = flow(("alice", "Prove it", ()), ("bob", "Code it", (0,)))
    engine(workers, rec).run_steps(QUESTION, wf, ())
    (first,) = a.requests
    assert first.messages == ({"role": "user", "content": f"{QUESTION}\n\nProve it"},)
    (second,) = b.requests
    assert second.messages == (
        {"role": "user", "content": "Step 0 (alice): Prove it"},
        {"role": "assistant", "content": "fake answer"},
        {"role": "user", "content": f"{QUESTION}\n\nCode it"},
    )
    # Small models answer worse under a team persona (issue 32): no system message at all.
    assert all(m["role"] != "system" for r in (first, second) for m in r.messages)


def test_a_task_that_only_restates_the_question_sends_the_question_itself() -> None:
    fake = FakeBackend()
    question = "What is the capital of France?"
    wf = flow(
        ("w", "Find the capital of France.", ()),
        ("w", "Translate the answer into German.", ()),
        ("w", "Answer the question.", (0,)),
    )
    engine([fake_worker("w", fake)], Recorder()).run_steps(question, wf, ())
    by_task = {r.messages[-1]["content"]: r for r in fake.requests}
    assert question in by_task  # the first step: the question, alone, as the user asked it
    assert f"{question}\n\nTranslate the answer into German." in by_task
    # A step that reads earlier output keeps its task, which says what to do with it.
    assert f"{question}\n\nAnswer the question." in by_task


def test_requests_carry_the_workers_settings_and_a_seed_per_step() -> None:
    fake = FakeBackend()
    rec = Recorder()
    worker = fake_worker("w", fake, max_tokens=77, temperature=0.9)
    wf = flow(("w", "t0", ()), ("w", "t1", (0,)))
    engine([worker], rec, seed=40).run_steps(QUESTION, wf, ())
    assert [(r.max_tokens, r.temperature, r.grammar) for r in fake.requests] == [
        (77, 0.9, None),
        (77, 0.9, None),
    ]
    # Seeds differ per step, so two steps on one model do not sample alike.
    assert sorted(r.seed for r in fake.requests) == [41, 42]


def test_attachments_are_cut_to_a_small_workers_context() -> None:
    big, small = FakeBackend(), FakeBackend()
    rec = Recorder()
    text = "x" * 20_000
    workers = [
        fake_worker("big", big),
        fake_worker("small", small, context_tokens=4_000, max_tokens=100),
    ]
    wf = flow(("big", "t0", ()), ("small", "t1", ()))
    engine(workers, rec).run_steps(QUESTION, wf, [Attachment("notes.txt", text)])
    assert text in user_text(big.requests[0])
    small_prompt = user_text(small.requests[0])
    assert "Attached notes.txt" in small_prompt
    assert text not in small_prompt
    assert "conductor cut the remaining" in small_prompt


# ---------------------------------------------------------------------------- retries


def test_a_transient_failure_is_retried_with_growing_delays() -> None:
    fake = FakeBackend(reply="finally", failures=[transient("429 slow down"), transient()])
    rec = Recorder()
    results = engine([fake_worker("w", fake, retries=2)], rec).run_steps(
        QUESTION, flow(("w", "t0", ())), ()
    )
    assert results[0].output == "finally"
    assert fake.calls == 3
    retries = rec.of(StepRetry)
    assert [(e.attempt, e.fallback) for e in retries] == [(2, False), (3, False)]
    assert "429 slow down" in retries[0].error
    # Exponential backoff from 0.5 s with up to 25 % jitter; the engine sleeps what it says.
    assert rec.sleeps == pytest.approx([e.delay for e in retries], abs=1e-3)
    assert 0.5 <= rec.sleeps[0] <= 0.625
    assert 1.0 <= rec.sleeps[1] <= 1.25
    assert not rec.of(StepFailed)


def test_retries_give_up_after_the_configured_number_and_name_the_step() -> None:
    fake = FakeBackend(fail_all=transient("timed out"))
    ok = FakeBackend(reply="fine")
    rec = Recorder()
    workers = [fake_worker("flaky", fake, retries=1), fake_worker("ok", ok)]
    wf = flow(("ok", "t0", ()), ("flaky", "t1", ()))
    with pytest.raises(WorkerError) as caught:
        engine(workers, rec).run_steps(QUESTION, wf, ())
    assert fake.calls == 2  # one try and one retry
    assert str(caught.value).startswith("step 1 (flaky): ")
    assert "timed out" in str(caught.value)
    (failed,) = rec.of(StepFailed)
    assert (failed.index, failed.worker) == (1, "flaky")
    assert len(rec.of(StepRetry)) == 1


def test_a_permanent_failure_is_not_retried() -> None:
    fake = FakeBackend(fail_all=permanent("401 bad key"))
    rec = Recorder()
    with pytest.raises(WorkerError, match="401 bad key"):
        eng = engine([fake_worker("w", fake, retries=5)], rec)
        eng.run_steps(QUESTION, flow(("w", "t0", ())), ())
    assert fake.calls == 1
    assert rec.sleeps == []
    assert not rec.of(StepRetry)


# ---------------------------------------------------------------------------- fallbacks


def test_the_fallback_worker_takes_a_step_its_worker_could_not_do() -> None:
    primary = FakeBackend(fail_all=transient("down"))
    backup = FakeBackend(reply="backup answer")
    rec = Recorder()
    workers = [
        fake_worker(
            "primary", primary, retries=1, fallback="backup", context_tokens=4_000, max_tokens=100
        ),
        fake_worker("backup", backup, description="the spare"),
    ]
    text = "x" * 20_000
    attached = [Attachment("notes.txt", text)]
    results = engine(workers, rec).run_steps(QUESTION, flow(("primary", "t0", ())), attached)
    assert primary.calls == 2  # its retries are spent before the fallback steps in
    assert backup.calls == 1
    assert (results[0].worker, results[0].output) == ("backup", "backup answer")
    # The fallback gets a prompt written for it, not the failed worker's: its larger context
    # reads the attachment whole, where the primary's was cut.
    assert text not in user_text(primary.requests[0])
    assert text in user_text(backup.requests[0])
    assert results[0].messages == backup.requests[0].messages
    handover = [e for e in rec.of(StepRetry) if e.fallback]
    assert [(e.worker, e.attempt) for e in handover] == [("backup", 1)]
    assert not rec.of(StepFailed)


def test_a_failing_fallback_reports_both_errors() -> None:
    primary = FakeBackend(fail_all=permanent("quota gone"))
    backup = FakeBackend(fail_all=permanent("model not found"))
    rec = Recorder()
    workers = [
        fake_worker("primary", primary, fallback="backup"),
        fake_worker("backup", backup),
    ]
    with pytest.raises(WorkerError) as caught:
        engine(workers, rec).run_steps(QUESTION, flow(("primary", "t0", ())), ())
    message = str(caught.value)
    assert message.startswith("step 0 (primary): ")
    assert "quota gone" in message
    assert "fallback backup: model not found" in message
    (failed,) = rec.of(StepFailed)
    assert failed.worker == "backup"


def test_a_fallback_missing_from_the_pool_is_not_called() -> None:
    primary = FakeBackend(fail_all=permanent("nope"))
    rec = Recorder()
    workers = [fake_worker("primary", primary, fallback="ghost")]
    with pytest.raises(WorkerError, match=r"step 0 \(primary\): nope"):
        engine(workers, rec).run_steps(QUESTION, flow(("primary", "t0", ())), ())
    assert not rec.of(StepRetry)


# ---------------------------------------------------------------------------- failures


def test_a_failed_steps_dependents_are_skipped_and_independent_steps_still_run() -> None:
    bad = FakeBackend(fail_all=permanent("broken"))
    good = FakeBackend(reply=by_task({"t1": "fine", "t3": "also fine"}))
    rec = Recorder()
    workers = [fake_worker("bad", bad), fake_worker("good", good)]
    wf = flow(
        ("bad", "t0", ()),
        ("good", "t1", ()),
        ("good", "t2", (0,)),  # sees the failed step
        ("good", "t3", (1,)),
        ("good", "t4", (2,)),  # sees a skipped step
    )
    with pytest.raises(WorkerError) as caught:
        engine(workers, rec).run_steps(QUESTION, wf, ())
    assert sorted(task_of(r) for r in good.requests) == ["t1", "t3"]
    skipped = {e.index: e.reason for e in rec.of(StepSkipped)}
    assert skipped == {2: "step 0 did not finish", 4: "step 2 did not finish"}
    assert str(caught.value) == "step 0 (bad): broken (2 steps skipped)"


def test_the_first_failed_step_is_named_and_the_others_counted() -> None:
    fake = FakeBackend(fail_all=permanent("boom"))
    rec = Recorder()
    wf = flow(("w", "t0", ()), ("w", "t1", ()), ("w", "t2", ()))
    with pytest.raises(WorkerError) as caught:
        engine([fake_worker("w", fake)], rec).run_steps(QUESTION, wf, ())
    assert str(caught.value) == "step 0 (w): boom (2 more steps failed)"
    assert sorted(e.index for e in rec.of(StepFailed)) == [0, 1, 2]


# ---------------------------------------------------------------------------- budget


def test_the_budget_stops_before_the_call_that_would_cross_it() -> None:
    # The budget lives at the backend boundary (storage/cache.py), as runtime.Runtime wraps it.
    fake = FakeBackend(reply="paid")
    budget = Budget(max_calls=1)
    wrapped = CachedBackend(fake, None, CacheMode.OFF, CallCounter(), budget=budget)
    rec = Recorder()
    wf = flow(("w", "t0", ()), ("w", "t1", (0,)))
    with pytest.raises(BudgetError) as caught:
        engine([fake_worker("w", wrapped)], rec).run_steps(QUESTION, wf, ())
    assert fake.calls == 1
    assert str(caught.value).startswith("step 1 (w): ")
    assert "--max-calls 1" in str(caught.value)
    assert budget.calls == 1


def test_a_budget_stop_skips_every_step_not_yet_started() -> None:
    # Step 1 hits the budget while step 0 still runs; step 2, waiting on step 0, must not run
    # even though step 0 then succeeds. Step 0 is held until the skip is announced.
    skip_seen = threading.Event()
    rec = Recorder()

    def subscriber(event: Any) -> None:
        rec(event)
        if isinstance(event, StepSkipped):
            skip_seen.set()

    def on_call(request: Any) -> None:
        if task_of(request) == "t0":
            skip_seen.wait(BARRIER_S)

    slow = FakeBackend(reply="zero", on_call=on_call)
    broke = FakeBackend(fail_all=BudgetError("stopped before model call 2: --max-calls 1"))
    workers = [fake_worker("slow", slow), fake_worker("broke", broke)]
    wf = flow(("slow", "t0", ()), ("broke", "t1", ()), ("slow", "t2", (0,)))
    eng = Engine(Pool(tuple(workers)), subscriber, sleep=rec.sleep)
    with pytest.raises(BudgetError, match=r"step 1 \(broke\)"):
        eng.run_steps(QUESTION, wf, ())
    assert [task_of(r) for r in slow.requests] == ["t0"]
    assert {e.index: e.reason for e in rec.of(StepSkipped)} == {2: "the budget was reached"}
    assert [e.index for e in rec.of(StepFinished)] == [0]


# ---------------------------------------------------------------------------- events


def test_events_follow_the_run_in_order() -> None:
    fake = FakeBackend(reply=by_task({"t0": "zero", "t1": "one"}))
    rec = Recorder()
    wf = flow(("w", "t0", ()), ("w", "t1", (0,)))
    engine([fake_worker("w", fake)], rec).run_steps(QUESTION, wf, ())
    summary = [(type(e).__name__, e.index) for e in rec.events]
    assert summary == [
        ("StepStarted", 0),
        ("StepFinished", 0),
        ("StepStarted", 1),
        ("StepFinished", 1),
    ]
    finished = rec.of(StepFinished)
    assert [(e.worker, e.output, e.source) for e in finished] == [
        ("w", "zero", "model"),
        ("w", "one", "model"),
    ]
    # Token counts are the backend's, passed through.
    assert finished[1].tokens_out == 1
    assert finished[1].tokens_in == sum(
        len(m["content"].split()) for m in fake.requests[1].messages
    )
    assert not any(isinstance(e, RunStarted) for e in rec.events)  # api.execute sends that


def test_a_cached_answer_is_reported_as_from_the_cache() -> None:
    fake = FakeBackend(reply="old", cached=True)
    rec = Recorder()
    results = engine([fake_worker("w", fake)], rec).run_steps(QUESTION, flow(("w", "t0", ())), ())
    assert results[0].source == "cache"
    assert rec.of(StepFinished)[0].source == "cache"


def test_streaming_sends_the_output_piece_by_piece_before_the_step_finishes() -> None:
    text = "The swallow flies at eleven metres a second"
    fake = FakeBackend(reply=text)
    rec = Recorder()
    eng = engine([fake_worker("w", fake)], rec, stream=True)
    eng.run_steps(QUESTION, flow(("w", "t0", ())), ())
    tokens = rec.of(StepToken)
    assert len(tokens) > 1
    assert "".join(e.text for e in tokens) == text
    assert all(e.index == 0 for e in tokens)
    kinds = [type(e) for e in rec.events]
    assert kinds.index(StepFinished) > max(i for i, k in enumerate(kinds) if k is StepToken)


def test_without_streaming_the_backend_gets_no_text_sink() -> None:
    fake = FakeBackend(reply="a b c")
    rec = Recorder()
    engine([fake_worker("w", fake)], rec).run_steps(QUESTION, flow(("w", "t0", ())), ())
    assert fake.streamed == [False]
    assert not rec.of(StepToken)


def test_subscribers_see_one_event_at_a_time() -> None:
    # Four steps finish together; a subscriber that is not thread-safe must still see every
    # event whole, because the engine hands them over under a lock.
    barrier = threading.Barrier(4, timeout=BARRIER_S)
    fake = FakeBackend(on_call=wait_at(barrier))
    inside = threading.Lock()
    overlaps: list[Any] = []

    def subscriber(event: Any) -> None:
        if not inside.acquire(blocking=False):
            overlaps.append(event)
            return
        try:
            threading.Event().wait(0.01)  # long enough for another thread to arrive
        finally:
            inside.release()

    wf = flow(*[("w", f"t{i}", ()) for i in range(4)])
    workers = [fake_worker("w", fake, max_concurrency=4)]
    Engine(Pool(tuple(workers)), subscriber).run_steps(QUESTION, wf, ())
    assert overlaps == []


# ---------------------------------------------------------------------------- resume, recursion


def test_kept_results_are_not_run_again_and_feed_their_dependents() -> None:
    fake = FakeBackend(reply="new")
    rec = Recorder()
    wf = flow(("w", "t0", ()), ("w", "t1", (0,)))
    kept = StepResult(0, "w", "t0", (), (), "KEPT-OUTPUT", 3, 4, 0.1, "trace")
    results = engine([fake_worker("w", fake)], rec).run_steps(QUESTION, wf, (), {0: kept})
    assert [task_of(r) for r in fake.requests] == ["t1"]
    assert "KEPT-OUTPUT" in conversation(fake.requests[0])
    assert results[0] is kept
    assert [(e.index, e.source) for e in rec.of(StepFinished)] == [(0, "trace"), (1, "model")]


def test_a_stopped_budget_lets_no_call_through_and_counts_those_made() -> None:
    # A training that ends (Ctrl-C) records its calls while a rollout thread may be about to
    # call: after stop(), that call is refused, so the record counts every call made.
    budget = Budget(max_calls=10)
    budget.reserve("w0", None)
    budget.reserve("w1", None)
    assert budget.stop() == 2
    with pytest.raises(BudgetError, match="ending"):
        budget.reserve("w0", None)
    assert budget.calls == 2
