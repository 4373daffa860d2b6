"""Make the repair sets (issue 69, item 2): for each task of a public code set, one bug its
hidden tests catch, put into its canonical solution by a mutation operator
(conductor_cli/public/mutants.py), and written to conductor_cli/public/fix_sets.json.

    .venv/bin/python bench/make_fix_set.py [--check]

For each task: the canonical solution under its prompt must pass its tests in the sandbox;
then the swappable tokens of the solution (never of the prompt: the docstring and signature
stay as written) are tried in an order seeded by the task's id, and the first mutant that
compiles and fails the tests is kept. A task none of whose first 16 mutants fails is left
out. Nothing is chosen by any model's answer. `--check` makes it again and says whether the
shipped file is what it makes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

from conductor_cli.evals.answers import program_for
from conductor_cli.problems import Problem
from conductor_cli.public import load
from conductor_cli.public.mutants import apply, sites
from conductor_cli.sandbox import Sandbox

FIX_SETS = Path(__file__).resolve().parents[1] / "conductor_cli" / "public" / "fix_sets.json"
SOURCES = {"humaneval-fix": "humaneval"}
TRIES = 16


def passes(sandbox: Sandbox, source: str, problem: Problem) -> bool:
    return sandbox.run(program_for(source, problem)).passed


def one_bug(sandbox: Sandbox, problem: Problem) -> dict | None:
    source = problem.prompt + problem.answer
    if not passes(sandbox, source, problem):
        return None  # its own solution fails here: no bug can be told apart
    found = sites(source, after=len(problem.prompt))
    order = list(range(len(found)))
    random.Random(hashlib.sha256(problem.id.encode()).hexdigest()).shuffle(order)
    for i in order[:TRIES]:
        mutant = apply(source, found[i])
        try:
            compile(mutant, problem.id, "exec")
        except SyntaxError:
            continue
        if not passes(sandbox, mutant, problem):
            return {"site": i, "token": found[i].token, "mutant": found[i].mutant}
    return None


def make() -> dict:
    sandbox = Sandbox()
    made: dict = {}
    for name, source_set in SOURCES.items():
        items = {}
        problems = load(source_set, "test")
        for problem in problems:
            bug = one_bug(sandbox, problem)
            if bug is not None:
                items[problem.id] = bug
        made[name] = {
            "from": source_set,
            "made_by": "bench/make_fix_set.py",
            "tasks": len(problems),
            "items": items,
        }
        print(f"{name}: {len(items)} of {len(problems)} tasks with a bug their tests catch")
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    made = make()
    text = json.dumps(made, indent=1, sort_keys=True) + "\n"
    if args.check:
        same = FIX_SETS.read_text(encoding="utf-8") == text
        print("the shipped file is what this makes" if same else "the shipped file differs")
        return 0 if same else 1
    FIX_SETS.write_text(text, encoding="utf-8")
    print(f"wrote {FIX_SETS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
