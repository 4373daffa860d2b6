"""Score one reply against its problem: letters, numbers and text here; code in the sandbox."""

from __future__ import annotations

from typing import Any

from conductor_cli.evals.answers import extract_code, program_for, score_choice, score_qa, vote_key
from conductor_cli.evals.records import Problem
from conductor_cli.sandbox import Sandbox


def extract(problem: Problem, reply: str) -> str:
    """What the reply answers (a letter, a number, a text, a program): compared by votes."""
    if problem.kind == "code":
        return extract_code(reply, problem)
    if problem.kind == "mcq":
        return score_choice(reply, problem)[1]
    return score_qa(reply, problem.answer, problem.scorer, problem.aliases)[1]


def key(problem: Problem, reply: str) -> str:
    return vote_key(problem, extract(problem, reply))


def score(
    problem: Problem, reply: str, sandbox: Sandbox | None
) -> tuple[bool, str, dict[str, Any]]:
    """(correct, extracted answer, detail). Code runs only here, and only in the sandbox."""
    if problem.kind == "code":
        if sandbox is None:
            raise ValueError("a code problem needs a sandbox")
        code = extract_code(reply, problem)
        outcome = sandbox.run(program_for(code, problem))
        detail = {"sandbox": outcome.status, "isolation": outcome.isolation}
        if not outcome.passed:
            detail["output"] = outcome.output[-500:]
        return outcome.passed, code, detail
    if problem.kind == "mcq":
        correct, letter = score_choice(reply, problem)
        return correct, letter, {}
    correct, extracted = score_qa(reply, problem.answer, problem.scorer, problem.aliases)
    return correct, extracted, {}
