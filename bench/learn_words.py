"""Learned words against fixed ones on a public set's held-out items (issue 57), real models.

    .venv/bin/python bench/learn_words.py --set bbh:date_understanding [--worker coder]
        [--train 20] [--test 40] [--rounds 2] [--per-round 2] [--seed 0]

The embedded default team. From the set's training split, `--train` items: conductor's
reflective search (conductor_cli/train/words.py) starts from "Answer the question.", asks the
worker itself for better words from its failures, and keeps words only where they are right
more often on those items. Then the starting words and the learned ones each answer the
same `--test` items of the set's test split (never seen in the search), and the paired
difference is printed with its 95 % interval. One step, the worker alone: the words are what
changes. Run alone on an idle machine (llama.cpp).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from _common import paired, wilson

from conductor_cli.api import RunOptions, TraceOptions, run_workflow
from conductor_cli.config.settings import Config
from conductor_cli.evals.records import Problem
from conductor_cli.evals.scoring import score
from conductor_cli.policy.words import ANSWER
from conductor_cli.public import load
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.runtime import Runtime
from conductor_cli.train.words import learn_words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", default="bbh:date_understanding")
    parser.add_argument("--worker", default="coder")
    parser.add_argument("--train", type=int, default=20)
    parser.add_argument("--test", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per-round", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    train = rng.sample(load(args.set, "train"), args.train)
    test = rng.sample(load(args.set, "test"), args.test)
    config = Config()
    runtime = Runtime(config)
    options = RunOptions(seed=args.seed)
    calls = {"runs": 0, "proposals": 0}

    def run(words: str, problem: Problem) -> tuple[bool, str]:
        calls["runs"] += 1
        workflow = Workflow((Step(args.worker, words),))
        result = run_workflow(
            workflow, problem.question, config=config, options=options,
            trace=TraceOptions(enabled=False), runtime=runtime,
        )  # fmt: skip
        return score(problem, result.answer, None)[0], result.answer

    def propose(prompt: str) -> str:
        calls["proposals"] += 1
        workflow = Workflow((Step(args.worker, prompt),))
        seeded = RunOptions(seed=args.seed + calls["proposals"])
        result = run_workflow(
            workflow, "Write the new instruction.", config=config, options=seeded,
            trace=TraceOptions(enabled=False), runtime=runtime,
        )  # fmt: skip
        return result.answer

    start = time.monotonic()
    search = learn_words(run, propose, train, ANSWER, rounds=args.rounds, per_round=args.per_round)
    learned = search.best
    minutes = (time.monotonic() - start) / 60
    for t in sorted(search.trials, key=lambda t: -t.reward):
        print(f"train {t.right}/{t.n} (round {t.round}): {t.words}")
    before = [run(ANSWER, p)[0] for p in test]
    after = [run(learned.words, p)[0] for p in test] if learned.words != ANSWER else before
    report = {
        "set": args.set,
        "worker": args.worker,
        "train_items": args.train,
        "test_items": args.test,
        "search_minutes": round(minutes, 1),
        "calls": calls,
        "learned": learned.words,
        "fixed_test": _rate(before),
        "learned_test": _rate(after),
        "learned_minus_fixed": paired(after, before),
    }
    print(json.dumps(report, indent=1))
    runtime.close()


def _rate(ok: list[bool]) -> dict[str, object]:
    low, high = wilson(sum(ok), len(ok))
    return {"right": sum(ok), "n": len(ok), "low": round(low, 3), "high": round(high, 3)}


if __name__ == "__main__":
    sys.exit(main())
