"""Training questions each run two ways in one process, the shipped team, cache off: what
bench/continue_check.py and bench/program_end.py share (the items, the alternating order,
the rows, right answers and seconds both ways, the questions whose answer changed).

The items are drawn from each set's training split with `--seed`, leaving out the 8
bench/train_public.py drew with seed 0 for the shipped training (BIG-bench: conductor's fixed
1 in 5 is the test part, never read here); `--file`'s questions (training questions of ours)
come after them. The order of the two ways alternates from question to question, so that
neither always finds the models warm. Run alone (llama.cpp)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from _common import drawn_outside, write_rows

from conductor_cli.api import RunOptions, RunResult, TraceOptions, execute
from conductor_cli.config import load_config
from conductor_cli.errors import ConductorError
from conductor_cli.evals import load_dataset, scoring
from conductor_cli.runtime import Runtime
from conductor_cli.storage.cache import CacheMode

Way = Callable[[str], AbstractContextManager[None]]  # a way's name -> the patch it runs under
Fields = Callable[[RunResult], dict[str, Any]]  # what a row keeps of a run beyond the answer


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--set", default="bbh:object_counting")
    parser.add_argument("--file", type=Path, help="a mixed file of training questions")
    parser.add_argument("--n", type=int, default=16, help="training items of each set")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--each", type=int, default=8, help="items the training drew (seed 0)")
    parser.add_argument("--out", type=Path)
    return parser.parse_args()


def training_problems(args: argparse.Namespace) -> list:
    problems = []
    for name in args.set.split("+"):
        training = load_dataset(name, None, split="train")
        problems += drawn_outside(training, args.n, args.seed, args.each)
    if args.file:
        problems += load_dataset("mixed", args.file)
    return problems


def one(problem: Any, runtime: Runtime, config: Any, patched: Any, fields: Fields) -> dict:
    with patched:
        try:
            run = execute(
                problem.question,
                config=config,
                options=RunOptions(cache_mode=CacheMode.OFF, seed=0),
                trace=TraceOptions(enabled=False),
                runtime=runtime,
            )
        except ConductorError as e:
            return {"right": False, "error": str(e)}
    right, _, _ = scoring.score(problem, run.answer, None)
    return {
        "right": right,
        "answer": run.answer,
        "seconds": round(run.seconds, 2),
        "shape": " > ".join(s.worker for s in run.steps),
        **fields(run),
    }


def both_ways(
    args: argparse.Namespace, names: tuple[str, str], way: Way, fields: Fields, shown: str
) -> list[dict]:
    """Every item run both ways (`names`: the old way first); a line per item with each way's
    right, seconds and `shown` field; then right answers and seconds a question both ways and
    the items whose rightness changed. The rows are written to `--out`."""
    config = load_config(None)
    problems = training_problems(args)
    runtime = Runtime(config)
    rows = []
    try:
        for k, p in enumerate(problems):
            order = names if k % 2 == 0 else names[::-1]
            row: dict[str, Any] = {"id": p.id, "category": p.category, "reference": p.answer}
            for name in order:
                row[name] = one(p, runtime, config, way(name), fields)
            rows.append(row)
            print(json.dumps({"id": p.id, **{n: (row[n]["right"], row[n].get("seconds"),
                                                 row[n].get(shown)) for n in order}}),
                  flush=True)  # fmt: skip
    finally:
        runtime.close()
    for name in names:
        right = sum(r[name]["right"] for r in rows)
        seconds = sum(r[name].get("seconds", 0.0) for r in rows) / len(rows)
        print(f"{name}: {right}/{len(rows)} right, {seconds:.2f} s a question")
    old, new = names
    flips = [(r["id"], r[old]["right"], r[new]["right"]) for r in rows
             if r[old]["right"] != r[new]["right"]]  # fmt: skip
    print(f"different: {flips}")
    if args.out:
        write_rows(rows, args.out)
    return rows


def plans_of_several_steps(rows: list[dict], name: str) -> list[dict]:
    return [r[name] for r in rows if r[name].get("shape", "").count(">")]
