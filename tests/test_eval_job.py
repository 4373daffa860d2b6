"""`evals.eval_job`: the eval a Python caller runs without the CLI (a fake remote pool): the
count of runs is known before any model, results come back summarized with their meta, and
a second run reuses the stored results unless asked to restart."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.errors import InputError
from conductor_cli.evals.eval_job import EvalRequest, evaluate, open_eval
from conductor_cli.testing.fake_openai import FakeOpenAIServer


def test_evaluate_runs_summarizes_and_resumes(tmp_path: Path) -> None:
    server = FakeOpenAIServer(["ok"], answer="Answer: 42")
    try:
        path = tmp_path / "config.toml"
        path.write_text(
            f"[[workers]]\nname = 'good'\nmodel = 'openai/fake'\napi_base = '{server.api_base}'\n",
            encoding="utf-8",
        )
        config = load_config(path)
        data = tmp_path / "qa.jsonl"
        data.write_text(
            "".join(json.dumps({"question": f"6 x 7? {i}", "answer": 42}) + "\n" for i in range(4)),
            encoding="utf-8",
        )
        request = EvalRequest("qa", data, scorer="numeric", strategies="single,oracle", limit=3)
        with pytest.raises(InputError, match="--aggregator nobody: no such worker"):
            open_eval(replace(request, aggregator="nobody"), config)
        assert not server.requests  # a bad request fails before any model

        session = open_eval(request, config)
        assert session.total == 3  # oracle is derived from single:good's stored results
        seen: list[tuple[str, bool]] = []
        outcome = session.run(on_result=lambda r, resumed: seen.append((r.strategy, resumed)))
        assert seen == [("single:good", False)] * 3
        assert [(s.strategy, s.n, s.accuracy) for s in outcome.summaries] == [
            ("single:good", 3, 1.0),
            ("oracle", 3, 1.0),
        ]
        assert (outcome.dataset, outcome.n_problems) == ("qa", 3)
        assert (outcome.resumed, outcome.computed) == (0, 3)
        assert outcome.meta["strategies"] == ["single:good", "oracle"]
        assert outcome.meta["pool"] == ["good"] and outcome.meta["file"] == str(data)
        assert outcome.meta["results"] == str(outcome.store_path)

        calls = len(server.requests)
        again = evaluate(request, config)
        assert (again.resumed, again.computed) == (3, 0) and len(server.requests) == calls
        restarted = evaluate(replace(request, restart=True), config)
        assert (restarted.resumed, restarted.computed) == (0, 3)
    finally:
        server.close()


def test_the_program_strategy_runs_what_the_model_wrote_in_the_python_tool(
    tmp_path: Path,
) -> None:
    """`program:W` (issue 57): W is asked in policy/words' words for a program, the real
    python tool runs it in the sandbox, and what it prints is the answer scored."""
    server = FakeOpenAIServer(["ok"], answer="Here:\n```python\nprint(6 * 7)\n```")
    try:
        path = tmp_path / "config.toml"
        worker = (
            f"[[workers]]\nname = 'good'\nmodel = 'openai/fake'\napi_base = '{server.api_base}'\n"
        )
        tool = "[[workers]]\nname = 'python'\nmodel = 'tool:python'\n"
        path.write_text(worker, encoding="utf-8")
        data = tmp_path / "qa.jsonl"
        data.write_text(json.dumps({"question": "6 x 7?", "answer": 42}) + "\n", encoding="utf-8")
        request = EvalRequest("qa", data, scorer="numeric", strategies="program")
        with pytest.raises(InputError, match="no python tool to run the program"):
            open_eval(request, load_config(path))
        path.write_text(worker + tool, encoding="utf-8")
        config = load_config(path)
        with pytest.raises(InputError, match="'python' is not a model of the pool"):
            open_eval(replace(request, strategies="program:python"), config)
        outcome = evaluate(replace(request, strategies="program,single:good"), config)
        accuracy = {s.strategy: s.accuracy for s in outcome.summaries}
        assert accuracy == {"program:good": 1.0, "single:good": 0.0}, accuracy
        asked = server.requests[0]["body"]["messages"][-1]["content"]
        assert "Write a Python program that computes the answer" in asked
    finally:
        server.close()
