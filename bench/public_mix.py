"""The README's headline table (issue 57): public sets others wrote, on their test splits, for
the shipped team, each member alone, the fixed program-aided workflow, knn-router and the
oracle over members; accuracy with Wilson 95 % intervals per set, the team's paired
difference with its best member, seconds a question (cache off) and tokens.

    .venv/bin/python bench/public_mix.py [--sample 20] [--seed 0] [--results DIR]

Runs `conductor eval SETS --sample N --seed S --no-cache` on the embedded default (no config
file; the data dir is `--results`, kept so a second call resumes instead of rerunning), then
reads its stored results. Every row names its split: eval reads each set's test split
(CommonsenseQA's validation, the split it is scored on; BIG-bench tasks conductor's fixed 4 in
5). Run alone on an idle machine (llama.cpp).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from _common import CONDUCTOR, paired, stored_results, wilson

SETS = "gsm8k+arc-challenge+bbh:object_counting+bbh:date_understanding+nq-open"
STRATEGIES = "conductor,single,program:coder,knn-router,oracle"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=SETS)
    parser.add_argument("--sample", type=int, default=20, help="items of each set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategies", default=STRATEGIES)
    parser.add_argument("--results", type=Path, default=Path("/tmp/conductor-public-mix"))
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    env = dict(os.environ, CONDUCTOR_DATA_DIR=str(args.results), CONDUCTOR_SERVER_AUTO="0")
    out = args.results / "eval.json"
    command = [CONDUCTOR, "eval", args.sets, "--sample", str(args.sample), "--seed"]
    command += [str(args.seed), "--strategies", args.strategies, "--no-cache"]
    subprocess.run([*command, "--json-out", str(out)], env=env, check=True)
    table = build(stored_results(args.results))
    print(markdown(table))
    if args.json_out:
        args.json_out.write_text(json.dumps(table, indent=1), encoding="utf-8")


def build(rows: list[dict]) -> dict[str, object]:
    """Per strategy: right or wrong on each problem id, its seconds and tokens."""
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        if "strategy" in row:
            by[row["strategy"]][row["problem_id"]] = row
    ids = sorted(set.intersection(*(set(r) for r in by.values()))) if by else []
    sets = sorted({pid.split("/")[0] for pid in ids})
    table: dict[str, object] = {"n": len(ids), "sets": sets, "strategies": {}}
    for name, results in sorted(by.items()):
        ok = [bool(results[i]["correct"]) for i in ids]
        low, high = wilson(sum(ok), len(ok))
        per_set = {}
        for s in sets:
            mine = [bool(results[i]["correct"]) for i in ids if i.split("/")[0] == s]
            per_set[s] = f"{sum(mine)}/{len(mine)}"
        seconds = [results[i].get("seconds", 0.0) for i in ids]
        tokens = [results[i].get("tokens_in", 0) + results[i].get("tokens_out", 0) for i in ids]
        table["strategies"][name] = {  # type: ignore[index]
            "accuracy": round(sum(ok) / len(ok), 3),
            "low": round(low, 3),
            "high": round(high, 3),
            "per_set": per_set,
            "seconds": round(sum(seconds) / len(seconds), 1),
            "tokens": round(sum(tokens) / len(tokens)),
            "ok": ok,
        }
    strategies = table["strategies"]
    singles = [s for s in strategies if s.startswith("single:")]  # type: ignore[union-attr]
    if "conductor" in strategies and singles:  # type: ignore[operator]
        best = max(singles, key=lambda s: strategies[s]["accuracy"])  # type: ignore[index]
        table["best_member"] = best
        table["team_minus_best"] = paired(
            strategies["conductor"]["ok"],  # type: ignore[index]
            strategies[best]["ok"],  # type: ignore[index]
        )
    return table


def markdown(table: dict[str, object]) -> str:
    sets = table["sets"]
    lines = [
        "| strategy | all, 95 % interval | " + " | ".join(sets) + " | s / question | tokens |",  # type: ignore[arg-type]
        "| --- | --- |" + " --- |" * len(sets) + " ---: | ---: |",  # type: ignore[arg-type]
    ]
    for name, row in table["strategies"].items():  # type: ignore[union-attr]
        cells = " | ".join(row["per_set"][s] for s in sets)  # type: ignore[union-attr]
        interval = f"{row['accuracy']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"
        lines.append(f"| {name} | {interval} | {cells} | {row['seconds']} | {row['tokens']} |")
    if "team_minus_best" in table:
        d = table["team_minus_best"]
        lines.append(
            f"\nteam - best member ({table['best_member']}), paired over {table['n']} "
            f"questions: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"  # type: ignore[index]
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
