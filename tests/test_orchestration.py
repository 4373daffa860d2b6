"""Parallel steps, retries, fallbacks, skipped dependents and budgets, against fake servers
(FakeOpenAIServer injects latency and faults) through the real litellm path."""

from __future__ import annotations

import json
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.api import RunOptions, TraceOptions, run_workflow
from conductor_cli.backends.litellm import LiteLLMProcess
from conductor_cli.config.settings import config_from_dict
from conductor_cli.errors import BudgetError, WorkerError
from conductor_cli.run.events import StepFinished, StepRetry, StepSkipped, StepStarted
from conductor_cli.run.workflow import parse_workflow
from conductor_cli.runtime import Runtime
from conductor_cli.storage.cache import CacheMode
from conductor_cli.storage.trace import load_trace
from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import assert_one_line_error, run_cli

# One litellm helper process for the module's library-level runs: each fresh process would
# import litellm again (3 s of CPU). Per-process start-up is covered by the CLI tests.
_HELPER: list[LiteLLMProcess] = []


@pytest.fixture(scope="module", autouse=True)
def shared_litellm_helper() -> Iterator[LiteLLMProcess]:
    helper = LiteLLMProcess()
    _HELPER.append(helper)
    yield helper
    _HELPER.clear()
    helper.close()


@pytest.fixture
def fakes() -> Iterator[list[FakeOpenAIServer]]:
    made: list[FakeOpenAIServer] = []
    yield made
    for f in made:
        f.close()


def fake(fakes: list[FakeOpenAIServer], *script: str, **kw: object) -> FakeOpenAIServer:
    server = FakeOpenAIServer(list(script), **kw)  # type: ignore[arg-type]
    fakes.append(server)
    return server


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(name: str, api_base: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "model": "openai/fake",
        "api_base": api_base,
        "timeout_s": 5.0,
        "retries": 0,
        **extra,
    }


def config(*workers: dict[str, object]):  # type: ignore[no-untyped-def]
    return config_from_dict({"workers": list(workers)})


def steps(*spec: tuple[str, list[int]]):  # type: ignore[no-untyped-def]
    text = json.dumps(
        {
            "steps": [
                {"worker": w, "task": f"Task number {i}", "sees": s}
                for i, (w, s) in enumerate(spec)
            ]
        }
    )
    return parse_workflow(text, sorted({w for w, _ in spec}), 10)


def run(workflow, cfg, *, trace=True, **kw):  # type: ignore[no-untyped-def]
    events: list[object] = []
    with Runtime(cfg, litellm=_HELPER[0]) as runtime:
        result = run_workflow(
            workflow,
            "Q?",
            config=cfg,
            on_event=events.append,
            options=RunOptions(**kw),
            trace=TraceOptions(enabled=trace),
            runtime=runtime,
        )
    return result, events


def spans(events: list[object]) -> dict[int, tuple[float, float]]:
    start = {e.index: e.at for e in events if isinstance(e, StepStarted)}
    end = {e.index: e.at for e in events if isinstance(e, StepFinished)}
    return {i: (start[i], end[i]) for i in start}


def test_independent_steps_overlap_and_a_chain_does_not(fakes: list[FakeOpenAIServer]) -> None:
    servers = [fake(fakes, "slow") for _ in range(3)]
    cfg = config(*(worker(f"w{i}", s.api_base) for i, s in enumerate(servers)))
    result, events = run(steps(("w0", []), ("w1", []), ("w2", [])), cfg, trace=False)
    s = spans(events)
    # All three ran at once: each started before any finished.
    assert max(a for a, _ in s.values()) < min(b for _, b in s.values())
    assert [r.index for r in result.steps] == [0, 1, 2]
    chain, events = run(
        steps(("w0", []), ("w1", [0]), ("w2", [1])), cfg, cache_mode="off", trace=False
    )
    s = spans(events)
    assert s[0][1] <= s[1][0] and s[1][1] <= s[2][0]
    # The chain's third worker saw the second one's output.
    assert chain.steps[2].messages[0] == {"role": "user", "content": "Step 1 (w1): Task number 1"}
    assert chain.steps[2].messages[1]["content"] == chain.steps[1].output.strip()


def test_rate_limit_then_success_is_retried(fakes: list[FakeOpenAIServer]) -> None:
    flaky = fake(fakes, "429", "ok")
    cfg = config(worker("flaky", flaky.api_base, retries=2))
    result, events = run(steps(("flaky", [])), cfg, trace=False)
    assert result.answer == "fake answer"
    assert len(flaky.requests) == 2
    retries = [e for e in events if isinstance(e, StepRetry)]
    assert len(retries) == 1 and retries[0].attempt == 2 and "RateLimit" in retries[0].error
    assert 0.5 <= retries[0].delay <= 0.5 * 1.25


@pytest.mark.parametrize("fault", ["500", "malformed", "empty", "reset", "half"])
def test_failing_worker_falls_back(fault: str, fakes: list[FakeOpenAIServer]) -> None:
    bad = fake(fakes, fault)
    good = fake(fakes, "ok", answer="from the fallback")
    cfg = config(
        worker("bad", bad.api_base, retries=1, fallback="good"), worker("good", good.api_base)
    )
    result, _ = run(steps(("bad", [])), cfg)
    assert len(bad.requests) == 2  # the first try and one retry
    assert result.answer == "from the fallback" and result.steps[0].worker == "good"
    record = load_trace(result.trace_path)  # type: ignore[arg-type]
    assert record["steps"][0]["fallback"] == "good" and record["steps"][0]["retries"] == 1


@pytest.mark.parametrize("fault", ["half", "reset"])
def test_a_stream_cut_off_midway_is_retried_and_only_the_full_answer_kept(
    fault: str, fakes: list[FakeOpenAIServer]
) -> None:
    cut = fake(fakes, fault, "ok", answer="one two three four five six")
    cfg = config(worker("cut", cut.api_base, retries=1))
    result, events = run(steps(("cut", [])), cfg, stream=True)
    assert len(cut.requests) == 2 and all(r["body"].get("stream") for r in cut.requests)
    assert result.answer == "one two three four five six"
    assert [type(e).__name__ for e in events].count("StepRetry") == 1
    record = load_trace(result.trace_path)  # type: ignore[arg-type]
    assert record["steps"][0]["output"] == "one two three four five six"
    assert record["status"] == "done"


def test_failure_skips_dependents_and_spares_independent_steps(
    fakes: list[FakeOpenAIServer],
) -> None:
    ok = fake(fakes, "ok")
    cfg = config(
        worker("gone", f"http://127.0.0.1:{closed_port()}/v1", retries=1), worker("ok", ok.api_base)
    )
    workflow = steps(("gone", []), ("ok", []), ("ok", [0]), ("ok", [1]))
    events: list[object] = []
    failed = r"step 0 \(gone\): .*Connection error.*1 step skipped"
    with Runtime(cfg, litellm=_HELPER[0]) as runtime, pytest.raises(WorkerError, match=failed):
        run_workflow(workflow, "Q?", config=cfg, on_event=events.append, runtime=runtime)
    assert [e.index for e in events if isinstance(e, StepSkipped)] == [2]
    assert sorted(e.index for e in events if isinstance(e, StepFinished)) == [1, 3]


def test_timeout_fails_the_step_with_its_error(fakes: list[FakeOpenAIServer]) -> None:
    hang = fake(fakes, "hang")
    cfg = config(worker("slow", hang.api_base, timeout_s=1.0))
    with pytest.raises(WorkerError, match=r"step 0 \(slow\): .*[Tt]imed? ?out"):
        run(steps(("slow", [])), cfg, trace=False)


def test_cli_exit_code_and_trace_for_a_failed_run(
    fakes: list[FakeOpenAIServer], tmp_path: Path, isolated_home: Path
) -> None:
    ok = fake(fakes, "ok")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[workers]]\nname = "bad"\nmodel = "openai/fake"\nretries = 0\n'
        f'api_base = "http://127.0.0.1:{closed_port()}/v1"\n\n'
        f'[[workers]]\nname = "ok"\nmodel = "openai/fake"\napi_base = "{ok.api_base}"\n',
        encoding="utf-8",
    )
    wf = tmp_path / "wf.json"
    wf.write_text(json.dumps(steps(("bad", []), ("ok", []), ("ok", [0, 1])).to_dict()))
    proc = run_cli("run", "--config", str(cfg), str(wf), "Q?")
    assert_one_line_error(proc, 1, "step 0 (bad)", "1 step skipped")
    assert proc.stdout == ""  # no partial output presented as the answer
    (trace_file,) = (isolated_home / "data" / "conductor" / "traces").glob("*.json")
    record = load_trace(trace_file)
    assert record["status"] == "failed" and record["answer"] is None
    assert [s["status"] for s in record["steps"]] == ["failed", "done", "skipped"]
    assert "Connection error" in record["steps"][0]["error"]


def test_max_calls_stops_before_the_limit(fakes: list[FakeOpenAIServer]) -> None:
    server = fake(fakes, "ok")
    cfg = config(worker("w", server.api_base))
    with pytest.raises(BudgetError, match="--max-calls 2"):
        run(
            steps(("w", []), ("w", [0]), ("w", [1])),
            cfg,
            max_calls=2,
            trace=False,
            cache_mode="off",
        )
    assert len(server.requests) == 2


def test_max_cost_stops_before_a_call_that_could_cross_it(
    fakes: list[FakeOpenAIServer],
) -> None:
    server = fake(fakes, "ok")
    # $1 per million output tokens: one call's bound is max_tokens=1000 -> $0.001 (+ input).
    cfg = config(
        worker(
            "w", server.api_base, max_tokens=1000, input_cost_per_mtok=0.0, output_cost_per_mtok=1.0
        )
    )
    result, _ = run(steps(("w", []), ("w", [0])), cfg, max_cost=0.01, trace=False, cache_mode="off")
    assert result.totals()["cost"] == pytest.approx(2 * 5 / 1e6)
    with pytest.raises(BudgetError, match=r"--max-cost 0\.0005"):
        run(steps(("w", [])), cfg, max_cost=0.0005, trace=False, cache_mode="off")
    assert len(server.requests) == 2  # the refused call never reached the server


def test_workers_add_remove_round_trip(tmp_path: Path, fakes: list[FakeOpenAIServer]) -> None:
    import tomllib

    path = tmp_path / "config.toml"
    original = (
        "[conductor]\nmax_steps = 3\nseed = 7\n\n[cache]\nsize_limit_mb = 64\n\n"
        '[[workers]]\nname = "local"\nmodel = "gguf:smollm2-135m-instruct"\n'
        'description = "tiny"\nmax_tokens = 99\n'
    )
    path.write_text(original, encoding="utf-8")
    server = fake(fakes, "ok")
    added = run_cli(
        "workers",
        "add",
        "--config",
        str(path),
        "remote",
        "openai/fake",
        "--api-base",
        server.api_base,
        "--description",
        "a fake server",
        "--fallback",
        "local",
    )
    assert added.returncode == 0, added.stderr
    raw = tomllib.loads(path.read_text())
    assert raw["conductor"] == {"max_steps": 3, "seed": 7}
    assert raw["cache"] == {"size_limit_mb": 64}
    assert raw["workers"][0] == {
        "name": "local",
        "model": "gguf:smollm2-135m-instruct",
        "description": "tiny",
        "max_tokens": 99,
    }
    assert raw["workers"][1]["fallback"] == "local"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # rewritten private
    listed = json.loads(run_cli("workers", "list", "--config", str(path), "--json").stdout)
    assert [w["name"] for w in listed] == ["local", "remote"]
    tested = run_cli("workers", "test", "--config", str(path), "--json", "remote")
    assert tested.returncode == 0, tested.stderr
    assert json.loads(tested.stdout)[0]["reply"] == "fake answer"
    # Removing a worker another one falls back to would break the file: refused, file intact.
    before = path.read_text()
    assert_one_line_error(
        run_cli("workers", "remove", "--config", str(path), "local"), 2, "workers[0].fallback"
    )
    assert path.read_text() == before
    assert run_cli("workers", "remove", "--config", str(path), "remote").returncode == 0
    assert tomllib.loads(path.read_text()) == tomllib.loads(original)
    assert_one_line_error(
        run_cli("workers", "add", "--config", str(path), "local", "x"), 2, "exists"
    )


def test_workers_test_reports_an_unreachable_worker(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[[workers]]\nname = "gone"\nmodel = "openai/fake"\nretries = 0\n'
        f'api_base = "http://127.0.0.1:{closed_port()}/v1"\n',
        encoding="utf-8",
    )
    proc = run_cli("workers", "test", "--config", str(path), "--json")
    assert proc.returncode == 1
    (row,) = json.loads(proc.stdout)
    assert row["name"] == "gone" and row["ok"] is False and "Connection error" in row["error"]


def test_litellm_price_is_asked_of_its_helper_process(fakes: list[FakeOpenAIServer]) -> None:
    from conductor_cli.backends.litellm_child import import_litellm

    server = fake(fakes, "ok")
    cfg = config(worker("w", server.api_base) | {"model": "openai/gpt-4o-mini"})
    result, _ = run(steps(("w", [])), cfg, trace=False, cache_mode="off")
    prompt, completion = import_litellm().cost_per_token(
        model="openai/gpt-4o-mini", prompt_tokens=10, completion_tokens=5
    )
    assert prompt + completion > 0
    assert result.steps[0].cost == pytest.approx(prompt + completion)
    # A model litellm has no price for: cost unknown, not an error.
    cfg = config(worker("w", server.api_base))
    result, _ = run(steps(("w", [])), cfg, trace=False, cache_mode="off")
    assert result.steps[0].cost is None


def test_a_dead_litellm_helper_fails_the_step_cleanly(fakes: list[FakeOpenAIServer]) -> None:
    from conductor_cli.backends.base import Request
    from conductor_cli.backends.litellm import LiteLLMBackend, LiteLLMProcess

    server = fake(fakes, "ok")
    process = LiteLLMProcess()
    backend = LiteLLMBackend("openai/fake", api_base=server.api_base, process=process)
    request = Request(({"role": "user", "content": "hi"},), 8, 0.0, 0)
    assert backend.complete(request).text == "fake answer"
    assert process._proc is not None
    process._proc.kill()  # fault injection: the helper dies between two calls
    process._proc.wait()
    with pytest.raises(WorkerError, match="litellm helper process died of SIGKILL") as info:
        backend.complete(request)
    assert not info.value.retryable
    process.close()
    assert process._proc is None


def test_a_served_conductor_that_writes_no_workflow_falls_back_to_one_step(
    fakes: list[FakeOpenAIServer], tmp_path: Path
) -> None:
    from conductor_cli.api import ask

    conductor = fake(fakes, "ok", answer="I would rather chat about the weather.")
    workers = fake(fakes, "ok", answer="the worker's answer")
    cfg = config_from_dict(
        {
            "conductor": {"model": "litellm:openai/fake", "api_base": conductor.api_base},
            "workers": [
                worker("brief", workers.api_base, description="small"),
                worker(
                    "thorough", workers.api_base, description="careful, checks every step twice"
                ),
            ],
        }
    )
    result = ask(
        "What is 2 + 2?",
        config=cfg,
        trace=TraceOptions(directory=tmp_path),
        options=RunOptions(cache_mode=CacheMode.OFF),
    )
    assert result.plan is not None and result.plan.fallback and result.plan.attempts == 2
    assert [s.worker for s in result.workflow.steps] == ["thorough"]
    assert result.answer == "the worker's answer"
    # The retry showed the conductor its error before giving up on it.
    retry = conductor.requests[1]["body"]["messages"][-1]["content"]
    assert "That workflow is invalid" in retry and "brief, thorough" in retry
    record = load_trace(result.trace_path)
    assert record["plan"]["fallback"] is True and record["plan"]["attempts"] == 2
    assert "one step for thorough" in record["plan"]["repairs"][0]


@pytest.mark.parametrize("case", ["repaired", "retried"])
def test_a_served_conductors_workflow_is_repaired_or_retried(
    fakes: list[FakeOpenAIServer], tmp_path: Path, case: str
) -> None:
    from conductor_cli.api import ask

    fixable = (
        "Sure! Here is the workflow:\n```json\n"
        '{"steps": [{"worker": " Brief ", "task": "Add the numbers.", "sees": [0]},'
        ' {"worker": "thorough", "task": "Check the sum.", "sees": [0, 0, 1]}]}\n```'
    )
    valid = (
        '{"steps": [{"worker": "brief", "task": "Add the numbers.", "sees": []},'
        ' {"worker": "thorough", "task": "Check the sum.", "sees": [0]}]}'
    )
    answers = [fixable] if case == "repaired" else ["Let me think about the weather.", valid]
    conductor = fake(fakes, "ok", answers=answers)
    workers = fake(fakes, "ok", answer="4")
    cfg = config_from_dict(
        {
            "conductor": {"model": "litellm:openai/fake", "api_base": conductor.api_base},
            "workers": [worker("brief", workers.api_base), worker("thorough", workers.api_base)],
        }
    )
    result = ask(
        "What is 2 + 2?",
        config=cfg,
        trace=TraceOptions(directory=tmp_path),
        options=RunOptions(cache_mode=CacheMode.OFF),
    )
    assert result.plan is not None and not result.plan.fallback
    assert [(s.worker, s.task, s.sees) for s in result.workflow.steps] == [
        ("brief", "Add the numbers.", ()),
        ("thorough", "Check the sum.", (0,)),
    ]
    record = load_trace(result.trace_path)
    assert record["plan"]["fallback"] is False
    if case == "repaired":
        # Clear intent: fixed in place, no second request, each repair in the trace.
        assert len(conductor.requests) == 1 and record["plan"]["attempts"] == 1
        repairs = " | ".join(record["plan"]["repairs"])
        assert "cut the JSON workflow out of surrounding text" in repairs
        assert "read as 'brief'" in repairs
        assert "step 0: dropped references to steps [0]" in repairs  # itself
        assert "step 1: dropped references to steps [1]" in repairs  # itself; duplicate merged
    else:
        # No workflow at all: one retry that shows the conductor its error, which it fixes.
        assert len(conductor.requests) == 2 and record["plan"]["attempts"] == 2
        assert (
            "That workflow is invalid" in conductor.requests[1]["body"]["messages"][-1]["content"]
        )
    assert record["status"] == "done" and record["answer"] == "4"
