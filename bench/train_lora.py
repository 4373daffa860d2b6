"""`conductor train --method expert-iteration | grpo` against the head, on the simulated
specialist pool of bench/train_head.py (a simulation: testing/simulated_pool.py), with the
embedded SmolLM2 conductor, on the same held-out questions.
Run: .venv/bin/python bench/train_lora.py [--train 48] [--held-out 100] [--methods ...] [--json]

For each method it prints the held-out curve (accuracy per kind after each round or
evaluation), what it cost (workflow samples, worker calls, minutes sampling and fitting) and
the export check. The head's row is trained on the same questions for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from _common import isolated_env, temp_root
from train_head import KINDS, skills, write

from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", type=int, default=48, help="training questions")
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--methods", default="head,expert-iteration,grpo")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = temp_root()
    os.environ.update(isolated_env(root))  # this process is the one that trains

    from conductor_cli.config.settings import load_config
    from conductor_cli.evals.datasets import load_qa
    from conductor_cli.train.head_method import train_head
    from conductor_cli.train.lora_method import train_lora
    from conductor_cli.train.shared import LoraOptions, TrainOptions

    per_kind = (args.train + args.held_out) // len(KINDS) + 1
    bank = make_questions(KINDS, per_kind, seed=args.seed)
    sim = SimulatedPool(bank, skills(), {"w3": {"chain": ("w0", 0.95)}})
    config = load_config(sim.config(root / "sim.toml"))
    ordered = list(bank.values())
    held = ordered[: args.held_out]
    data = write(held + ordered[args.held_out : args.held_out + args.train], root / "data.jsonl")
    problems = load_qa(data, "exact")
    held_ids = frozenset(f"q{q.number}" for q in held)
    report = []
    for method in args.methods.split(","):
        options = TrainOptions(
            name=f"bench-{method}",
            dataset="qa",
            seed=args.seed,
            force=True,
            lora=LoraOptions(
                iterations=args.iterations,
                epochs=args.epochs,
                samples=args.samples,
                steps=args.steps,
                eval_every=args.eval_every,
            ),
            evaluate_before=method != "head",
        )
        start = time.monotonic()
        if method == "head":
            record = train_head(config, problems, options, data_file=data, held_out_ids=held_ids)
        else:
            record = train_lora(
                config, problems, options, method, data_file=data, held_out_ids=held_ids
            )
        minutes = round((time.monotonic() - start) / 60, 1)
        row = {"method": method, "minutes": minutes, "record": record}
        report.append(row)
        print(f"{method}: {minutes} min", file=sys.stderr)
        (root / f"record-{method}.json").write_text(json.dumps(record, indent=2))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for row in report:
        record = row["record"]
        print(f"== {row['method']} ({row['minutes']} min)")
        for e in record.get("evaluations", []):
            print(f"  {e['when']}: {e['accuracy']:.3f} {e['by_category']} shapes {e['shapes']}")
        for entry in record.get("curve", []):
            held_out = entry.get("held_out")
            if held_out and isinstance(held_out, dict):
                when = entry.get("iteration", entry.get("step"))
                print(
                    f"  after {when}: {held_out['accuracy']:.3f} {held_out['by_category']} "
                    f"right_share {entry['right_share']} fitted {entry['fitted']}"
                )
        if "cost" in record:
            print(f"  cost: {record['cost']}; export check {record['export_check']['identical']}/5")
        if "reward_table" in record:
            table = record["reward_table"]
            print(f"  cost: {table['workflow_runs']} runs, {table['worker_calls']} calls")


if __name__ == "__main__":
    main()
