"""The response cache, traces, replay and `conductor run`, on the real default model."""

from __future__ import annotations

import json
import signal
import stat
import threading
import time
from pathlib import Path

import pytest

from conductor_cli.api import TraceOptions, execute
from conductor_cli.backends.base import Completion, Request
from conductor_cli.config.settings import load_config
from conductor_cli.errors import BudgetError, is_interrupt
from conductor_cli.replay import play
from conductor_cli.run.budget import Budget
from conductor_cli.run.events import (
    PlanReady,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFailed,
    StepFinished,
    StepStarted,
)
from conductor_cli.run.workflow import parse_workflow
from conductor_cli.storage import trace as trace_module
from conductor_cli.storage.cache import (
    CachedBackend,
    CacheMode,
    CallCounter,
    ResponseCache,
    request_key,
)
from conductor_cli.storage.trace import TraceWriter, load_trace, redact_text

from .conftest import FAST_CONFIG, assert_one_line_error, run_cli, start_cli

SLOW_WORKFLOW = {
    "steps": [
        {"worker": "local", "task": "Write a long story about a lighthouse keeper.", "sees": []},
        {"worker": "local", "task": "Continue the story with many new details.", "sees": [0]},
        {"worker": "local", "task": "Write the ending of the story in full.", "sees": [0, 1]},
    ]
}


def traces_dir(home: Path) -> Path:
    return home / "data" / "conductor" / "traces"


def ask_json(config: Path, *args: str, input: str = "") -> dict:
    proc = run_cli("ask", "--config", str(config), "--json", *args, input=input)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_warm_cache_rerun_makes_no_model_call(
    fast_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `cache clear` below also removes the state folder's converted training bases: a folder
    # of this test's own, not the one the suite's workers share.
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(tmp_path / "state"))
    first = ask_json(fast_config, "Name a primary colour.")
    assert first["totals"]["model_calls"] == 1 + len(first["steps"])
    assert first["totals"]["cache_hits"] == 0
    again = ask_json(fast_config, "Name a primary colour.")
    assert again["totals"]["model_calls"] == 0
    assert again["totals"]["cache_hits"] == 1 + len(first["steps"])
    assert again["workflow"] == first["workflow"] and again["answer"] == first["answer"]
    assert all(s["source"] == "cache" for s in again["steps"])
    # --refresh calls every model again; --no-cache neither reads nor writes.
    refreshed = ask_json(fast_config, "--refresh", "Name a primary colour.")
    assert refreshed["totals"]["model_calls"] == 1 + len(refreshed["steps"])
    uncached = ask_json(fast_config, "--no-cache", "Name a secondary colour.")
    assert uncached["totals"]["model_calls"] >= 2
    assert ask_json(fast_config, "Name a secondary colour.")["totals"]["cache_hits"] == 0
    stats = json.loads(run_cli("cache", "stats", "--json").stdout)
    assert stats["entries"] >= 2 * (1 + len(first["steps"]))
    assert stat.S_IMODE(Path(stats["path"]).stat().st_mode) == 0o700
    assert "removed" in run_cli("cache", "clear").stdout
    assert json.loads(run_cli("cache", "stats", "--json").stdout)["entries"] == 0


def test_request_key_covers_every_input() -> None:
    base = Request(({"role": "user", "content": "hi"},), max_tokens=10, temperature=0.2, seed=1)
    key = request_key("gguf-sha256:abc", base)
    assert key == request_key("gguf-sha256:abc", Request(base.messages, 10, 0.2, 1))
    variants = [
        request_key("gguf-sha256:abd", base),
        request_key("gguf-sha256:abc", Request(({"role": "user", "content": "hi!"},), 10, 0.2, 1)),
        request_key("gguf-sha256:abc", Request(base.messages, 11, 0.2, 1)),
        request_key("gguf-sha256:abc", Request(base.messages, 10, 0.3, 1)),
        request_key("gguf-sha256:abc", Request(base.messages, 10, 0.2, 2)),
        request_key("gguf-sha256:abc", Request(base.messages, 10, 0.2, 1, grammar="root ::= x")),
        request_key("gguf-sha256:abc", Request(base.messages, 10, 0.2, 1, stop_after_program=True)),
    ]
    assert len({key, *variants}) == len(variants) + 1


class SlowBackendFake:
    """Fault injection: a backend slow enough that two threads ask it the same request at
    once; it counts the calls that reach it."""

    identity = fingerprint = "slow-fake"
    supports_grammar = False

    def __init__(self) -> None:
        self.calls = 0
        self.started = threading.Event()

    def complete(self, request: Request, on_text: object = None) -> Completion:
        self.calls += 1
        self.started.set()
        time.sleep(0.5)
        return Completion(f"answer {self.calls}", 1, 2)


def test_one_request_asked_on_two_threads_at_once_is_one_model_call(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    fake = SlowBackendFake()
    counter = CallCounter()
    budget = Budget(max_calls=1)  # a second call would be refused
    backend = CachedBackend(fake, cache, CacheMode.USE, counter, budget=budget)
    request = Request(({"role": "user", "content": "hi"},), 10, 0.0, 1)
    answers: list[str] = []
    first = threading.Thread(target=lambda: answers.append(backend.complete(request).text))
    first.start()
    assert fake.started.wait(10)  # the first is inside its call when the second asks
    answers.append(backend.complete(request).text)
    first.join()
    assert fake.calls == 1 and budget.calls == 1 and counter.cache_hits == 1
    assert answers == ["answer 1", "answer 1"]
    other = Request(({"role": "user", "content": "bye"},), 10, 0.0, 1)
    with pytest.raises(BudgetError):  # a different request is not held back by the claim
        backend.complete(other)
    cache.close()


def test_cache_stores_json_and_evicts_to_its_limit(tmp_path: Path) -> None:
    import secrets
    import sqlite3
    import zlib

    cache = ResponseCache(tmp_path / "c", size_limit_mb=1)
    for i in range(40):  # random text: JSONDisk compresses, so repetitive text would not fill it
        cache.put(f"k{i}", Completion(secrets.token_hex(50_000) + str(i), 1, 2))
    assert cache.get("k39") is not None and cache.get("k39").text.endswith("39")  # type: ignore[union-attr]
    assert cache.stats()["entries"] < 40
    assert cache.stats()["bytes"] <= 2 * 1024 * 1024
    cache.close()
    # Values are JSON, never pickles (CVE-2025-69872).
    db = sqlite3.connect(tmp_path / "c" / "cache.db")
    rows = db.execute("SELECT value, filename FROM Cache").fetchall()
    for value, filename in rows:
        blob = value if value is not None else (tmp_path / "c" / filename).read_bytes()
        blob = blob if isinstance(blob, bytes) else str(blob).encode()
        assert not blob.startswith(b"\x80"), "pickle protocol header found"
        json.loads(zlib.decompress(blob))  # JSONDisk stores zlib-compressed JSON


def test_trace_is_written_and_listed(fast_config: Path, isolated_home: Path) -> None:
    doc = ask_json(fast_config, "Say hello.", input="MARKER-IN-TRACE")
    path = Path(doc["trace"])
    assert path.parent == traces_dir(isolated_home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    record = load_trace(path)
    for key in (
        "version",
        "id",
        "started_at",
        "question",
        "inputs",
        "conductor",
        "pool",
        "workflow",
        "events",
        "steps",
        "answer",
        "totals",
    ):
        assert key in record
    assert record["status"] == "done" and record["answer"] == doc["answer"]
    assert record["inputs"][0]["name"] == "stdin" and record["inputs"][0]["size"] == 15
    assert len(record["steps"]) == len(doc["steps"])
    assert all(s["status"] == "done" and s["messages"] for s in record["steps"])
    assert [e["type"] for e in record["events"]][:3] == ["RunStarted", "PlanStarted", "PlanReady"]
    time.sleep(1.1)  # trace ids carry the second they started
    second = ask_json(fast_config, "Say goodbye.")
    listed = json.loads(run_cli("traces", "list", "--json").stdout)
    assert [r["id"] for r in listed] == [Path(second["trace"]).stem, record["id"]]
    assert listed[1]["status"] == "done" and listed[1]["question"] == "Say hello."
    shown = run_cli("traces", "show", record["id"])
    assert shown.returncode == 0
    for i, step in enumerate(record["steps"]):
        assert f"step {i}" in shown.stdout and step["worker"] in shown.stdout
    assert (
        json.loads(run_cli("traces", "show", record["id"], "--json").stdout)["id"] == record["id"]
    )
    assert run_cli("traces", "rm", record["id"]).returncode == 0
    assert not path.exists()


def test_damaged_traces_are_reported(tmp_path: Path) -> None:
    truncated = tmp_path / "t.json"
    truncated.write_text('{"version": 1, "question": "x", "ste', encoding="utf-8")
    assert_one_line_error(run_cli("traces", "show", str(truncated)), 2, "truncated JSON")
    newer = tmp_path / "n.json"
    newer.write_text('{"version": 99, "question": "x"}', encoding="utf-8")
    assert_one_line_error(run_cli("replay", str(newer)), 2, "version 99 is newer")
    assert_one_line_error(run_cli("replay", "nosuchid"), 2, "no trace 'nosuchid'")


def test_replay_works_offline_with_the_workers_gone(
    fast_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = ask_json(fast_config, "What is the capital of Italy?")
    # Every model gone and the network closed: replay needs only the trace.
    monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    trace_id = Path(doc["trace"]).stem
    proc = run_cli("replay", trace_id)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == doc["answer"].strip()
    assert not (tmp_path / "empty").exists()


def test_play_keeps_the_recorded_pace(fast_config: Path) -> None:
    doc = ask_json(fast_config, "Say yes.")
    record = load_trace(Path(doc["trace"]))
    seen: list[object] = []
    sleeps: list[float] = []
    answer = play(record, seen.append, speed=2.0, sleep=sleeps.append)
    assert answer == doc["answer"]
    assert [type(e).__name__ for e in seen] == [e["type"] for e in record["events"]]
    assert all(e.source == "trace" for e in seen if isinstance(e, StepFinished | PlanReady))
    recorded = record["events"][-1]["at"] - record["events"][0]["at"]
    assert sum(sleeps) == pytest.approx(recorded / 2, rel=0.01)
    assert isinstance(seen[-1], RunFinished)
    instant: list[float] = []
    play(record, lambda e: None, speed=0, sleep=instant.append)
    assert instant == []


def test_interrupted_run_resumes_only_missing_steps(
    tmp_path: Path, isolated_home: Path, gguf_path: Path
) -> None:
    config = tmp_path / "slow.toml"
    # Steps long enough (a second or more each) that Ctrl-C lands while one runs.
    config.write_text(FAST_CONFIG.replace("max_tokens = 40", "max_tokens = 80"), encoding="utf-8")
    workflow = tmp_path / "story.json"
    workflow.write_text(json.dumps(SLOW_WORKFLOW), encoding="utf-8")
    proc = start_cli("run", "--config", str(config), str(workflow), "Tell me a story.")
    deadline = time.monotonic() + 120
    trace_file = None
    while time.monotonic() < deadline:
        found = list(traces_dir(isolated_home).glob("*.json"))
        if found:
            trace_file = found[0]
            steps = json.loads(trace_file.read_text())["steps"]
            if steps and steps[0]["status"] == "done":
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert trace_file is not None
    record = load_trace(trace_file)
    assert record["status"] == "interrupted"
    done = [s["index"] for s in record["steps"] if s["status"] == "done"]
    assert done and done[0] == 0 and len(done) < 3
    resumed = run_cli("replay", "--resume", "--config", str(config), "--json", record["id"])
    assert resumed.returncode == 0, resumed.stderr
    doc = json.loads(resumed.stdout)
    assert doc["totals"]["model_calls"] == 3 - len(done)
    assert [s["source"] for s in doc["steps"][: len(done)]] == ["trace"] * len(done)
    final = load_trace(trace_file)
    assert final["status"] == "done" and final["answer"] == doc["answer"]
    assert all(s["status"] == "done" for s in final["steps"])
    # --from-step keeps the steps before K and calls the models again from K on.
    again = run_cli("replay", "--from-step", "2", "--config", str(config), "--json", record["id"])
    assert again.returncode == 0, again.stderr
    doc2 = json.loads(again.stdout)
    assert doc2["totals"]["model_calls"] == 1
    assert [s["source"] for s in doc2["steps"]] == ["trace", "trace", "model"]
    assert load_trace(Path(doc2["trace"]))["replay_of"] == record["id"]


def test_run_a_hand_written_list_form_workflow(fast_config: Path, tmp_path: Path) -> None:
    workflow = tmp_path / "pipeline.txt"
    workflow.write_text(
        'model_id = [0, 0]\nsubtasks = ["Find the bug in the code.", "Give the fixed code."]\n'
        "access_list = [[], [0]]\n",
        encoding="utf-8",
    )
    proc = run_cli(
        "run",
        "--config",
        str(fast_config),
        "--json",
        str(workflow),
        "Fix this.",
        input="def inc(x):\n    return x - 1  # MARKER-PIPE\n",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["plan"] is None
    assert [s["task"] for s in doc["steps"]] == [
        "Find the bug in the code.",
        "Give the fixed code.",
    ]
    assert all("MARKER-PIPE" in s["messages"][-1]["content"] for s in doc["steps"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"steps": [{"worker": "ghost", "task": "boo", "sees": []}]}', encoding="utf-8")
    assert_one_line_error(
        run_cli("run", "--config", str(fast_config), str(bad), "q"),
        1,
        "bad.json",
        "unknown worker 'ghost'",
    )


def test_replay_live_with_a_swapped_pool(fast_config: Path, tmp_path: Path) -> None:
    doc = ask_json(fast_config, "Say something kind.")
    other = tmp_path / "other.toml"
    other.write_text(
        FAST_CONFIG.replace('name = "local"', 'name = "alt"').replace(
            "max_tokens = 40", "max_tokens = 8"
        ),
        encoding="utf-8",
    )
    trace_id = Path(doc["trace"]).stem
    missing = run_cli("replay", "--live", "--config", str(other), trace_id)
    assert_one_line_error(missing, 1, "workers not in the pool: local")
    swapped = run_cli("replay", "--config", str(other), "--worker", "local=alt", "--json", trace_id)
    assert swapped.returncode == 0, swapped.stderr
    result = json.loads(swapped.stdout)
    assert {s["worker"] for s in result["steps"]} == {"alt"}
    assert result["totals"]["model_calls"] == len(result["steps"])


def test_redaction() -> None:
    assert redact_text('key "sk-abc123" here', ["sk-abc123"]) == 'key "[REDACTED]" here'
    assert redact_text('a\\"b-secret', ['a"b-secret']) == "[REDACTED]"


def _trace_writer(tmp_path: Path) -> TraceWriter:
    """A writer for a run of FAST_CONFIG, its trace under tmp_path; the test feeds the events."""
    config_file = tmp_path / "config.toml"
    config_file.write_text(FAST_CONFIG, encoding="utf-8")
    return TraceWriter(
        question="Hi?",
        attachments=(),
        config=load_config(config_file),
        conductor_identity="test",
        directory=tmp_path,
    )


def test_a_trace_takes_no_step_events_once_the_run_ended(tmp_path: Path) -> None:
    # After Ctrl-C a step's thread may still report that its model was closed under it; the
    # trace must keep saying "interrupted" for that step (resume reruns it).
    workflow = parse_workflow(
        'model_id = [0]\nsubtasks = ["Say hello to the user."]\naccess_list = [[]]', ["local"], 2
    )
    writer = _trace_writer(tmp_path)
    writer(PlanReady(workflow, 0.1))
    writer(StepStarted(0, "local", "Say hello to the user.", ()))
    writer(RunFailed("interrupted", interrupted=True))
    writer(StepFailed(0, "local", "llama.cpp: the model was closed (the run is ending)"))
    record = load_trace(writer.path)
    assert record["status"] == "interrupted"
    assert record["steps"][0]["status"] == "interrupted"
    assert [e["type"] for e in record["events"]][-1] == "RunFailed"


def test_ctrl_c_while_done_is_written_still_ends_the_trace_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: the write of the finished trace is interrupted (the file keeps its
    # previous "running" state); the run's "interrupted" that follows must still be written.
    writer = _trace_writer(tmp_path)
    real_write = trace_module.atomic_write

    def interrupted_once_at_done(path: Path, data: bytes) -> None:
        if b'"status": "done"' in data and not interrupted_once_at_done.fired:
            interrupted_once_at_done.fired = True
            raise KeyboardInterrupt
        real_write(path, data)

    interrupted_once_at_done.fired = False
    monkeypatch.setattr(trace_module, "atomic_write", interrupted_once_at_done)
    # Nothing on disk before the run's first event: Ctrl-C before it leaves no "running" file.
    assert not writer.path.exists()
    writer(RunStarted("Hi?"))
    with pytest.raises(KeyboardInterrupt):
        writer(RunFinished("Hello."))
    assert load_trace(writer.path)["status"] == "running"
    writer(RunFailed("interrupted", interrupted=True))
    assert load_trace(writer.path)["status"] == "interrupted"


def _raise_wrapped_ctrl_c() -> None:
    # What Python makes of Ctrl-C during a lazy import that creates a class.
    class Interrupting:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    type("Lazy", (), {"field": Interrupting()})


@pytest.mark.parametrize(
    ("fault", "status", "error"),
    [
        ("wrapped ctrl-c", "interrupted", "interrupted"),
        ("a bug", "failed", "internal error: ValueError: a bug"),
    ],
)
def test_a_run_ended_by_any_exception_never_leaves_its_trace_running(
    tmp_path: Path, gguf_path: Path, fault: str, status: str, error: str
) -> None:
    # Fault injection through the event subscriber: the run ends right after its plan, by an
    # exception other than our own errors. Found by the kill test: a trace said "running".
    config_file = tmp_path / "config.toml"
    config_file.write_text(FAST_CONFIG, encoding="utf-8")
    workflow = parse_workflow(
        'model_id = [0]\nsubtasks = ["Say hello to the user."]\naccess_list = [[]]', ["local"], 2
    )

    def failing_view(event: object) -> None:
        if isinstance(event, PlanReady):
            if fault == "a bug":
                raise ValueError("a bug")
            _raise_wrapped_ctrl_c()

    with pytest.raises(BaseException) as raised:
        execute(
            "Hi?",
            config=load_config(config_file),
            workflow=workflow,
            on_event=failing_view,
            trace=TraceOptions(directory=tmp_path / "traces"),
        )
    assert is_interrupt(raised.value) == (fault == "wrapped ctrl-c")
    (trace_file,) = (tmp_path / "traces").glob("*.json")
    record = load_trace(trace_file)
    assert record["status"] == status
    assert record["error"] == error


def test_cache_clear_removes_the_converted_training_bases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(tmp_path / "state"))
    kept = tmp_path / "state" / "torch-base" / "SmolLM2-0123456789abcdef"
    kept.mkdir(parents=True)
    (kept / "config.json").write_text("{}", encoding="utf-8")
    copy = tmp_path / "state" / "f16" / "0123456789abcdef-0.3.36-f16.gguf"  # backends/f16_copy
    copy.parent.mkdir()
    copy.write_bytes(b"GGUF")
    done = run_cli("cache", "clear")
    assert done.returncode == 0, done.stderr
    assert "1 converted training bases and 1 16-bit model copies" in done.stdout
    assert not kept.exists() and not copy.exists()
