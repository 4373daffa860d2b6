"""Score an eval's stored replies again with today's scorer (a fix to how answers are read,
such as MBPP's entry point, without calling any model again).

    .venv/bin/python bench/rescore.py RESULTS.jsonl SETS [--write OUT.jsonl]

RESULTS.jsonl is an eval's results file (DATA_DIR/evals/<key>.jsonl); SETS the public sets it
ran, as `conductor eval` named them (mbpp, humaneval+mbpp). Prints, per strategy, the right
answers before and after, and which problems changed; `--write` keeps the rescored rows.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from conductor_cli import public
from conductor_cli.evals.kinds import scoring_sandbox
from conductor_cli.evals.scoring import score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("sets")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    problems = {p.id: p for p in public.load(args.sets, "test")}
    sandbox = scoring_sandbox()
    before: dict[str, int] = defaultdict(int)
    after: dict[str, int] = defaultdict(int)
    changed: dict[str, list[str]] = defaultdict(list)
    rows = []
    for line in args.results.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        problem = problems.get(row.get("problem_id", ""))
        if "strategy" not in row or problem is None or row.get("error"):
            rows.append(row)
            continue
        right, answer, _ = score(problem, row.get("reply") or "", sandbox)
        strategy = row["strategy"]
        before[strategy] += bool(row["correct"])
        after[strategy] += right
        if right != bool(row["correct"]):
            changed[strategy].append(f"{problem.id} {'+' if right else '-'}")
        rows.append({**row, "correct": right, "answer": answer, "rescored": True})
    for strategy in before:
        print(f"{strategy}: {before[strategy]} -> {after[strategy]} right; {changed[strategy]}")
    if args.write:
        args.write.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
