"""Train the shipped conductor for public sets (issue 57, part 3): the embedded default team's
head, trained on the training splits of public sets and on everyday kinds of our own, never on
a test item; then measured by bench/public_mix.py on the sets' test splits.

    .venv/bin/python bench/train_public.py [--each 8] [--root DIR] [--out NAME]

The pool is the embedded default team word for word (SmolLM2 `local`, Qwen2.5-Coder-1.5B
`coder`, the python tool), planned by the untrained SmolLM2. The training questions, `--each`
of every kind (seeded):
- arc: ARC-Challenge's validation split; objects, dates: BIG-bench object_counting and
  date_understanding, conductor's fixed 1-in-5 training split (public/sets.py);
- wordmath: grade-school word problems of three to five steps, generated here from templates
  (GSM8K ships no training split in the package; none of its items is used), 1.5x `--each`;
- letters: letter, vowel and length counts of words that are not in bench/data/letters.jsonl
  (the 20 held-out letter questions of the README);
- facts, trivia, everyday: bench/team_questions.py's kinds (short facts a chat model knows and
  open requests: what the team already serves, so the head keeps sending them to the coder).
Then `conductor train` with the head method in process, as `--shapes` (SHAPES below)
`--search all --repeats 1 --tasks fixed` (every shape run once on every question; the steps
keep the words the rewards were measured with), the trained conductor saved under ROOT/data
as `--out`. Run alone on an idle machine (llama.cpp).

`--also bbh:qa_wikidata` adds `--each` training items of more public sets (issue 68: short
facts ending in the "Answer:" line, as NQ-open's test items do, where no trained kind had that
line but programs'). Breadth (issue 68): `--breadth K` adds K training items of each of
BREADTH's 36 BIG-bench tasks (conductor's training split); WITHHELD's eight kinds are never
read here (their test items are the leave-kinds-out proof). With 12 kinds or more the head's
fit is validated on whole kinds withheld and weighs its readings of the question (the prompt,
the question bare, the coder's embedding of it: docs/train.md, step 4).
`--round-robin --max-calls N` orders the questions a kind at a time, so a budget that stops
the measuring has measured every kind alike (the runs not bought are estimated from like
questions, as the adaptive search does).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

from _common import REPO, isolated_env, split_by_kind, team_config, write_rows
from team_questions import KINDS, everyday, facts, kind_of, questions, row_id, trivia

from conductor_cli.config.settings import DEFAULT_MODEL

PUBLIC = ("arc-challenge", "bbh:object_counting", "bbh:date_understanding")
# The workflows the head chooses among, and in what words (policy/words.py): a member alone;
# the coder's program run by the python tool, asked in the plain words (the engine adds its
# request for a program) or in the program words; and that program's output read again by
# the coder, who corrects a failed or wrong program.
SHAPES = (
    "local",
    "coder",
    "coder > python<0",
    "coder[program] > python[run]<0",
    "coder[program] > python[run]<0 > coder[check]<0,1",
)
LETTERS_HELD = REPO / "bench" / "data" / "letters.jsonl"
# Kinds no training here ever reads (issue 68's leave-kinds-out proof is measured on their test
# items; bench/familiar_shipped.py's eight, named before any breadth training).
WITHHELD = (
    "bbh:navigate", "bbh:sports_understanding", "bbh:word_sorting", "bbh:temporal_sequences",
    "bbh:causal_judgment", "bbh:penguins_in_a_table", "bbh:word_unscrambling", "openbookqa",
)  # fmt: skip
# BIG-bench tasks for breadth (`--breadth`): English tasks of one task.json with at least 6
# training and 20 test items under conductor's 1-in-5 split and prompts under 700 characters
# (a median), chosen by those rules and for variety (knowledge, logic, language, arithmetic,
# symbols) before anything was measured on them; none of WITHHELD.
BREADTH = (
    "anachronisms", "analytic_entailment", "auto_categorization", "chinese_remainder_theorem",
    "code_line_description", "common_morpheme", "disambiguation_qa", "emoji_movie",
    "empirical_judgments", "entailed_polarity", "epistemic_reasoning", "fantasy_reasoning",
    "general_knowledge", "geometric_shapes", "hyperbaton", "implicatures",
    "logical_fallacy_detection", "mathematical_induction", "matrixshapes", "metaphor_boolean",
    "misconceptions", "movie_recommendation", "odd_one_out", "operators", "physical_intuition",
    "physics", "qa_wikidata", "riddle_sense", "ruin_names", "simple_arithmetic_json", "snarks",
    "social_iqa", "strategyqa", "tense", "winowhy", "formal_fallacies_syllogisms_negation",
)  # fmt: skip
# Words for letter questions of training, none in bench/data/letters.jsonl.
LETTER_WORDS = [
    "butterfly", "cucumber", "kangaroo", "hippopotamus", "tomorrow", "coffee", "address",
    "cinnamon", "dessert", "grammar", "vacuum", "broccoli", "pineapple", "refrigerator",
    "umbrella", "alphabet", "calendar", "dictionary", "elephant", "engineering", "galaxy",
    "harmony", "jellyfish", "lollipop", "marshmallow", "noodle", "penguin", "mountain",
    "rhinoceros", "seventeen", "telephone", "volleyball", "watermelon", "yesterday",
]  # fmt: skip
NAMES = ["Maria", "James", "Aisha", "Tom", "Lena", "Carlos", "Priya", "Ben", "Sofia", "Omar"]


def _wordmath(rng: random.Random) -> tuple[str, int]:
    """One grade-school word problem of three to five steps (percentages, fractions, rates,
    "twice as many", overtime, leftovers), harder than one operation, and its whole-number
    answer; drawn again where the numbers would not divide evenly."""
    while True:
        made = _WORDMATH[rng.randrange(len(_WORDMATH))](rng, rng.choice(NAMES))
        if made is not None:
            return made


def _shirts(rng: random.Random, name: str) -> tuple[str, int] | None:
    p, a, b = rng.randint(12, 30), 4 * rng.randint(5, 15), 25 * rng.randint(1, 3)
    c = rng.randint(3, p - 2)
    tue = a + a * b // 100
    if tue % 2:
        return None
    return (f"A store sells shirts for ${p} each. It sells {a} shirts on Monday, {b}% more on "
            "Tuesday than on Monday, and half as many on Wednesday as on Tuesday. Each shirt "
            f"costs the store ${c} to make. What is the store's profit over the three days?",
            (a + tue + tue // 2) * (p - c))  # fmt: skip


def _running(rng: random.Random, name: str) -> tuple[str, int] | None:
    x, w = rng.randint(2, 9), rng.randint(2, 8)
    question = (f"{name} runs {x} miles every weekday, twice as far on Saturday, and rests on "
                f"Sunday. How many miles does {name} run in {w} weeks?")  # fmt: skip
    return question, (5 * x + 2 * x) * w


def _tank(rng: random.Random, name: str) -> tuple[str, int] | None:
    g, r = 40 * rng.randint(5, 20), rng.randint(6, 15)
    m, leak = rng.randint(5, 20), rng.randint(1, 5)
    return (f"A tank holds {g} gallons and is one quarter full. A pump adds {r} gallons a "
            f"minute for {m} minutes while a leak drains {leak} gallons a minute. How many "
            "gallons are in the tank then?", g // 4 + (r - leak) * m)  # fmt: skip


def _overtime(rng: random.Random, name: str) -> tuple[str, int] | None:
    h, t, w = 2 * rng.randint(6, 15), rng.randint(42, 50), rng.randint(2, 5)
    return (f"{name} earns ${h} an hour for the first 40 hours of a week and 1.5 times that "
            f"for every hour over 40. {name} works {t} hours a week. How many dollars does "
            f"{name} earn in {w} weeks?", (40 * h + (t - 40) * h * 3 // 2) * w)  # fmt: skip


def _flour(rng: random.Random, name: str) -> tuple[str, int] | None:
    a, b, c = rng.randint(2, 4), 12 * rng.randint(1, 3), rng.randint(3, 10)
    d, e = rng.randint(4, 6), rng.randint(3, 7)
    if (a * c * 12) % b:
        return None
    bags = -(-(a * c * 12 // b) // d)
    return (f"A recipe uses {a} cups of flour for {b} cookies. {name} bakes {c} dozen cookies. "
            f"Flour is sold in {d}-cup bags at ${e} a bag. How many dollars does {name} spend "
            "on flour?", bags * e)  # fmt: skip


def _school(rng: random.Random, name: str) -> tuple[str, int] | None:
    n, p, q = 20 * rng.randint(3, 15), 5 * rng.randint(2, 12), rng.choice([2, 4, 5])
    rest = n - n * p // 100
    if rest % q:
        return None
    question = (f"A school has {n} students. {p}% of them take the bus, 1/{q} of the rest "
                "walk, and the others ride bikes. How many students ride bikes?")  # fmt: skip
    return question, rest - rest // q


def _gas(rng: random.Random, name: str) -> tuple[str, int] | None:
    k, g = rng.choice([20, 25, 30, 40]), rng.randint(3, 5)
    d, t = 10 * rng.randint(2, 9), rng.randint(4, 12)
    gallons = 2 * d * t
    if gallons % k:
        return None
    return (f"A car goes {k} miles on a gallon of gas, and gas costs ${g} a gallon. {name} "
            f"drives {d} miles to work and back {t} times a month. How many dollars does {name} "
            "spend on gas a month?", gallons // k * g)  # fmt: skip


def _marbles(rng: random.Random, name: str) -> tuple[str, int] | None:
    b, a = rng.randint(20, 60), rng.randint(2, 9)
    sam = 3 * (b - a)
    if sam % 5:
        return None
    return (f"Ben has {b} marbles. Ann has {a} fewer marbles than Ben, and Sam has three times "
            "as many as Ann. Sam gives away one fifth of his marbles. How many marbles does Sam "
            "have left?", sam - sam // 5)  # fmt: skip


def _tickets(rng: random.Random, name: str) -> tuple[str, int] | None:
    c, p, k = rng.randint(3, 8), rng.randint(10, 40), rng.randint(2, 6)
    return (f"{name} buys {c} adult tickets at ${p} each, the same number of children's "
            f"tickets at half that price, and {k} more adult tickets for friends. A coupon "
            f"takes $10 off the whole order. How many dollars does {name} pay?",
            c * p + c * p // 2 + k * p - 10) if p % 2 == 0 else None  # fmt: skip


def _eggs(rng: random.Random, name: str) -> tuple[str, int] | None:
    a, b = rng.randint(3, 9), rng.randint(2, 6)
    return (f"{name}'s {a} hens each lay one egg a day. {name} sells the eggs by the dozen at "
            f"${b + 1} a dozen and keeps any eggs left over. How many dollars does {name} make "
            f"from {b} weeks of eggs?", a * 7 * b // 12 * (b + 1))  # fmt: skip


_WORDMATH = (_shirts, _running, _tank, _overtime, _flour, _school, _gas, _marbles, _tickets, _eggs)


def wordmath(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        question, answer = _wordmath(rng)
        rows.append({"dataset": "qa", "id": f"wordmath-{i}", "question": question,
                     "answer": answer, "scorer": "numeric", "category": "wordmath"})  # fmt: skip
    return rows


def letters(n: int, rng: random.Random) -> list[dict]:
    lines = LETTERS_HELD.read_text(encoding="utf-8").splitlines()
    held = {
        w for line in lines for w in re.findall(r"[a-z]+", json.loads(line)["question"].lower())
    }
    assert not held & set(LETTER_WORDS), "a held-out word among the training words"
    rows = []
    for i, word in enumerate(rng.sample(LETTER_WORDS, n)):
        form = i % 3
        if form == 0:
            repeated = sorted({c for c in word if word.count(c) >= 2}) or sorted(set(word))
            ch = rng.choice(repeated)
            question, answer = (
                f"How many times does the letter {ch} appear in {word}?",
                word.count(ch),
            )
        elif form == 1:
            question, answer = f"How many letters are in the word {word}?", len(word)
        else:
            answer = sum(word.count(v) for v in "aeiou")
            question = f"How many vowels (a, e, i, o, u) are in the word {word}?"
        rows.append({"dataset": "qa", "id": f"letters-train-{i}", "question": question,
                     "answer": answer, "scorer": "numeric", "category": "letters"})  # fmt: skip
    return rows


def own_rows(each: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = wordmath(each + each // 2, rng) + letters(each, rng)
    for kind, make in (("facts", facts), ("trivia", trivia), ("everyday", everyday)):
        for row in make(max(3, each * 2 // 3), rng):
            rows.append({**row, "category": kind})
    return rows


def team_rows() -> list[dict]:
    """The training half of `bench/prove_team.py --coder 1.5b --trivia --each 12` (seed 0), each
    row with its kind as its category; not its letter counts (their words may be those of
    bench/data/letters.jsonl, held out here). Its held-out half stays held out: the README's
    comparison with the shipped coder-team-1.5b is measured there."""
    kinds = (*KINDS, "trivia")
    train, _ = split_by_kind(
        questions(12, 0, kinds), kinds, lambda r: kind_of(row_id(r)), random.Random(0)
    )
    return [{**r, "category": kind_of(row_id(r))} for r in train if kind_of(row_id(r)) != "count"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--each", type=int, default=8, help="training questions of each kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", type=Path, default=Path("/tmp/conductor-train-public"))
    parser.add_argument("--out", default="public-team")
    parser.add_argument("--max-calls", type=int)
    parser.add_argument(
        "--round-robin",
        action="store_true",
        help="order the questions a kind at a time (with --max-calls: every kind measured alike)",
    )
    parser.add_argument(
        "--search",
        choices=("all", "adaptive"),
        default="all",
        help="every shape on every question, or the adaptive search within --max-calls",
    )
    parser.add_argument("--pca-dims", type=int, default=16)
    parser.add_argument("--generations", type=int, default=60)
    parser.add_argument(
        "--shapes",
        default=";".join(SHAPES),
        help="the shapes the head chooses among, `;`-separated (train --shapes)",
    )
    parser.add_argument(
        "--step-cost",
        type=float,
        default=0.02,
        help="the reward a step costs (train --step-cost): 0.02, a second step must be right "
        "4 %% more often to be worth its seconds",
    )
    parser.add_argument(
        "--learn-words",
        type=int,
        default=0,
        help="rounds of learning each kind's words by reflection (train --learn-words)",
    )
    parser.add_argument(
        "--more", default="arc-challenge=24", help="sets drawn more than --each: NAME=N,..."
    )
    parser.add_argument(
        "--also",
        default="",
        help="more public sets with a training split, --each items each: NAME+NAME (issue 68: "
        "bbh:qa_wikidata, short facts that end in the Answer line as NQ-open's do)",
    )
    parser.add_argument(
        "--team-kinds",
        action="store_true",
        help="also the training half of `bench/prove_team.py --coder 1.5b --trivia --each 12` "
        "(what the shipped coder-team-1.5b trained on; its letter counts aside), instead of the "
        "facts, trivia and everyday questions here",
    )
    parser.add_argument(
        "--breadth",
        type=int,
        default=0,
        help="also this many training items of each BIG-bench task of BREADTH (issue 68)",
    )
    parser.add_argument(
        "--team-each",
        type=int,
        default=0,
        help="with --team-kinds, at most this many questions of each of its kinds (0: all)",
    )
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    os.environ.update(isolated_env(args.root, team_config(DEFAULT_MODEL)))

    from conductor_cli.config import load_config
    from conductor_cli.evals import load_dataset, select
    from conductor_cli.train import HeadOptions, TrainOptions, train

    rows = own_rows(args.each, args.seed)
    if args.team_kinds:
        team = team_rows()
        if args.team_each:
            seen: dict[str, int] = {}
            kept = []
            for r in team:
                seen[r["category"]] = seen.get(r["category"], 0) + 1
                if seen[r["category"]] <= args.team_each:
                    kept.append(r)
            team = kept
        rows = [r for r in rows if r["category"] in ("wordmath", "letters")] + team
    own = write_rows(rows, args.root / "own.jsonl")
    problems = load_dataset("mixed", own, "numeric")
    more = dict(part.split("=") for part in args.more.split(",") if part)
    for name in PUBLIC + tuple(n for n in args.also.split("+") if n):
        n = int(more.get(name, args.each))
        drawn = select(load_dataset(name, None, split="train"), sample=n, seed=args.seed)
        problems += [p for p in drawn]
    for task in BREADTH if args.breadth else ():
        drawn = load_dataset(f"bbh:{task}", None, split="train")
        problems += select(drawn, sample=args.breadth, seed=args.seed)
    assert not {p.category for p in problems} & set(WITHHELD), "a withheld kind in training"
    if args.round_robin:
        # The first question of every kind, then the second of each...: a training stopped by
        # --max-calls under --search all has measured every kind alike.
        order: dict[str | None, int] = {}
        turn = []
        for p in problems:
            turn.append(order.get(p.category, 0))
            order[p.category] = turn[-1] + 1
        problems = [p for _, p in sorted(zip(turn, problems, strict=True), key=lambda t: t[0])]
    kinds: dict[str, int] = {}
    for p in problems:
        kinds[p.category or "?"] = kinds.get(p.category or "?", 0) + 1
    print(f"{len(problems)} training questions: {kinds}", flush=True)
    head = HeadOptions(
        tasks="fixed", search=args.search, shapes=tuple(args.shapes.split(";")),
        max_calls=args.max_calls, pca_dims=args.pca_dims, generations=args.generations,
        step_cost=args.step_cost, learn_words=args.learn_words,
    )  # fmt: skip
    options = TrainOptions(
        name=args.out, dataset="mixed", holdout=0.0, seed=args.seed, repeats=1, head=head,
        force=True, evaluate_before=False,
    )  # fmt: skip
    started = time.monotonic()
    record = train(load_config(None), problems, options, "head", on_progress=_show)
    minutes = (time.monotonic() - started) / 60
    print(f"trained {args.out} in {minutes:.1f} min", flush=True)
    (args.root / "record.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    home = " ".join(
        f"{k}={os.environ[k]}"
        for k in (
            "CONDUCTOR_CONFIG",
            "CONDUCTOR_DATA_DIR",
            "CONDUCTOR_CACHE_DIR",
            "CONDUCTOR_MODELS_DIR",
        )
    )
    print(f"its home, for `conductor eval ... --strategies conductor:{args.out},...`: {home}")


def _show(p: object) -> None:
    print(f"  {p.stage} {p.done}/{p.total}", flush=True)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
