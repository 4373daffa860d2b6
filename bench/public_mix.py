"""The README's headline table (issue 57): public sets others wrote, on their test splits, for
the shipped team, each member alone, the fixed program-aided workflow, knn-router and the
oracle over members; accuracy with Wilson 95 % intervals per set, the team's paired
difference with its best member, seconds a question (cache off) and tokens.

    .venv/bin/python bench/public_mix.py [--sample 50] [--seed 0] [--results DIR] [--cache]

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
# The shipped conductor, each member alone, the fixed program-aided workflow, the lookup
# table, the oracle over members and the untrained conductor (SmolLM2 writing the workflow).
STRATEGIES = "conductor,single,program:coder,knn-router,oracle,conductor:smollm2-135m-instruct"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=SETS)
    parser.add_argument("--sample", type=int, default=50, help="items of each set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategies", default=STRATEGIES)
    parser.add_argument("--results", type=Path, default=Path("/tmp/conductor-public-mix"))
    parser.add_argument("--json-out", type=Path)
    parser.add_argument(
        "--cache",
        action="store_true",
        help="share identical runs between strategies (much faster; a reused run counts 0 s)",
    )
    parser.add_argument("--team", default="conductor", help="the strategy that is the team")
    parser.add_argument(
        "--report-only", action="store_true", help="read the stored results, run nothing"
    )
    args = parser.parse_args()
    if not args.report_only:
        env = dict(os.environ, CONDUCTOR_DATA_DIR=str(args.results), CONDUCTOR_SERVER_AUTO="0")
        out = args.results / "eval.json"
        command = [CONDUCTOR, "eval", args.sets, "--sample", str(args.sample), "--seed"]
        command += [str(args.seed), "--strategies", args.strategies]
        command += [] if args.cache else ["--no-cache"]
        subprocess.run([*command, "--json-out", str(out)], env=env, check=True)
    # A set's ids may be spelled otherwise than its name (HumanEval/0 for `humaneval`).
    wanted = {name.lower() for name in args.sets.split("+")}
    rows = [
        r
        for r in stored_results(args.results)
        if r.get("problem_id", "").split("/")[0].lower() in wanted
    ]
    table = build(rows, args.team)
    print(markdown(table))
    if args.json_out:
        args.json_out.write_text(json.dumps(table, indent=1), encoding="utf-8")


def build(rows: list[dict], team: str = "conductor") -> dict[str, object]:
    """Per strategy: right or wrong on each problem id, its seconds and tokens, on the
    questions the team answered (a strategy measured on fewer, as the untrained conductor may
    be, is shown on its own); the team's paired differences with each other strategy."""
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        if "strategy" not in row:
            continue
        # The same run stored by two evals (a mix, then one of its sets): the one that ran it
        # keeps its seconds, the other was served by the response cache.
        seen = by[row["strategy"]].get(row["problem_id"])
        if seen is None or row.get("seconds", 0.0) > seen.get("seconds", 0.0):
            by[row["strategy"]][row["problem_id"]] = row
    ids = sorted(by.get(team, {}))
    sets = sorted({pid.split("/")[0] for pid in ids})
    table: dict[str, object] = {"n": len(ids), "sets": sets, "team": team, "strategies": {}}
    for name, results in sorted(by.items()):
        mine = [i for i in ids if i in results] or sorted(results)
        table["strategies"][name] = _row(results, mine, sets)  # type: ignore[index]
    strategies: dict[str, dict] = table["strategies"]  # type: ignore[assignment]
    singles = [s for s in strategies if s.startswith("single:")]
    if team in strategies and singles:
        best = max(singles, key=lambda s: strategies[s]["accuracy"])
        table["best_member"] = best
        table["paired"] = {
            other: paired(
                [bool(by[team][i]["correct"]) for i in ids],
                [bool(by[other][i]["correct"]) for i in ids],
            )
            for other in strategies
            if other != team and all(i in by[other] for i in ids)
        }
    return table


def _row(results: dict[str, dict], ids: list[str], sets: list[str]) -> dict[str, object]:
    ok = [bool(results[i]["correct"]) for i in ids]
    low, high = wilson(sum(ok), len(ok))
    per_set = {}
    for s in sets:
        got = [bool(results[i]["correct"]) for i in ids if i.split("/")[0] == s]
        per_set[s] = f"{sum(got)}/{len(got)}" if got else "-"
    seconds = [results[i].get("seconds", 0.0) for i in ids]
    tokens = [results[i].get("tokens_in", 0) + results[i].get("tokens_out", 0) for i in ids]
    return {
        "n": len(ids),
        "accuracy": round(sum(ok) / len(ok), 3),
        "low": round(low, 3),
        "high": round(high, 3),
        "per_set": per_set,
        "seconds": round(sum(seconds) / len(seconds), 1),
        "tokens": round(sum(tokens) / len(tokens)),
    }


def markdown(table: dict[str, object]) -> str:
    sets: list[str] = table["sets"]  # type: ignore[assignment]
    lines = [
        "| strategy | n | all, 95 % interval | " + " | ".join(sets) + " | s / question | tokens |",
        "| --- | ---: | --- |" + " --- |" * len(sets) + " ---: | ---: |",
    ]
    for name, row in table["strategies"].items():  # type: ignore[union-attr]
        cells = " | ".join(row["per_set"][s] for s in sets)
        interval = f"{row['accuracy']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"
        lines.append(
            f"| {name} | {row['n']} | {interval} | {cells} | {row['seconds']} | {row['tokens']} |"
        )
    if "paired" in table:
        lines.append(f"\n{table['team']} minus each, paired over {table['n']} questions:")
        for other, d in table["paired"].items():  # type: ignore[union-attr]
            lines.append(f"- {other}: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
