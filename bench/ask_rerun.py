"""`conductor ask` end to end: the original run of a 3-step workflow against its fully cached
rerun, and the peak memory of the original run against the GGUF file's size.

The conductor decides the number of steps; the bench asks questions from a list (pool of three
workers, max_steps 3) until one gets a 3-step plan, in a fresh cache, then asks it again.

Run: .venv/bin/python bench/ask_rerun.py [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from _common import CONDUCTOR, isolated_env, median, must, report, temp_root, timed

CONFIG = """\
[conductor]
max_steps = 3

[[workers]]
name = "solver"
model = "gguf:smollm2-135m-instruct"
description = "solves the problem step by step"

[[workers]]
name = "checker"
model = "gguf:smollm2-135m-instruct"
description = "checks a solution for mistakes and corrects it"

[[workers]]
name = "writer"
model = "gguf:smollm2-135m-instruct"
description = "writes the final answer clearly and briefly"
"""

QUESTIONS = [
    "Write a Python function that checks whether a number is prime.",
    "Solve, check and then write up: what is 12 squared minus 5?",
    "A train leaves at 3 pm at 60 km/h; another at 4 pm at 90 km/h. When does the second "
    "catch up? Solve it, check it, then state the answer.",
    "Draft a polite email declining a meeting, review its tone, then give the final version.",
    "Explain recursion, find a flaw in your explanation, then rewrite it.",
    "List three uses of graphite, verify each, then summarise.",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from conductor_cli.catalog import load_catalog, resolve_gguf

    size = resolve_gguf("smollm2-135m-instruct", load_catalog(), "bench").path.stat().st_size
    for question in QUESTIONS:
        env = isolated_env(temp_root(), CONFIG)
        cmd = [CONDUCTOR, "ask", "--json", question]
        first = must(timed(cmd, env), "ask")
        steps = len(json.loads(first.stdout)["workflow"]["steps"])
        if steps == 3:
            break
        print(f"({steps}-step plan for {question!r}; trying the next question)", file=sys.stderr)
    else:
        sys.exit("no question got a 3-step plan; add questions")
    reruns = [must(timed(cmd, env), "rerun") for _ in range(args.runs)]
    calls = {json.loads(r.stdout)["totals"]["model_calls"] for r in reruns}
    rerun = median([r.seconds for r in reruns])
    ratio = rerun / first.seconds
    budget_kb = (1.5 * size + 250e6) / 1024
    report(
        [
            {
                "what": f"fully cached rerun of a 3-step ask (median of {args.runs})",
                "figure": f"{rerun:.2f} s = {ratio:.3f} x, model calls {sorted(calls)}",
                "reference": f"the original run: {first.seconds:.2f} s",
                "target": "<= 0.1 x and < 1 s",
                "ok": ratio <= 0.1 and rerun < 1.0,
            },
            {
                "what": "peak RSS of that original ask (conductor + 3 local steps, one model)",
                "figure": f"{first.max_rss_kb / 1024:.0f} MiB = "
                f"{first.max_rss_kb * 1024 / size:.2f} x the GGUF file",
                "reference": f"GGUF file {size / 2**20:.0f} MiB; "
                f"budget 1.5 x file + 250 MB = {budget_kb / 1024:.0f} MiB",
                "target": "<= 1.5 x file + 250 MB",
                "ok": first.max_rss_kb <= budget_kb,
            },
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
