"""Whether a piped fix gains when a try after failed examples is shown the file's outline (its
documented functions without their bodies: tools/outline.py) instead of the whole buggy file,
chosen on the humaneval-fix items nobody reports: the README's repair figures are on `--sample
100 --seed 0` of its 148; these are the other 48 (those of bench/fix_words.py).

Why it may: the coder alone writes 112 of HumanEval's 164 functions right from their
docstrings but fixes only 46 of 100 with one bug injected; a try written again is shown what
failed but, until now, the buggy body again, which anchors it (bench/fix_words.py: told to
write from the docstrings with the body in sight, it copied the file, bug and all).

Each task runs the team's steps for it (`retry:coder`: the coder's answer, then the examples
run and written again where they fail, conductor.code_retries times), scored on its hidden
tests. One arm a run: `--arm before` with the package of the commit before the change on
PYTHONPATH, `--arm outline` with this tree's; then `--compare BEFORE OUTLINE` prints both and
the decision.

    PYTHONPATH=/tmp/before .venv/bin/python bench/fix_outline.py --arm before --out B.jsonl
    .venv/bin/python bench/fix_outline.py --arm outline --out O.jsonl
    .venv/bin/python bench/fix_outline.py --compare B.jsonl O.jsonl

The embedded default team, the response cache as configured (the coder's first answers are
those bench/fix_words.py's plain arm cached), 2 cores. Run alone (llama.cpp).

Decided before it first ran (2026-11-30), with the outline's words (tools/outline.OUTLINED)
written then: the outline is kept for tries only if it turns at least 3 more of these 48
tasks right than the whole file does; otherwise the change is reverted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import drawn_outside, write_rows

import conductor_cli
from conductor_cli.config import load_config
from conductor_cli.evals import load_dataset, scoring
from conductor_cli.evals.strategies import retry_workflow


def run_arm(args: argparse.Namespace) -> None:
    config = load_config(None)
    problems = drawn_outside(load_dataset("humaneval-fix", None), args.n, args.seed, args.reported)
    workflow = retry_workflow(config, args.worker)
    print(f"arm {args.arm}: package {Path(conductor_cli.__file__).parent}", flush=True)
    from conductor_cli.train.rollout import Runner

    rows = []
    runner = Runner(config, problems)
    try:
        for p in problems:
            run, _ = runner.run(p, workflow, seed=0)
            row: dict[str, object] = {"id": p.id, "arm": args.arm}
            if run is None:
                row["right"] = None
            else:
                steps = run.steps
                row["right"] = scoring.score(p, steps[-1].output, runner.sandbox)[0]
                row["first_right"] = scoring.score(p, steps[0].output, runner.sandbox)[0]
                tries = [s for s in steps[2::2] if s.source != "kept"]
                row["tries"] = len(tries)
                row["tries_seconds"] = round(sum(s.seconds for s in tries), 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        runner.close()
    if args.out:
        write_rows(rows, args.out)
    done = [r for r in rows if r["right"] is not None]
    print(f"{args.arm}: {sum(bool(r['right']) for r in done)}/{len(rows)} right, {len(done)} ran")


def compare(before_file: Path, outline_file: Path) -> None:
    def read(path: Path) -> dict[str, dict]:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return {r["id"]: r for r in rows}

    before, outlined = read(before_file), read(outline_file)
    ids = [i for i in before if i in outlined]
    for name, rows in (("before", before), ("outline", outlined)):
        right = sum(bool(rows[i]["right"]) for i in ids)
        first = sum(bool(rows[i].get("first_right")) for i in ids)
        tries = sum(rows[i].get("tries", 0) for i in ids)
        seconds = sum(rows[i].get("tries_seconds", 0.0) for i in ids) / max(len(ids), 1)
        print(
            f"{name}: {right}/{len(ids)} right (first answers {first}), {tries} tries, "
            f"{seconds:.1f} s of tries a task"
        )
    gained = [i for i in ids if outlined[i]["right"] and not before[i]["right"]]
    lost = [i for i in ids if before[i]["right"] and not outlined[i]["right"]]
    print(f"gained {len(gained)}: {gained}")
    print(f"lost {len(lost)}: {lost}")
    keep = len(gained) - len(lost) >= 3
    print("decision: " + ("keep the outline" if keep else "revert (fewer than 3 more right)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arm", choices=("before", "outline"))
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "OUTLINE"))
    parser.add_argument("--n", type=int, default=48, help="tasks")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reported", type=int, default=100, help="seed-0 tasks left out")
    parser.add_argument("--worker", default="coder")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
    elif args.arm:
        run_arm(args)
    else:
        parser.error("give --arm or --compare")


if __name__ == "__main__":
    main()
