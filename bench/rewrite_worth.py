"""What writing a failed program again earned, read from one eval run.

    git apply bench/results/program_rewrite.diff   # the rule, measured and not shipped
    .venv/bin/python bench/rewrite_worth.py RESULTS.jsonl FILE.jsonl [--traces DIR]

The rule (run/program_rewrite.py in the diff, 2026-12-02): where a plan ends in a program, its
run and a step reading both, three steps follow: the writer writes the program again shown
the tool's report, the tool runs it, the reading step reads the new pair; each is kept
without a call where the first run printed a result.

RESULTS.jsonl is an eval's results file (DATA_DIR/evals/<key>.jsonl) of `conductor eval mixed
FILE.jsonl --strategies conductor`; FILE.jsonl its questions. The planned steps of a run are
the same with or without the rule (each call's seed comes from its request), so the answer
the run would have given without it is the planned reading step's (step 2 of `W > python<0 >
W<0,1`, shaped by run/answer_form as the run's answer is): one run measures both, question by
question. Prints the questions where the rule fired (the first run failed, printed nothing or
found no program), right before and after, and the seconds the rule's calls took.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import read_jsonl

from conductor_cli.evals.datasets import load_mixed
from conductor_cli.evals.scoring import score
from conductor_cli.run.answer_form import as_asked
from conductor_cli.storage.trace import traces_dir

# The rewrite step's words begin so (run/program_rewrite.REWRITE in the diff).
REWRITE_STARTS = "Write the program from step "


def is_rewrite(task: str) -> bool:
    return task.startswith(REWRITE_STARTS) and "again so that it runs" in task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("questions", type=Path)
    parser.add_argument("--traces", type=Path, default=None)
    args = parser.parse_args()
    traces = args.traces or traces_dir()
    problems = {p.id: p for p in load_mixed(args.questions, "exact")}
    rows = [
        r
        for r in read_jsonl(args.results)
        if r.get("strategy") == "conductor" and not r.get("error")
    ]
    fired = fixed = broke = 0
    right_without = right_with = 0
    extra_s = 0.0
    for row in rows:
        problem = problems[row["problem_id"]]
        right_with += bool(row["correct"])
        trace = next(traces.glob(f"*{row['detail']['trace']}*.json"))
        steps = json.loads(trace.read_text(encoding="utf-8"))["steps"]
        rewrite = next((s for s in steps if is_rewrite(s["task"])), None)
        if rewrite is None or rewrite["source"] == "kept":
            right_without += bool(row["correct"])
            continue
        # The rule's steps come after the plan's: its last step (the reading step, or the
        # run where the plan has none) gave the answer the run would have given without it.
        before = as_asked(problem.question, steps[rewrite["index"] - 1]["output"])
        was, _, _ = score(problem, before, None)
        right_without += was
        fired += 1
        fixed += bool(row["correct"]) and not was
        broke += was and not row["correct"]
        extra_s += sum(s.get("seconds", 0.0) for s in steps[rewrite["index"] :])
        print(
            f"{row['problem_id']}: without {before.strip()[-40:]!r} ({'right' if was else 'wrong'})"
            f", with {row['answer'][-40:]!r} ({'right' if row['correct'] else 'wrong'})"
        )
    n = len(rows)
    print(
        f"{n} questions: right without the rule {right_without}, with it {right_with}; "
        f"fired on {fired} (fixed {fixed}, broke {broke}); its calls took {extra_s:.1f} s "
        f"({extra_s / max(n, 1):.2f} s a question)"
    )


if __name__ == "__main__":
    main()
