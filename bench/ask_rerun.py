"""`conductor ask` end to end: the original run of a 3-step workflow against its fully cached
rerun, and the peak memory of the original run against the GGUF file's size.

The conductor decides the number of steps; the bench asks (pool of three workers, max_steps 3,
conductor temperature 1.0) with seed after seed until a plan has 3 steps, in a fresh cache, then
asks the same again. SmolLM2 copies its prompt's 2-step example (0 of 12 seeds gave 3 steps
here), so after --max-tries the bench keeps the last plan and also measures `conductor run`
with a hand-written 3-step workflow, original against cached rerun.

Run: .venv/bin/python bench/ask_rerun.py [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from _common import CONDUCTOR, isolated_env, median, must, report, temp_root, timed

CONFIG = """\
[conductor]
max_steps = 3
temperature = 1.0

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

QUESTION = (
    "A train leaves at 3 pm at 60 km/h; another leaves at 4 pm at 90 km/h. When does the second "
    "catch up? Solve it, check the solution, then write the final answer."
)


WORKFLOW = {
    "steps": [
        {"worker": "solver", "task": "Solve the problem step by step.", "sees": []},
        {"worker": "checker", "task": "Check the solution for mistakes.", "sees": [0]},
        {"worker": "writer", "task": "Write the corrected final answer.", "sees": [0, 1]},
    ]
}


def rerun_row(cmd: list[str], env: dict[str, str], first: Any, what: str, runs: int) -> dict:
    reruns = [must(timed(cmd, env), "rerun") for _ in range(runs)]
    calls = {json.loads(r.stdout)["totals"]["model_calls"] for r in reruns}
    rerun = median([r.seconds for r in reruns])
    ratio = rerun / first.seconds
    return {
        "what": f"fully cached rerun of {what} (median of {runs})",
        "figure": f"{rerun:.2f} s = {ratio:.3f} x, model calls {sorted(calls)}",
        "reference": f"the original run: {first.seconds:.2f} s",
        "target": "<= 0.1 x and < 1 s",
        "ok": ratio <= 0.1 and rerun < 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--max-tries", type=int, default=4)
    args = parser.parse_args()
    from conductor_cli.models.catalog import load_catalog, resolve_gguf

    size = resolve_gguf("smollm2-135m-instruct", load_catalog(), "bench").path.stat().st_size
    for seed in range(args.max_tries):
        env = isolated_env(temp_root(), CONFIG)
        cmd = [CONDUCTOR, "ask", "--json", "--seed", str(seed), QUESTION]
        first = must(timed(cmd, env), "ask")
        steps = len(json.loads(first.stdout)["workflow"]["steps"])
        if steps == 3:
            break
        print(f"(seed {seed}: a {steps}-step plan; trying the next seed)", file=sys.stderr)
    rows = [rerun_row(cmd, env, first, f"a {steps}-step ask", args.runs)]
    if steps != 3:
        wf = temp_root() / "three.json"
        wf.write_text(json.dumps(WORKFLOW), encoding="utf-8")
        env = isolated_env(temp_root(), CONFIG)
        cmd = [CONDUCTOR, "run", "--json", str(wf), QUESTION]
        rows.append(rerun_row(cmd, env, must(timed(cmd, env), "run"), "a 3-step run", args.runs))
    budget_kb = (1.5 * size + 250e6) / 1024
    report(
        [
            *rows,
            {
                "what": "peak RSS of the first ask above (one model for conductor and steps)",
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
