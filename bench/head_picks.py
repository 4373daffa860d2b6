"""Which workflow a trained conductor's head picks for each test item of some sets, without
running any worker (issue 68): a head that picks one member for every question makes the team
that member, exactly (tests/test_same_call.py), so its accuracy needs no run to be known.

    .venv/bin/python bench/head_picks.py NAME SETS [--sample 20] [--seed 2]

NAME: a trained conductor (in the data dir of the environment: CONDUCTOR_DATA_DIR, as
bench/train_public.py prints its home); SETS: public sets joined by `+`. Reads each set's test
split, plans nothing but the head's choice (the familiarity gate included, as `ask` plans)."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys

from conductor_cli.config import load_config
from conductor_cli.evals import load_dataset, select
from conductor_cli.run.planner import plan_messages, worker_infos
from conductor_cli.runtime import Runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name")
    parser.add_argument("sets")
    parser.add_argument("--sample", type=int, default=20, help="test items of each set")
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args()
    config = load_config(None)
    config = dataclasses.replace(
        config, conductor=dataclasses.replace(config.conductor, model=args.name)
    )
    infos = worker_infos(config.workers)
    steps = config.conductor.max_steps
    every: collections.Counter[str] = collections.Counter()
    with Runtime(config) as runtime:
        chooser = runtime.chooser()
        if chooser is None:
            sys.exit(f"{args.name}: not a trained head")
        for name in args.sets.split("+"):
            problems = select(load_dataset(name, None), sample=args.sample, seed=args.seed)
            picks = collections.Counter(
                chooser.choose(plan_messages(p.question, infos, (), steps), p.question).label
                for p in problems
            )
            every.update(picks)
            print(f"{name}: {dict(picks)}", flush=True)
    print(f"all: {dict(every)}")


if __name__ == "__main__":
    main()
