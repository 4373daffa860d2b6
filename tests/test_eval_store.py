"""The eval result store: a line torn by a killed run is skipped, and the next line is whole."""

from __future__ import annotations

from pathlib import Path

from conductor_cli.evals.records import Result
from conductor_cli.evals.store import ResultStore


def result(problem_id: str) -> Result:
    return Result(
        strategy="single:local",
        problem_id=problem_id,
        category=None,
        correct=True,
        answer="B",
        reply="The answer is B.",
        tokens_in=10,
        tokens_out=5,
        cost=0.0,
        model_calls=1,
        seconds=0.5,
    )


def test_a_torn_last_line_is_skipped_and_does_not_swallow_the_next(tmp_path: Path) -> None:
    path = tmp_path / "evals" / "key.jsonl"
    store = ResultStore(path, {"dataset": "mcq"})
    store.add(result("q1"))
    store.add(result("q2"))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 20])  # killed in the middle of writing q2

    again = ResultStore(path, {"dataset": "mcq"})
    assert len(again) == 1 and again.get("single:local", "q2") is None
    again.add(result("q2"))
    again.add(result("q3"))

    last = ResultStore(path, {"dataset": "mcq"})
    assert len(last) == 3
    assert last.get("single:local", "q2") == result("q2")
    assert path.read_bytes().endswith(b"\n")
