"""The words of a step, by name: what a shape tells each of its steps to do.

A shape fixes the workers and what each step sees; its `words` name, for each step, one entry
of WORDS (no words: `answer`, or `check` for a step that sees another). A shape of the same
workers with other words is another shape, measured on its own (train/measured.shape_key
covers the words), so words enter training the way routes do. eval's `program:W` strategy is
the first such shape (`W[program] > python[run]<0`: on GSM8K the coder asked to answer got 4
of 12 right and, asked for a program the python tool ran, 10 of 12; issue 57). A name's words
never change: new words get a new name.
"""

from __future__ import annotations

from conductor_cli.tools import examples

ANSWER = "Answer the question."
CHECK = "Check the earlier answer to the question and give the correct final answer."
PROGRAM = (
    "Write a Python program that computes the answer and prints only the final answer, "
    "in one ```python block."
)
RUN = "Run the program from step 0."
# Write, test, repair or write again (issue 69): the python tool runs the code of the step it
# sees on the examples the question shows (doctest lines, asserts; never a benchmark's hidden
# tests) and says which fail; the writer then fixes what failed (`repair`, shown its code) or
# writes the code again (`retry`, shown only what failed).
TEST = examples.TEST
REPAIR = examples.REPAIR
RETRY = examples.RETRY

WORDS: dict[str, str] = {
    "answer": ANSWER,
    "check": CHECK,
    "program": PROGRAM,
    "run": RUN,
    "test": TEST,
    "repair": REPAIR,
    "retry": RETRY,
    # Other words for the same roles, candidates a training tries for each kind of question
    # (`train --learn-words`, train/word_shapes.py): written once, for every kind, before any
    # measurement, and kept for a kind only where they are right more often on its training
    # questions.
    "answer_steps": "Work it out step by step, then give the final answer alone on the last "
    'line as "Answer: ...".',
    "answer_short": "Give the final answer alone, in a few words, with no explanation.",
    "program_steps": "Write a Python program that computes the answer step by step, one "
    "variable for each quantity the question gives, and prints only the final answer, in one "
    "```python block.",
    "program_choice": "Write a Python program that computes the answer and prints only the "
    "final answer; where the question lists options, it prints the letter of the option that "
    "matches. One ```python block.",
    "check_trust": "The program's output is the answer unless the program failed or printed "
    "nothing; then work the answer out yourself. Give the final answer alone.",
}
# What each entry of WORDS asks of its step: the other words of the same role are what a
# training tries in its place.
ROLES: dict[str, str] = {name: name.split("_")[0] for name in WORDS}


def default(sees: tuple[int, ...]) -> str:
    return "check" if sees else "answer"


def alternatives(name: str) -> list[str]:
    """The other entries of WORDS for the step `name`'s words serve (its role: `answer`,
    `check`, `program`, `run`); none for words not in WORDS (learned ones)."""
    role = ROLES.get(name)
    return [other for other, r in ROLES.items() if role is not None and r == role and other != name]
