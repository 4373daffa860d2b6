"""`conductor eval` on a remote pool (litellm to a fake server): the qa path, concurrency,
prices, and usage counted the same whether the response cache served a call or not."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from conductor_cli.evals.store import evals_dir
from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import run_cli, signal_a_side_thread, start_cli


def test_qa_eval_with_remote_workers_counts_usage_even_from_the_cache(tmp_path: Path) -> None:
    right = FakeOpenAIServer(["ok"], answer="Let me think. Answer: 42")
    wrong = FakeOpenAIServer(["ok"], answer="Answer: 41")
    try:
        config = tmp_path / "config.toml"
        config.write_text(
            f"[[workers]]\nname = 'good'\nmodel = 'openai/fake'\napi_base = '{right.api_base}'\n"
            "input_cost_per_mtok = 1000.0\noutput_cost_per_mtok = 2000.0\n"
            f"[[workers]]\nname = 'bad'\nmodel = 'openai/fake'\napi_base = '{wrong.api_base}'\n",
            encoding="utf-8",
        )
        data = tmp_path / "qa.jsonl"
        data.write_text(
            "".join(
                json.dumps({"question": f"What is 6 times 7? ({i})", "answer": 42}) + "\n"
                for i in range(6)
            ),
            encoding="utf-8",
        )

        def evaluate(*extra: str) -> dict:
            out = tmp_path / "r.json"
            proc = run_cli(
                "eval", "qa", str(data), "--scorer", "numeric", "--config", str(config),
                "--strategies", "single,vote:good,router,oracle", "--concurrency", "3",
                "--json-out", str(out), *extra,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            return {s["strategy"]: s for s in json.loads(out.read_text())["strategies"]}

        first = evaluate()
        calls_first = len(right.requests) + len(wrong.requests)
        again = evaluate("--restart")  # recomputed, but every call comes from the cache
        assert len(right.requests) + len(wrong.requests) == calls_first
    finally:
        right.close()
        wrong.close()
    assert first["single:good"]["accuracy"] == 1.0
    assert first["single:bad"]["accuracy"] == 0.0
    assert first["vote:good"]["accuracy"] == 1.0 and first["vote:good"]["model_calls"] == 18
    assert first["oracle"]["accuracy"] == 1.0
    # The router learned on the other half that `good` wins, for every problem.
    assert first["router"]["accuracy"] == 1.0
    assert first["router"]["cost"] == first["single:good"]["cost"]
    # 6 calls of 10 tokens in, 5 out at $1000/$2000 per million tokens.
    assert abs(first["single:good"]["cost"] - 6 * (10 * 1e-3 + 5 * 2e-3)) < 1e-9
    assert first["single:bad"]["cost"] is None  # litellm knows no price for a local alias
    for name, s in first.items():
        assert again[name]["model_calls"] == s["model_calls"], name
        assert again[name]["cost"] == s["cost"], name
        assert again[name]["tokens_total"] == s["tokens_total"], name


@pytest.mark.parametrize("target", ["process", "side thread"])
def test_ctrl_c_with_concurrency_stops_at_once_and_stores_only_real_results(
    tmp_path: Path, target: str
) -> None:
    # The kernel may hand the signal to a problem's thread instead of the main thread (CI saw
    # it): the main thread then slept through it until every problem was done.
    # Each answer takes 1 s; 24 problems 3 at a time would take 8 s more after the signal.
    slow = FakeOpenAIServer(["slow"], answer="Answer: 42", delay=1.0)
    try:
        config = tmp_path / "config.toml"
        config.write_text(
            f"[[workers]]\nname = 'w'\nmodel = 'openai/fake'\napi_base = '{slow.api_base}'\n",
            encoding="utf-8",
        )
        data = tmp_path / "qa.jsonl"
        data.write_text(
            "".join(
                json.dumps({"question": f"What is 6 times 7? ({i})", "answer": 42}) + "\n"
                for i in range(24)
            ),
            encoding="utf-8",
        )
        proc = start_cli(
            "eval", "qa", str(data), "--scorer", "numeric", "--config", str(config),
            "--strategies", "single", "--concurrency", "3", "--no-cache", "-v",
        )  # fmt: skip
        assert proc.stderr is not None
        head = ""
        while head.count("conductor: [") < 3:
            chunk = os.read(proc.stderr.fileno(), 65536).decode()
            assert chunk, head
            head += chunk
        if target == "process":
            proc.send_signal(signal.SIGINT)
        else:
            signal_a_side_thread(proc, signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
        asked = len(slow.requests)
    finally:
        slow.close()
    assert proc.returncode == 130, head + rest
    # The problems not started were dropped, not run to the end before exiting.
    assert asked < 12, asked
    # Only answers the strategy really gave were kept: none lost to the shutdown itself.
    (store,) = evals_dir().glob("*.jsonl")
    rows = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    assert 3 <= len(rows) <= asked
    assert all(row["correct"] for row in rows), rows


def test_router_per_category_moa_layers_and_sampling_from_the_command_line(
    tmp_path: Path,
) -> None:
    # Worker `times` knows products (answer 42), worker `days` knows the week (answer 7).
    times = FakeOpenAIServer(["ok"], answer="Answer: 42")
    days = FakeOpenAIServer(["ok"], answer="Answer: 7")
    try:
        config = tmp_path / "config.toml"
        config.write_text(
            f"[[workers]]\nname = 'times'\nmodel = 'openai/fake'\napi_base = '{times.api_base}'\n"
            f"[[workers]]\nname = 'days'\nmodel = 'openai/fake'\napi_base = '{days.api_base}'\n",
            encoding="utf-8",
        )
        rows = []
        for i in range(8):
            rows.append({"question": f"What is 6 times 7? ({i})", "answer": 42, "category": "x"})
            rows.append({"question": f"Days in a week? ({i})", "answer": 7, "category": "d"})
        data = tmp_path / "qa.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

        def evaluate(*extra: str) -> dict:
            out = tmp_path / "r.json"
            proc = run_cli(
                "eval", "qa", str(data), "--scorer", "numeric", "--config", str(config),
                "--json-out", str(out), *extra,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            return {s["strategy"]: s for s in json.loads(out.read_text())["strategies"]}

        table = evaluate(
            "--strategies", "single,moa,router,oracle", "--moa-layers", "2", "--aggregator", "days",
            "--no-cache",
        )  # fmt: skip
        asked = len(times.requests) + len(days.requests)
        by_worker = (len(times.requests), len(days.requests))
        sampled = evaluate("--strategies", "single", "--sample", "6", "--seed", "1", "--restart")
        asked_sampled = len(times.requests) + len(days.requests) - asked
        evaluate("--strategies", "single", "--sample", "6", "--seed", "1")  # same sample: stored
        asked_again = len(times.requests) + len(days.requests) - asked - asked_sampled
    finally:
        times.close()
        days.close()
    assert table["single:times"]["accuracy"] == 0.5 == table["single:days"]["accuracy"]
    # The lookup table, learned per category on the other half, picks the right worker each time.
    # It pays for the one call it routes to.
    assert table["router"]["accuracy"] == 1.0 and table["router"]["model_calls"] == 16
    assert table["oracle"]["accuracy"] == 1.0
    # Two layers of both workers, then the aggregator: 5 calls a problem; the answer is the
    # aggregator's.
    assert table["moa"]["model_calls"] == 5 * 16
    # single: 16 calls each; moa: 2 layers each, and `days` aggregates (the default would be
    # the first worker, `times`).
    assert by_worker == (16 + 2 * 16, 16 + 3 * 16)
    # --sample 6 --seed 1: six problems, the same six the second time (nothing recomputed).
    assert {s["n"] for s in sampled.values()} == {6}
    assert asked_sampled == 12 and asked_again == 0
