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

ANSWER = "Answer the question."
CHECK = "Check the earlier answer to the question and give the correct final answer."
PROGRAM = (
    "Write a Python program that computes the answer and prints only the final answer, "
    "in one ```python block."
)
RUN = "Run the program from step 0."

WORDS: dict[str, str] = {"answer": ANSWER, "check": CHECK, "program": PROGRAM, "run": RUN}


def default(sees: tuple[int, ...]) -> str:
    return "check" if sees else "answer"
