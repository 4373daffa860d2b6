"""A problem with a known answer, as evaluation and training read it, and the words its
question ends with, so that its answer can be read out of a reply: the record that a user's
files (evals/datasets.py) and public sets (conductor_cli.public) both build."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

CODE_INSTRUCTION = (
    "Complete the following Python function. "
    "Reply with the whole function in one ```python code block.\n\n"
)
MCQ_INSTRUCTION = "Answer with the letter of the correct choice."
# Exact and numeric scoring read the text after the last "Answer:"; asking for that line
# keeps a correct but chatty reply from being scored wrong.
QA_INSTRUCTION = 'End your reply with a line "Answer: <your answer>".'
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # choice letters, in order


@dataclass(frozen=True)
class Problem:
    id: str  # "HumanEval/0", the JSONL "id" field, else "<file stem>:<line no>"
    kind: str  # "code" | "mcq" | "qa"
    question: str  # the full text a model is asked
    answer: str  # mcq: the letter; qa: the reference; code: the canonical solution (may be "")
    category: str | None = None
    choices: tuple[str, ...] = ()
    scorer: str = ""  # qa: "exact" | "numeric" | "contains"; mcq: "choice"; code: "tests"
    prompt: str = ""  # code: the HumanEval prompt (signature and docstring)
    test: str = ""  # code: the HumanEval test, which defines check(candidate)
    entry_point: str = ""  # code: the function's name
    aliases: tuple[str, ...] = ()  # qa "alias": every answer that counts (NQ, TriviaQA)
    # (name, text) of each file the question comes with, as `ask` attaches them ("stdin" when
    # piped): a repair set's buggy file (`humaneval-fix`).
    attachments: tuple[tuple[str, str], ...] = ()


def bare_question(text: str) -> str:
    """`text` without the instruction a public set's or a user's file's loader wrapped it in
    (the code preamble, the multiple-choice and "Answer:" lines): what is asked, as a
    representation that must not key on a set's format line reads it."""
    bare = text.strip().removeprefix(CODE_INSTRUCTION.strip())
    for suffix in (MCQ_INSTRUCTION, QA_INSTRUCTION):
        bare = bare.strip().removesuffix(suffix)
    return bare.strip() or text


# Typographic quotes and the minus sign read as their ASCII forms; markdown emphasis and
# code marks around an answer ("**B**", "`42`") are dropped.
_PLAIN = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2212": "-",
        "*": None,
        "`": None,
    }
)
_FINAL_ANSWER = re.compile(r"(?i)\b(?:final\s+)?answer\b\s*(?:is\b|:|=)[\s:]*")


def plain_text(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_PLAIN)


def final_answer(reply: str) -> str:
    """The text after the last "answer is"/"Answer:" (to the end of that line, or the next
    line when the statement ends its line), else the whole reply, stripped: what the scorers
    read, and what a run's answer is checked against its question's template by
    (run/template_slot.py)."""
    clean = plain_text(reply)
    matches = list(_FINAL_ANSWER.finditer(clean))
    if matches:
        rest = clean[matches[-1].end() :].strip()
        if rest:
            return rest.splitlines()[0].strip()
    return reply.strip()
