"""How should the team answer a multiple-choice question of a kind it never saw (issue 68,
item 4)? Measured on the TRAINING split of BIG-bench kinds that are neither the shipped head's
training kinds nor the eight kinds its leave-kinds-out table reports, so nothing here is
chosen on a reported item or kind.

    .venv/bin/python bench/unseen_choice.py [--each 10] [--seed 0] [--kinds A+B] [--out FILE]

Per question, each one-step workflow on the embedded default's workers (nothing simulated):
- `coder`: the coder told "Answer the question." (what the shipped head plans for such a
  question today: it reasons, then names a letter);
- `coder_short`: the coder told policy/words' `answer_short` (the letter, no reasoning);
- `local`: SmolLM2 told "Answer the question.".
Reported per kind and overall: right, seconds, and rules built from the three letters
(agreement of the coder's two answers, a majority of three).

Rule fixed before the second run (2026-12-01, after the first: 99 questions of the ten kinds
below, `--each 10 --seed 0`: coder 31, coder_short 29, local 28; 10.9, 1.5 and 0.8 s a
question): a multiple-choice question the team answers with a model alone is told
`answer_short` if, pooled over those 99 and the training items of the choice kinds the head
trained on or that no table reports (`--kinds arc-challenge+bbh:date_understanding+mmlu
--each 12`), `coder_short` minus `coder` is at least -0.03; else the words stay.
Outcome: 134 questions pooled (MMLU's last not run, the outcome settled), the coder 49,
`coder_short` 37, -0.090: the words stay (README, "A rule tried for such questions").
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

from _common import paired, read_jsonl, wilson

from conductor_cli.api import NO_TRACE, RunOptions, execute
from conductor_cli.config.settings import load_config
from conductor_cli.evals import scoring
from conductor_cli.policy import words
from conductor_cli.public import load
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.runtime import Runtime
from conductor_cli.storage.cache import CacheMode

# BIG-bench multiple-choice kinds neither trained on by the shipped head (ARC, object
# counting, date understanding, ...) nor among the eight withheld kinds it reports (seven are
# among train_public.py's BREADTH, whose head did not ship).
KINDS = (
    "bbh:disambiguation_qa",
    "bbh:snarks",
    "bbh:geometric_shapes",
    "bbh:movie_recommendation",
    "bbh:ruin_names",
    "bbh:logical_deduction/three_objects",
    "bbh:reasoning_about_colored_objects",
    "bbh:tracking_shuffled_objects/three_objects",
    "bbh:anachronisms",
    "bbh:strategyqa",
)
ARMS = {
    "coder": ("coder", words.ANSWER),
    "coder_short": ("coder", words.WORDS["answer_short"]),
    "local": ("local", words.ANSWER),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--each", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default="+".join(KINDS))
    ap.add_argument("--out", type=Path, default=Path("bench/results/unseen_choice_train.jsonl"))
    args = ap.parse_args()
    config = load_config(None)
    runtime = Runtime(config)
    rows = read_jsonl(args.out)
    done = {(r["id"], r["arm"]) for r in rows}
    for kind in args.kinds.split("+"):
        problems = load(kind, "train")
        random.Random(args.seed).shuffle(problems)
        for p in problems[: args.each]:
            for arm, (worker, task) in ARMS.items():
                if (p.id, arm) in done:
                    continue
                start = time.monotonic()
                run = execute(
                    p.question,
                    config=config,
                    workflow=Workflow((Step(worker, task),)),
                    options=RunOptions(CacheMode.USE),
                    trace=NO_TRACE,
                    runtime=runtime,
                )
                ok, letter, _ = scoring.score(p, run.answer, None)
                rows.append(
                    {
                        "kind": kind,
                        "id": p.id,
                        "arm": arm,
                        "gold": p.answer,
                        "letter": letter,
                        "correct": ok,
                        "seconds": round(time.monotonic() - start, 2),
                        "reply": run.answer[-300:],
                    }
                )
                with args.out.open("a", encoding="utf-8") as f:  # one whole line a row
                    f.write(json.dumps(rows[-1]) + "\n")
                print(kind, p.id, arm, letter, ok, rows[-1]["seconds"], flush=True)
    summarize(rows)


def summarize(rows: list[dict]) -> None:
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by[r["id"]][r["arm"]] = r
    items = [d for d in by.values() if len(d) == len(ARMS)]

    def rule_agree(d: dict) -> bool:  # the coder's two answers agree: theirs; else SmolLM2's
        a, b = d["coder"], d["coder_short"]
        return a["correct"] if a["letter"] == b["letter"] else d["local"]["correct"]

    def rule_majority(d: dict) -> bool:  # majority of three letters; none: the coder's short
        votes = Counter(d[a]["letter"] for a in ARMS)
        letter, n = votes.most_common(1)[0]
        return letter == d["coder"]["gold"] if n > 1 else d["coder_short"]["correct"]

    rules = {a: (lambda d, a=a: d[a]["correct"]) for a in ARMS}
    rules["agree_else_local"] = rule_agree
    rules["majority_of_3"] = rule_majority
    kinds = sorted({d["coder"]["kind"] for d in items})
    print(f"{len(items)} questions, {len(kinds)} kinds (training split)")
    print("rule".ljust(18), *(k.split(":")[-1][:10].ljust(10) for k in kinds), "all")
    for name, rule in rules.items():
        per = [sum(rule(d) for d in items if d["coder"]["kind"] == k) for k in kinds]
        n = sum(per)
        lo, hi = wilson(n, len(items))
        print(
            name.ljust(18),
            *(str(x).ljust(10) for x in per),
            f"{n}/{len(items)} [{lo:.2f},{hi:.2f}]",
        )
    for arm in ARMS:
        secs = sum(d[arm]["seconds"] for d in items) / max(1, len(items))
        print(f"{arm}: {secs:.1f} s a question")
    base = [d["coder"]["correct"] for d in items]
    for name in ("coder_short", "agree_else_local", "majority_of_3"):
        print(name, "minus coder", paired([rules[name](d) for d in items], base))


if __name__ == "__main__":
    main()
