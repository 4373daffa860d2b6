"""A step that sees its own worker's program and the program's run, continuing that worker's
conversation, against the layout it replaced (issue 68's seconds): the same plans of the
shipped conductor on the same training questions, each run both ways in one process, the
cache off; right answers, seconds a question and the reading step's seconds, both ways.

    .venv/bin/python bench/continue_check.py [--set bbh:object_counting] [--n 16]
        [--seed 5] [--file bench/data/typed_train24.jsonl] [--out FILE]

`before`: each step seen comes as "Step j (worker): task" and its output, and every local
call reads its prompt whole (backends/llamacpp.continues patched to False, no `own`
messages). `after`: what ships (run/messages.step_messages with `own`). The items are drawn
from each set's training split with `--seed`, leaving out the 8 bench/train_public.py drew
with seed 0 for the shipped training (BIG-bench: conductor's fixed 1 in 5 is the test part,
never read here); `--file`'s questions (training questions of ours) come after them. The
order of the two alternates from question to question, so that neither always finds the models
warm. The embedded default team. Run alone (llama.cpp)."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import drawn_outside, write_rows

import conductor_cli.backends.llamacpp as llamacpp
import conductor_cli.run.engine as engine
from conductor_cli.api import RunOptions, TraceOptions, execute
from conductor_cli.config import load_config
from conductor_cli.errors import ConductorError
from conductor_cli.evals import load_dataset, scoring
from conductor_cli.runtime import Runtime
from conductor_cli.storage.cache import CacheMode

ORIGINAL_MESSAGES = engine.step_messages
ORIGINAL_CONTINUES = llamacpp.continues


@contextlib.contextmanager
def layout(name: str) -> Iterator[None]:
    if name == "before":

        def messages(*args: Any, own: Any = None, **kwargs: Any) -> Any:
            return ORIGINAL_MESSAGES(*args, **kwargs)

        engine.step_messages = messages
        llamacpp.continues = lambda *a: False
    try:
        yield
    finally:
        engine.step_messages = ORIGINAL_MESSAGES
        llamacpp.continues = ORIGINAL_CONTINUES


def one(problem: Any, runtime: Runtime, config: Any, name: str) -> dict[str, Any]:
    with layout(name):
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
    last = run.steps[-1]
    return {
        "right": right,
        "answer": run.answer,
        "seconds": round(run.seconds, 2),
        "shape": " > ".join(s.worker for s in run.steps),
        "last_seconds": round(last.seconds, 2),
        "last_tokens_in": last.tokens_in,
        "last_output": last.output,
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
            order = ("before", "after") if k % 2 == 0 else ("after", "before")
            row: dict[str, Any] = {"id": p.id, "category": p.category, "reference": p.answer}
            for name in order:
                row[name] = one(p, runtime, config, name)
            rows.append(row)
            print(json.dumps({"id": p.id, **{n: (row[n]["right"], row[n].get("seconds"),
                                                 row[n].get("last_seconds")) for n in order}}),
                  flush=True)  # fmt: skip
    finally:
        runtime.close()
    for name in ("before", "after"):
        right = sum(r[name]["right"] for r in rows)
        seconds = sum(r[name].get("seconds", 0.0) for r in rows) / len(rows)
        multi = [r[name]["last_seconds"] for r in rows if r[name].get("shape", "").count(">")]
        last = sum(multi) / len(multi) if multi else 0.0
        print(f"{name}: {right}/{len(rows)} right, {seconds:.1f} s a question; last step "
              f"of a plan of several steps {last:.1f} s ({len(multi)} plans)")  # fmt: skip
    flips = [(r["id"], r["before"]["right"], r["after"]["right"]) for r in rows
             if r["before"]["right"] != r["after"]["right"]]  # fmt: skip
    print(f"different: {flips}")
    if args.out:
        write_rows(rows, args.out)


if __name__ == "__main__":
    main()
