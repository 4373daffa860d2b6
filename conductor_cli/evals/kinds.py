"""The kinds of problem (`Problem.kind`: code, mcq, qa), one entry each: what a reply answers,
how it is scored, what votes compare, and whether scoring runs code. A new kind is one entry
here; nothing else tests a problem's kind by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conductor_cli.evals import answers
from conductor_cli.evals.records import Problem

if TYPE_CHECKING:
    from conductor_cli.sandbox import Limits, Sandbox

Scored = tuple[bool, str, dict[str, Any]]  # (correct, the answer read out, detail)


@dataclass(frozen=True)
class ProblemKind:
    name: str
    extract: Callable[[Problem, str], str]  # what a reply answers: a letter, a text, a program
    score: Callable[[Problem, str, Sandbox | None], Scored]
    vote_key: Callable[[Problem, str], str]  # answers that mean the same get the same key
    runs_code: bool = False  # scored by running the answer in the sandbox


def _score_code(problem: Problem, reply: str, sandbox: Sandbox | None) -> Scored:
    if sandbox is None:
        raise ValueError("a code problem needs a sandbox")
    code = answers.extract_code(reply, problem)
    outcome = sandbox.run(answers.program_for(code, problem))
    detail: dict[str, Any] = {"sandbox": outcome.status, "isolation": outcome.isolation}
    if not outcome.passed:
        detail["output"] = outcome.output[-500:]
    return outcome.passed, code, detail


def _score_choice(problem: Problem, reply: str, sandbox: Sandbox | None) -> Scored:
    correct, letter = answers.score_choice(reply, problem)
    return correct, letter, {}


def _qa_reply(problem: Problem, reply: str) -> tuple[bool, str]:
    return answers.score_qa(reply, problem.answer, problem.scorer, problem.aliases)


def _score_qa(problem: Problem, reply: str, sandbox: Sandbox | None) -> Scored:
    correct, extracted = _qa_reply(problem, reply)
    return correct, extracted, {}


def _qa_key(problem: Problem, extracted: str) -> str:
    entry = answers.QA_SCORERS.get(problem.scorer)
    return entry.vote_key(extracted) if entry is not None else answers.normalize_text(extracted)


PROBLEM_KINDS: dict[str, ProblemKind] = {
    k.name: k
    for k in (
        ProblemKind(
            "code",
            lambda problem, reply: answers.extract_code(reply, problem),
            _score_code,
            lambda problem, code: answers.code_key(code),
            runs_code=True,
        ),
        ProblemKind(
            "mcq",
            lambda problem, reply: answers.score_choice(reply, problem)[1],
            _score_choice,
            lambda problem, letter: letter.strip().upper(),
        ),
        ProblemKind("qa", lambda p, reply: _qa_reply(p, reply)[1], _score_qa, _qa_key),
    )
}


def kind_of(problem: Problem) -> ProblemKind:
    """The problem's kind (a kind no entry names is read as qa, as files always were)."""
    return PROBLEM_KINDS.get(problem.kind, PROBLEM_KINDS["qa"])


def runs_code(problems: list[Problem] | tuple[Problem, ...]) -> bool:
    """Whether scoring any of `problems` runs code (a sandbox is needed)."""
    return any(kind_of(p).runs_code for p in problems)


def scoring_limits(cpu_s: int = 10) -> Limits:
    """The limits hidden tests run under: CPU seconds bound them, not wall seconds. Scored
    beside llama.cpp on every core, a slow but right program got a third of a core, so the
    sandbox's 15 wall seconds passed or failed the same code by chance; the wall limit here
    only ends a program that waits instead of running."""
    from conductor_cli.sandbox import Limits

    return Limits(wall_s=6.0 * cpu_s, cpu_s=cpu_s)


def scoring_sandbox() -> Sandbox:
    """A sandbox for scoring code answers (see `scoring_limits`)."""
    from conductor_cli.sandbox import Sandbox

    return Sandbox(scoring_limits())


def vote_key(problem: Problem, extracted: str) -> str:
    """What majority voting compares: answers that mean the same get the same key."""
    return kind_of(problem).vote_key(problem, extracted)
