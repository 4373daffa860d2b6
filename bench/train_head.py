"""`conductor train --method head` on a simulated specialist pool where the right policy is
known (a simulation: conductor_cli/testing/simulated_pool.py), with the embedded SmolLM2 conductor.
Run: .venv/bin/python bench/train_head.py [--train 24,48,96,160] [--held-out 100] [--json]

Pool: w0..w3 with identical descriptions. Kinds: arith (w0's), words (w1's), geo (w2's),
logic (w3's): the specialist is right 95 %, the others 20 %; chain: w0 alone 50 %, w3 95 %
when it sees w0's attempt and 10 % alone, the others 10 %, so only the chain w0 > w3<0 reaches
95 %. The dataset rows carry the kind as `category` for this report only: the head reads the
conductor's hidden state of the planning prompt, never the category.

For each training size it trains a head (2 runs per question and shape, 36 shapes) and scores
the trained conductor on the same held-out questions through the planning path `ask` uses. The
references come from every single worker and the chain run on the held-out questions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from _common import isolated_env, temp_root

from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions

KINDS = ["arith", "words", "geo", "logic", "chain"]
SPECIALIST = {"arith": "w0", "words": "w1", "geo": "w2", "logic": "w3"}


def skills() -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for w in ("w0", "w1", "w2", "w3"):
        row = {k: (0.95 if SPECIALIST[k] == w else 0.2) for k in SPECIALIST}
        row["chain"] = 0.5 if w == "w0" else 0.1
        table[w] = row
    return table


def write(questions: list, path: Path) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for q in questions:
            row = {"id": f"q{q.number}", "question": q.text, "answer": q.answer, "category": q.kind}
            out.write(json.dumps(row) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", default="24,48,96,160", help="training sizes (questions)")
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = temp_root()
    os.environ.update(isolated_env(root))  # this process is the one that trains

    from conductor_cli.config.settings import load_config
    from conductor_cli.evals.datasets import load_qa
    from conductor_cli.policy.shapes import Shape
    from conductor_cli.train.head_method import train_head
    from conductor_cli.train.rollout import Runner
    from conductor_cli.train.shared import TrainOptions

    sizes = [int(s) for s in args.train.split(",")]
    per_kind = (max(sizes) + args.held_out) // len(KINDS) + 1
    bank = make_questions(KINDS, per_kind, seed=args.seed)
    sim = SimulatedPool(bank, skills(), {"w3": {"chain": ("w0", 0.95)}})
    config = load_config(sim.config(root / "sim.toml"))
    ordered = list(bank.values())
    held = ordered[: args.held_out]
    held_problems = load_qa(write(held, root / "held.jsonl"), "exact")

    # References on the held-out questions: every single worker, and the chain.
    runner = Runner(config, held_problems)
    candidates = [Shape((w,), ((),)) for w in ("w0", "w1", "w2", "w3")]
    candidates.append(Shape(("w0", "w3"), ((), (0,))))
    right: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for p in held_problems:
        for shape in candidates:
            _, ok = runner.run(p, shape.workflow(), config.conductor.seed)
            right[shape.label][p.category or ""].append(ok)
    runner.close()

    def acc(label: str, kind: str | None = None) -> float:
        rows = right[label]
        values = rows[kind] if kind else [v for vs in rows.values() for v in vs]
        return float(np.mean(values))

    singles = {w: acc(w) for w in ("w0", "w1", "w2", "w3")}
    best_single = max(singles, key=singles.__getitem__)
    table_by_kind = {k: max(acc(w, k) for w in singles) for k in KINDS}
    counts = {k: len(right["w0"][k]) for k in KINDS}
    lookup = sum(table_by_kind[k] * counts[k] for k in KINDS) / len(held_problems)
    chaining_table = {k: max(table_by_kind[k], acc("w0 > w3<0", k)) for k in KINDS}
    lookup_chain = sum(chaining_table[k] * counts[k] for k in KINDS) / len(held_problems)
    results = []
    before = None
    for n in sizes:
        train_rows = ordered[args.held_out : args.held_out + n]
        data = write(held + train_rows, root / f"data-{n}.jsonl")
        problems = load_qa(data, "exact")
        start = time.monotonic()
        record = train_head(
            config,
            problems,
            TrainOptions(
                name=f"sim-{n}",
                dataset="qa",
                seed=args.seed,
                evaluate_before=before is None,
                force=True,
            ),
            data_file=data,
            held_out_ids=frozenset(p.id for p in held_problems),
        )
        minutes = (time.monotonic() - start) / 60
        evaluations = {e["when"]: e for e in record["evaluations"]}
        if before is None:
            before = evaluations["before"]
        results.append(
            {
                "training_questions": record["dataset"]["training"],
                "held_out": record["dataset"]["held_out"],
                "workflow_runs": record["reward_table"]["workflow_runs"],
                "worker_calls": record["reward_table"]["worker_calls"],
                "minutes": round(minutes, 1),
                "after": evaluations["after"],
            }
        )
        print(f"trained on {n}: {evaluations['after']['accuracy']:.3f}", file=sys.stderr)
    report = {
        "held_out": len(held_problems),
        "untrained": before,
        "best_single": {"worker": best_single, "accuracy": round(singles[best_single], 3)},
        "singles": {w: round(a, 3) for w, a in singles.items()},
        "singles_by_kind": {w: {k: round(acc(w, k), 3) for k in KINDS} for w in singles},
        "lookup_table_single_workers_told_kind": round(lookup, 3),
        "lookup_table_by_kind": {k: round(v, 3) for k, v in table_by_kind.items()},
        "lookup_table_with_chain_told_kind": round(lookup_chain, 3),
        "chain_w0_w3_on_chain_kind": round(acc("w0 > w3<0", "chain"), 3),
        "trained": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"held-out questions: {len(held_problems)} ({counts})")
    print(f"untrained conductor: {before['accuracy']:.3f} {before['by_category']}")
    print(f"best single worker ({best_single}): {singles[best_single]:.3f}; all: {singles}")
    print(f"lookup table told the kind: {lookup:.3f}; may also chain: {lookup_chain:.3f}")
    for r in results:
        a = r["after"]
        print(
            f"trained on {r['training_questions']}: {a['accuracy']:.3f} {a['by_category']} "
            f"shapes {a['shapes']} | {r['workflow_runs']} runs, {r['worker_calls']} calls, "
            f"{r['minutes']} min"
        )


if __name__ == "__main__":
    main()
