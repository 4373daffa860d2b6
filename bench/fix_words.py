"""Whether a piped fix gains from words that send the coder to the file's docstrings (issue 69's
repair set), chosen on humaneval-fix items nobody reports: the README's repair figures are on
`--sample 100 --seed 0` of its 148; these are the other 48.

Why it may: the coder alone writes 112 of HumanEval's 164 functions right from their
docstrings, but fixes only 46 of 100 of the same functions given with one injected bug (`fix
this`, the file piped in): the buggy body anchors it (it returns the file unchanged, or
changes a line that was right). Told to make each function do what its docstring says, it
may write from the docstring and fix more.

One answer a task from the coder for each words (no tries after: they are the same for both
and come on top), scored on the task's hidden tests. Prints right answers and seconds a task
for each, and the tasks where they differ.

    .venv/bin/python bench/fix_words.py [--n 48] [--out FILE]

The embedded default team, the response cache as configured, 2 cores. Run alone (llama.cpp).

Decided before it first ran (2026-11-30), with both words below written then: the docstring
words are taken for piped fixes only if they turn at least 3 more of these tasks right than
the plain question does (the coder alone's own message); otherwise nothing changes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import drawn_outside, write_rows

from conductor_cli.config import load_config
from conductor_cli.evals import load_dataset, scoring
from conductor_cli.evals.strategies import single_workflow
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.train.rollout import Runner

DOCSTRING_WORDS = (
    "Reply with the whole file in one ```python block, each function written to do exactly "
    "what its name and docstring say (rewrite a function's body where it does not), keeping "
    "the names."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=48, help="tasks")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reported", type=int, default=100, help="seed-0 tasks left out")
    parser.add_argument("--worker", default="coder")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = load_config(None)
    problems = drawn_outside(load_dataset("humaneval-fix", None), args.n, args.seed, args.reported)
    words = {
        "plain": single_workflow(args.worker),
        "docstring": Workflow((Step(args.worker, DOCSTRING_WORDS),)),
    }
    rows = []
    runner = Runner(config, problems)
    try:
        for p in problems:
            row: dict[str, object] = {"id": p.id}
            for name, workflow in words.items():
                run, _ = runner.run(p, workflow, seed=0)
                if run is None:
                    row[name] = None
                    continue
                out = run.steps[-1].output
                right = scoring.score(p, out, runner.sandbox)[0]
                row[name] = {"right": right, "seconds": round(run.steps[-1].seconds, 2)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        runner.close()
    for name in words:
        done = [r[name] for r in rows if r[name] is not None]
        right = sum(d["right"] for d in done)  # type: ignore[index]
        seconds = sum(d["seconds"] for d in done) / max(len(done), 1)  # type: ignore[index]
        print(f"{name}: {right}/{len(rows)} right, {seconds:.1f} s a task, {len(done)} ran")
    differ = [
        (r["id"], r["plain"]["right"], r["docstring"]["right"])  # type: ignore[index]
        for r in rows
        if r["plain"] and r["docstring"] and r["plain"]["right"] != r["docstring"]["right"]  # type: ignore[index]
    ]
    print(f"differ: {differ}")
    if args.out:
        write_rows(rows, args.out)


if __name__ == "__main__":
    main()
