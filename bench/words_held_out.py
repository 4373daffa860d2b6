"""Learned words against the words they replaced, on training questions their search never
saw (issue 68, item 7): the shipped conductor's two program shapes, `coder[program]` and the
learned `coder[program_steps]` (kept by `train --learn-words` for object counting, right on 7
of the 8 training questions it was chosen on against 5), run on other training items of the
kinds given, each question asked of both; right answers of each and the paired difference.

    .venv/bin/python bench/words_held_out.py [--set bbh:object_counting] [--n 24] [--seed 1]
        [--conductor coder-team-1.5b-public] [--out FILE]

The items are drawn from the set's training split (BIG-bench: conductor's fixed 1 in 5 is the
test part; never read here) with `--seed`, leaving out the `--each` items bench/train_public.py
drew with seed 0 for the shipped training. The embedded default team, the response cache as
configured. Run alone (llama.cpp)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import drawn_outside, write_rows

from conductor_cli.config import load_config
from conductor_cli.evals import load_dataset
from conductor_cli.policy.head import Head
from conductor_cli.policy.registry import find
from conductor_cli.train.rollout import Runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", default="bbh:object_counting")
    parser.add_argument("--n", type=int, default=24, help="held-out training items")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--each", type=int, default=8, help="items the training drew (seed 0)")
    parser.add_argument("--conductor", default="coder-team-1.5b-public")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = load_config(None)
    trained = find(args.conductor)
    if trained is None:
        raise SystemExit(f"{args.conductor}: no such trained conductor")
    head = Head.load(trained.head_path)
    pair = [s for s in head.shapes if s.workers == ("coder", "python", "coder")]
    if len(pair) != 2:
        raise SystemExit(f"{args.conductor}: expected two program shapes, found {len(pair)}")
    training = load_dataset(args.set, None, split="train")
    problems = drawn_outside(training, args.n, args.seed, args.each)
    rows = []
    runner = Runner(config, problems)
    try:
        for p in problems:
            row = {"id": p.id, "answer": p.answer}
            for shape in pair:
                run, right = runner.run(p, shape.workflow(), seed=0)
                row[shape.label] = {"right": right, "reply": run.answer if run else None}
            rows.append(row)
            said = {k: (v["right"] if isinstance(v, dict) else v) for k, v in row.items()}
            print(json.dumps(said), flush=True)
    finally:
        runner.close()
    for shape in pair:
        print(f"{shape.label}: {sum(r[shape.label]['right'] for r in rows)}/{len(rows)}")
    a, b = (sum(r[s.label]["right"] and not r[o.label]["right"] for r in rows)
            for s, o in (pair, pair[::-1]))  # fmt: skip
    print(f"right only with {pair[0].label}: {a}; only with {pair[1].label}: {b}")
    if args.out:
        write_rows(rows, args.out)


if __name__ == "__main__":
    main()
