"""Is the default conductor right at least as often as one plain call? (issue 32, part 3)

`conductor eval qa FILE --scorer contains --strategies conductor,single:local` on the embedded
default (SmolLM2-135M as conductor and as the one worker `local`), for each set of short
factual questions and each seed (`conductor.seed`: the plan's and the steps' sampling seeds;
seed 0 is the default, the others come from a config file holding only that line):

- tests/data/facts20.jsonl and bench/data/facts_check20.jsonl: the sets the worker messages
  were chosen on (bench/worker_messages.py);
- bench/data/facts_after30.jsonl: 30 questions of other kinds too (science, people, counting,
  geography), written after the messages were chosen.

Reported: right answers per strategy, the paired difference conductor - single:local with a
95 % interval (normal approximation over the per-question differences, all seeds pooled), and
the workflow sizes the conductor planned.

Run alone on an idle machine (llama.cpp; ~25 min): .venv/bin/python bench/default_vs_single.py
  [--seeds 0,1,2] [--sets a.jsonl,b.jsonl] [--conductor "step_penalty = 1"] [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from pathlib import Path
from typing import Any

from _common import CONDUCTOR, REPO, isolated_env, must, temp_root, timed

SETS = [
    REPO / "tests" / "data" / "facts20.jsonl",
    REPO / "bench" / "data" / "facts_check20.jsonl",
    REPO / "bench" / "data" / "facts_after30.jsonl",
]


def evaluate(data: Path, seed: int, extra: str = "") -> dict[str, Any]:
    lines = ([f"seed = {seed}"] if seed else []) + ([extra] if extra else [])
    config = "[conductor]\n" + "\n".join(lines) + "\n" if lines else None
    env = isolated_env(temp_root(), config)
    out = temp_root() / "eval.json"
    must(
        timed(
            [CONDUCTOR, "eval", "qa", str(data), "--scorer", "contains", "--strategies",
             "conductor,single:local", "--json-out", str(out), "-q"],
            env,
        ),
        f"eval {data.name} seed {seed}",
    )  # fmt: skip
    doc = json.loads(out.read_text(encoding="utf-8"))
    steps = collections.Counter()
    results = Path(env["CONDUCTOR_DATA_DIR"]) / "evals"
    for line in (p for f in results.glob("*.jsonl") for p in f.read_text().splitlines()):
        row = json.loads(line)
        if row["strategy"] == "conductor":
            steps[row.get("detail", {}).get("steps", 0)] += 1
    return {"correct": doc["correct"], "steps": dict(steps)}


def paired(a: list[bool], b: list[bool]) -> tuple[float, float, float]:
    d = [int(x) - int(y) for x, y in zip(a, b, strict=True)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    half = 1.96 * math.sqrt(var / n)
    return mean, mean - half, mean + half


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sets", default=",".join(str(s) for s in SETS))
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--conductor", default="", help='more [conductor] lines, e.g. "step_penalty = 1.0"'
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    table: dict[str, Any] = {}
    print("| set | seed | conductor | single:local | conductor's steps |")
    print("| --- | ---: | ---: | ---: | --- |")
    for data in (Path(s) for s in args.sets.split(",")):
        cond: list[bool] = []
        single: list[bool] = []
        for seed in seeds:
            got = evaluate(data, seed, args.conductor)
            c, s = got["correct"]["conductor"], got["correct"]["single:local"]
            ids = sorted(c)
            cond += [c[i] for i in ids]
            single += [s[i] for i in ids]
            sizes = ", ".join(f"{k}: {v}" for k, v in sorted(got["steps"].items()))
            print(
                f"| {data.name} | {seed} | {sum(c.values())}/{len(c)} | "
                f"{sum(s.values())}/{len(s)} | {sizes} |",
                flush=True,
            )
            table[f"{data.name}@{seed}"] = got
        mean, low, high = paired(cond, single)
        print(
            f"| {data.name} | all | {sum(cond)}/{len(cond)} | {sum(single)}/{len(single)} | "
            f"difference {mean:+.3f} [{low:+.3f}, {high:+.3f}] |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(table, indent=2), encoding="utf-8")
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
