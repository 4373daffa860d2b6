"""Score one reply against its problem, as its kind says (evals/kinds.py): letters, numbers and
text read out of the reply; code run in the sandbox, only here."""

from __future__ import annotations

from typing import Any

from conductor_cli.evals.kinds import kind_of, vote_key
from conductor_cli.evals.records import Problem
from conductor_cli.sandbox import Sandbox


def extract(problem: Problem, reply: str) -> str:
    """What the reply answers (a letter, a number, a text, a program): compared by votes."""
    return kind_of(problem).extract(problem, reply)


def key(problem: Problem, reply: str) -> str:
    return vote_key(problem, extract(problem, reply))


def score(
    problem: Problem, reply: str, sandbox: Sandbox | None
) -> tuple[bool, str, dict[str, Any]]:
    """(correct, extracted answer, detail). Code runs only here, and only in the sandbox."""
    return kind_of(problem).score(problem, reply, sandbox)
