"""How many steps does the default conductor plan, by conductor.step_penalty? (issue 32)

The embedded default conductor (SmolLM2-135M, temperature 0.2) plans, and only plans, every
question of the factual sets (tests/data/facts20.jsonl, bench/data/facts_check20.jsonl,
bench/data/facts_after30.jsonl) and the 20 varied questions of bench/copy_rate.py (facts,
arithmetic, code, writing, translation, reasoning), once per penalty; reported: the share of
one-step plans per group and the mean step count. The penalty only moves the step count: the
tasks are the conductor's own either way.

Run alone (llama.cpp; ~5 min): .venv/bin/python bench/step_penalty.py [--penalties 0,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

from _common import REPO, temp_root

SETS = {
    "facts (70)": [
        REPO / "tests" / "data" / "facts20.jsonl",
        REPO / "bench" / "data" / "facts_check20.jsonl",
        REPO / "bench" / "data" / "facts_after30.jsonl",
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--penalties", default="0,2,4,8")
    args = parser.parse_args()
    from conductor_cli.disk import paths

    os.environ["CONDUCTOR_MODELS_DIR"] = str(paths.models_dir())
    root = temp_root()
    os.environ["CONDUCTOR_CACHE_DIR"] = str(root / "cache")
    os.environ["XDG_CONFIG_HOME"] = str(root / "xdg")
    os.environ.pop("CONDUCTOR_CONFIG", None)
    sys.path.insert(0, str(REPO / "bench"))
    from copy_rate import QUESTIONS

    from conductor_cli.api import plan_question
    from conductor_cli.run.planner import worker_infos
    from conductor_cli.runtime import Runtime

    groups = {
        "facts (70)": [
            json.loads(line)["question"]
            for f in SETS["facts (70)"]
            for line in f.read_text(encoding="utf-8").splitlines()
        ],
        "varied (20)": QUESTIONS,
    }
    runtime = Runtime()
    backend = runtime.raw_conductor(runtime.config)
    infos = worker_infos(runtime.config.workers)
    print("| step_penalty | " + " | ".join(f"{g}: one step, mean steps" for g in groups) + " |")
    print("| ---: |" + " --- |" * len(groups))
    for penalty in (float(p) for p in args.penalties.split(",")):
        config = replace(
            runtime.config, conductor=replace(runtime.config.conductor, step_penalty=penalty)
        )
        cells = []
        for questions in groups.values():
            sizes = [
                len(plan_question(backend, config, q, (), infos, lambda e: None).workflow.steps)
                for q in questions
            ]
            one = sum(1 for n in sizes if n == 1) / len(sizes)
            cells.append(f"{one:.0%}, {sum(sizes) / len(sizes):.2f}")
        print(f"| {penalty:g} | " + " | ".join(cells) + " |", flush=True)
    runtime.close()


if __name__ == "__main__":
    main()
