"""A step whose program the python tool runs stops once its program block closes, against
generating on (issue 68's seconds): what the 1.5B coder writes after its program is its guess
of what the program prints ("When you run this program, it will output: ```Answer: 3```"),
which no step reads. The same plans of the shipped conductor on the same training questions,
each run both ways in one process, the cache off; right answers, seconds a question, the
program step's seconds and tokens, both ways.

    .venv/bin/python bench/program_end.py [--set bbh:object_counting] [--n 16] [--seed 5]
        [--file bench/data/typed_train24.jsonl] [--out FILE]

`on`: what ships (Request.stop_after_program, sandbox/fences.program_end). `off`: the
generation goes on to the model's end (program_end patched to find no end). The items are drawn
from each set's training split with `--seed`, leaving out the 8 bench/train_public.py drew
with seed 0 for the shipped training; `--file`'s questions (training questions of ours) come
after them. The order of the two alternates from question to question. The embedded default
team. Run alone (llama.cpp)."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import drawn_outside, write_rows

import conductor_cli.backends.llamacpp as llamacpp
from conductor_cli.api import RunOptions, TraceOptions, execute
from conductor_cli.config import load_config
from conductor_cli.errors import ConductorError
from conductor_cli.evals import load_dataset, scoring
from conductor_cli.runtime import Runtime
from conductor_cli.storage.cache import CacheMode

ORIGINAL = llamacpp.program_end


@contextlib.contextmanager
def way(name: str) -> Iterator[None]:
    if name == "off":
        llamacpp.program_end = lambda text: None
    try:
        yield
    finally:
        llamacpp.program_end = ORIGINAL


def one(problem: Any, runtime: Runtime, config: Any, name: str) -> dict[str, Any]:
    with way(name):
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
    first = run.steps[0]
    return {
        "right": right,
        "answer": run.answer,
        "seconds": round(run.seconds, 2),
        "shape": " > ".join(s.worker for s in run.steps),
        "first_seconds": round(first.seconds, 2),
        "first_tokens_out": first.tokens_out,
        "first_output": first.output,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", default="bbh:object_counting")
    parser.add_argument("--file", type=Path, help="a mixed file of training questions")
    parser.add_argument("--n", type=int, default=16, help="training items of each set")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--each", type=int, default=8, help="items the training drew (seed 0)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = load_config(None)
    problems = []
    for name in args.set.split("+"):
        training = load_dataset(name, None, split="train")
        problems += drawn_outside(training, args.n, args.seed, args.each)
    if args.file:
        problems += load_dataset("mixed", args.file)
    runtime = Runtime(config)
    rows = []
    try:
        for k, p in enumerate(problems):
            order = ("off", "on") if k % 2 == 0 else ("on", "off")
            row: dict[str, Any] = {"id": p.id, "category": p.category, "reference": p.answer}
            for name in order:
                row[name] = one(p, runtime, config, name)
            rows.append(row)
            print(json.dumps({"id": p.id, **{n: (row[n]["right"], row[n].get("seconds"),
                                                 row[n].get("first_tokens_out")) for n in order}}),
                  flush=True)  # fmt: skip
    finally:
        runtime.close()
    for name in ("off", "on"):
        right = sum(r[name]["right"] for r in rows)
        seconds = sum(r[name].get("seconds", 0.0) for r in rows) / len(rows)
        multi = [r[name] for r in rows if r[name].get("shape", "").count(">")]
        first = sum(m["first_seconds"] for m in multi) / len(multi) if multi else 0.0
        tokens = sum(m["first_tokens_out"] for m in multi) / len(multi) if multi else 0.0
        print(f"{name}: {right}/{len(rows)} right, {seconds:.2f} s a question; the program step "
              f"of a plan of several steps {first:.2f} s, {tokens:.0f} tokens ({len(multi)} "
              "plans)")  # fmt: skip
    flips = [(r["id"], r["off"]["right"], r["on"]["right"]) for r in rows
             if r["off"]["right"] != r["on"]["right"]]  # fmt: skip
    print(f"different: {flips}")
    if args.out:
        write_rows(rows, args.out)


if __name__ == "__main__":
    main()
