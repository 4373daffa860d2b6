"""Evaluation summaries: the confidence interval, per-strategy totals, tables and files; and the
stored form of a result."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conductor_cli.evals.records import Result
from conductor_cli.evals.report import (
    COLUMNS,
    Summary,
    markdown_table,
    plain_table,
    summarize,
    table,
    wilson,
    write_csv,
    write_json,
)


def _result(strategy: str, pid: str, correct: bool, **kw: Any) -> Result:
    fields: dict[str, Any] = {
        "category": None,
        "answer": "A",
        "reply": "Answer: A",
        "tokens_in": 100,
        "tokens_out": 20,
        "cost": 0.0,
        "model_calls": 1,
        "seconds": 2.0,
    }
    fields.update(kw)
    return Result(strategy=strategy, problem_id=pid, correct=correct, **fields)


# --- wilson -----------------------------------------------------------------------------------


def test_wilson_known_values() -> None:
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4)
    assert high == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert wilson(0, 0) == (0.0, 1.0)


def test_wilson_narrows_with_more_trials_and_rejects_nonsense() -> None:
    small = wilson(5, 10)
    large = wilson(500, 1000)
    assert large[1] - large[0] < small[1] - small[0]
    with pytest.raises(ValueError):
        wilson(11, 10)
    with pytest.raises(ValueError):
        wilson(-1, 10)


# --- summarize --------------------------------------------------------------------------------


def test_summarize_per_strategy_in_order() -> None:
    results = [
        _result("single:big", "p1", True, cost=0.01, tokens_in=50, tokens_out=50, seconds=1.0),
        _result("single:big", "p2", False, cost=0.03, tokens_in=150, tokens_out=50, seconds=3.0),
        _result("conductor", "p1", True, cost=None, model_calls=3),
        _result("conductor", "p2", True, error=None),
        _result("conductor", "p3", False, error="timeout", model_calls=0),
    ]
    big, conductor, vote = summarize(results, ["single:big", "conductor", "vote:small"])
    assert big == Summary(
        strategy="single:big",
        n=2,
        correct=1,
        accuracy=0.5,
        ci_low=pytest.approx(wilson(1, 2)[0]),
        ci_high=pytest.approx(wilson(1, 2)[1]),
        tokens_total=300,
        tokens_mean=150.0,
        cost=pytest.approx(0.04),
        model_calls=2,
        seconds_total=4.0,
        seconds_mean=2.0,
        errors=0,
    )
    assert (conductor.n, conductor.correct, conductor.errors) == (3, 2, 1)
    assert conductor.cost is None  # one unknown price makes the total unknown
    assert conductor.model_calls == 4
    assert conductor.accuracy == pytest.approx(2 / 3)
    # A strategy asked for but not run yet still gets a row.
    assert (vote.strategy, vote.n, vote.accuracy, vote.cost) == ("vote:small", 0, 0.0, 0.0)


def test_summarize_counts_a_retried_problem_once_and_keeps_unlisted_strategies() -> None:
    results = [
        _result("moa", "p1", False, error="server down"),
        _result("oracle", "p1", True),
        _result("moa", "p1", True),  # the resumed run's retry
    ]
    summaries = summarize(results, ["moa"])
    assert [s.strategy for s in summaries] == ["moa", "oracle"]
    moa = summaries[0]
    assert (moa.n, moa.correct, moa.errors) == (1, 1, 0)


# --- tables -----------------------------------------------------------------------------------


def _summaries() -> list[Summary]:
    return summarize(
        [
            _result("conductor", "p1", True, cost=None),
            _result("single:local", "p1", True, cost=0.0),
            _result("single:gpt|x", "p1", False, cost=0.0123),
        ],
        ["conductor", "single:local", "single:gpt|x"],
    )


def test_rich_table_has_the_columns_and_cost_marks() -> None:
    t = table(_summaries())
    assert len(t.columns) == len(COLUMNS)
    assert t.row_count == 3
    cost_cells = list(t.columns[COLUMNS.index("cost $")].cells)
    assert cost_cells == ["?", "0", "0.0123"]
    # Whole on an 80-column terminal: no header or cell cut short.
    console = Console(width=80, record=True)
    console.print(t)
    text = console.export_text()
    assert "single:local" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_plain_table_is_tab_separated() -> None:
    lines = plain_table(_summaries()).splitlines()
    assert lines[0].split("\t") == list(COLUMNS)
    rows = [line.split("\t") for line in lines[1:]]
    assert [len(r) for r in rows] == [len(COLUMNS)] * 3
    assert rows[0][:4] == ["conductor", "1", "100.0", "20.7-100.0"]
    assert rows[0][COLUMNS.index("cost $")] == "?"


def test_markdown_table_escapes_pipes() -> None:
    lines = markdown_table(_summaries()).splitlines()
    assert lines[0] == "| " + " | ".join(COLUMNS) + " |"
    assert lines[1].startswith("| --- | ---: |")
    assert len(lines) == 5
    assert "single:gpt\\|x" in lines[4]
    assert all(line.count(" | ") == len(COLUMNS) - 1 for line in lines)


# --- files ------------------------------------------------------------------------------------


def test_write_json_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "out" / "summary.json"
    summaries = _summaries()
    write_json(path, summaries, {"dataset": "mcq10", "fingerprint": "abc"})
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["meta"] == {"dataset": "mcq10", "fingerprint": "abc"}
    assert data["strategies"] == [s.to_dict() for s in summaries]
    assert data["strategies"][0]["cost"] is None
    assert sorted(p.name for p in path.parent.iterdir()) == ["summary.json"]  # no temp left


def test_write_csv_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "summary.csv"
    path.write_text("old", encoding="utf-8")
    summaries = _summaries()
    write_csv(path, summaries)
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(summaries[0].to_dict())
    assert [r["strategy"] for r in rows] == ["conductor", "single:local", "single:gpt|x"]
    assert rows[0]["cost"] == ""
    assert float(rows[2]["cost"]) == pytest.approx(0.0123)
    assert float(rows[2]["ci_high"]) == pytest.approx(summaries[2].ci_high)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "home") == ["summary.csv"]


def test_summary_to_dict_keys() -> None:
    assert list(_summaries()[0].to_dict()) == [
        "strategy",
        "n",
        "correct",
        "accuracy",
        "ci_low",
        "ci_high",
        "tokens_total",
        "tokens_mean",
        "cost",
        "model_calls",
        "seconds_total",
        "seconds_mean",
        "errors",
    ]


# --- stored results ---------------------------------------------------------------------------


def test_result_round_trips_through_json() -> None:
    result = _result("vote:w", "HumanEval/0", True, cost=None, detail={"votes": {"A": 2}})
    line = json.dumps(result.to_dict())
    assert Result.from_dict(json.loads(line)) == result


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"strategy": None}, TypeError),
        ({"correct": 1}, TypeError),
        ({"tokens_in": True}, TypeError),
        ({"tokens_out": -1}, ValueError),
        ({"cost": "free"}, TypeError),
        ({"seconds": -0.5}, ValueError),
        ({"detail": []}, TypeError),
        ({"category": 3}, TypeError),
    ],
)
def test_result_from_dict_rejects_bad_shapes(change: dict[str, Any], error: type) -> None:
    d = {**_result("s", "p", True).to_dict(), **change}
    with pytest.raises(error):
        Result.from_dict(d)


def test_result_from_dict_needs_every_key_but_detail_and_error() -> None:
    d = _result("s", "p", True).to_dict()
    del d["detail"], d["error"]
    assert Result.from_dict(d).detail == {}
    del d["tokens_in"]
    with pytest.raises(KeyError):
        Result.from_dict(d)
