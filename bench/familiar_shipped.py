"""What nearness to its training questions alone says about the shipped conductor (issue 68,
item 4): could a threshold on it tell the kinds the head never saw from those it did?

    .venv/bin/python bench/familiar_shipped.py [--model coder] [--sets bbh:navigate+...]

Rebuilds the 114 training questions of `models/conductors/coder-team-1.5b-public` (those of
`bench/train_public.py --each 8 --team-kinds`, seed 0; checked against its record's dataset
fingerprint) and embeds each bare question (policy/familiar.QuestionEmbedder) with SmolLM2
(the head's base) or the coder (`--model coder`). Its reward table was not kept, so the
threshold here is the one that best tells each training question's nearest other question
("seen") from its nearest question of another kind ("withheld"), each kind weighed the same:
nearness alone, no reward (`conductor train` weighs rewards: train/familiar_fit.py). Then,
for each set of `--sets` (20 test items each, seed 1; nothing here is chosen on them) or
JSONL file, the share that threshold calls familiar and the training kind nearest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from _common import REPO, isolated_env, temp_root, write_rows
from train_public import PUBLIC, own_rows, team_rows

SHIPPED = REPO / "models" / "conductors" / "coder-team-1.5b-public"
UNSEEN = (
    "bbh:navigate+bbh:sports_understanding+bbh:word_sorting+bbh:temporal_sequences+"
    "bbh:causal_judgment+bbh:penguins_in_a_table+bbh:word_unscrambling+openbookqa"
)
TRAINED = "arc-challenge+bbh:object_counting+bbh:date_understanding+gsm8k"


def training_problems(root: Path) -> list:
    from conductor_cli.evals import load_dataset, select

    rows = [r for r in own_rows(8, 0) if r["category"] in ("wordmath", "letters")] + team_rows()
    problems = load_dataset("mixed", write_rows(rows, root / "own.jsonl"), "numeric")
    more = {"arc-challenge": 24}
    for name in PUBLIC:
        drawn = select(load_dataset(name, None, split="train"), sample=more.get(name, 8), seed=0)
        problems += list(drawn)
    return problems


def nearness_threshold(seen: np.ndarray, withheld: np.ndarray, kinds: list[str]) -> float:
    labels = np.asarray(kinds)
    values = np.unique(np.concatenate([seen, withheld]))
    best, best_t = -1.0, float(values[0])
    for t in (values[1:] + values[:-1]) / 2:
        score = np.mean(
            [
                (np.mean(seen[labels == k] >= t) + np.mean(withheld[labels == k] < t)) / 2
                for k in dict.fromkeys(kinds)
            ]
        )
        if score > best + 1e-12:
            best, best_t = float(score), float(t)
    return best_t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("base", "coder"), default="base")
    parser.add_argument("--sets", default=f"{UNSEEN}+{TRAINED}+bench/data/typed_letters.jsonl")
    args = parser.parse_args()
    root = temp_root()
    os.environ.update(isolated_env(root, None))

    from conductor_cli.config.settings import CODER_MODEL
    from conductor_cli.evals import load_dataset, select
    from conductor_cli.evals.datasets import fingerprint
    from conductor_cli.models.catalog import load_catalog, resolve_gguf
    from conductor_cli.policy.familiar import QuestionEmbedder, centered
    from conductor_cli.train.familiar_fit import nearest_scores

    record = json.loads((SHIPPED / "record.json").read_text(encoding="utf-8"))
    problems = training_problems(root)
    if fingerprint(problems) != record["dataset"]["fingerprint"]:
        print("the rebuilt training questions are not the ones the head trained on")
        return 1
    name = record["base_model"] if args.model == "base" else CODER_MODEL.removeprefix("gguf:")
    embed = QuestionEmbedder(resolve_gguf(name, load_catalog(), "model").path)
    try:
        x = embed.many([p.question for p in problems])
        kinds = [p.category or "" for p in problems]
        center = x.mean(axis=0)
        points = centered(x, center)
        seen, withheld = nearest_scores(points, kinds)
        t = nearness_threshold(seen, withheld, kinds)
        labels = np.asarray(kinds)
        print(f"{name}: threshold {t:.3f} (nearness alone, leave-kinds-out on training)")
        for k in dict.fromkeys(kinds):
            print(
                f"  trained {k:24s} seen known {np.mean(seen[labels == k] >= t):.2f}  "
                f"withheld known {np.mean(withheld[labels == k] >= t):.2f}"
            )
        for set_name in args.sets.split("+"):
            if set_name.endswith(".jsonl"):
                asked = load_dataset("mixed", REPO / set_name, "exact")
            else:
                asked = select(load_dataset(set_name, None, split="test"), sample=20, seed=1)
            s = centered(embed.many([p.question for p in asked]), center) @ points.T
            nearest = Counter(labels[s.argmax(axis=1)]).most_common(2)
            print(
                f"  test {set_name:30s} n={len(asked):2d} known {np.mean(s.max(1) >= t):.2f}  "
                f"median nearness {np.median(s.max(1)):.2f}  nearest kinds {nearest}"
            )
    finally:
        embed.close()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
