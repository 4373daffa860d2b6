"""A last step that answers with a slot of the question's own template, where a program ran.

A question in a set's format ends with a line such as 'End your reply with a line "Answer:
<your answer>"', and the 1.5B coder asked to check a program and its run sometimes copies the
template instead of filling it in ("Answer: <your answer>": 2 of the team's 100 answers on
the public mix, seed 7; 1 of 40 training questions, 2026-12-02). A slot the question wrote is
never an answer, and what a program that ran printed is (issue 68, item 5: the interpreter is
authoritative): so the run's output becomes the answer there. Nothing else changes: a step's
output, the trace and what later rounds read stay what the workers said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from conductor_cli.problems import final_answer
from conductor_cli.run.engine import StepResult
from conductor_cli.run.pool import Pool
from conductor_cli.tools.examples import TEST
from conductor_cli.tools.python_tool import is_failure

_SLOT = re.compile(r"<[^<>\n]{1,40}>")


def is_slot(question: str, reply: str) -> bool:
    """Whether the reply's final answer, as the scorers read it, is only a slot of the
    question's template ("<your answer>" where the question wrote it)."""
    final = final_answer(reply).rstrip(".!\"'` ").lstrip("\"'` ")
    return _SLOT.fullmatch(final) is not None and final in question


def may_apply(question: str) -> bool:
    """Whether a last step's answer to `question` could give way here: the question writes
    a slot (what is streamed of such a step waits for the run's answer)."""
    return _SLOT.search(question) is not None


def answer(question: str, steps: Sequence[StepResult], pool: Pool) -> str:
    """The last step's output, or, where that answers with a slot of the question's template,
    what the last run it saw of a program printed (its failure reports and example tests are
    no answer: then the output stays)."""
    last = steps[-1]
    if not is_slot(question, last.output):
        return last.output
    for j in reversed(last.sees):
        seen = steps[j]
        runs = seen.worker in pool.names and pool.get(seen.worker).config.spec.runs_programs
        printed = seen.output.strip()
        if runs and seen.task != TEST and printed and not is_failure(printed):
            return printed
    return last.output
