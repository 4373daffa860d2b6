"""Learning the words of a step by reflection (issue 57): a model of the pool reads what a
step was told, what it answered and what was right, and proposes better words; words are
kept only where the reward on the training questions rises (GEPA's loop, arXiv 2507.19457,
without its Pareto front: one kind of question, one step, one best words at a time).

`learn_words(run, propose, problems)` is the search; `run(words, problem) -> (right, reply)`
runs the step with those words and scores it, `propose(prompt) -> text` asks the proposing
model. Both are the caller's (bench/learn_words.py runs them on the real team), so the search
itself calls no model and its tests are exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from conductor_cli.evals.records import Problem

MAX_WORDS = 80  # a proposal longer than this is cut: words are an instruction, not an answer
EXAMPLES = 4  # failures shown to the proposer, each cut to EXAMPLE_CHARS
EXAMPLE_CHARS = 600

REFLECT = """You improve the instruction a small assistant model gets for one kind of question.

The instruction now: "{words}"

Questions of this kind it got wrong with that instruction: each question, the start of its
reply (and of the earlier steps' replies it read, if any), and the right answer.

{examples}

Write one new instruction for every question of this kind, better than the one now: say how
to work such a question out and {ending}. Do not mention these questions or their answers.
Reply with the instruction alone, on one line."""
# How a reply must end, by what reads it: the user (an answer) or the python tool (a program).
ENDS_ANSWER = 'how to end the reply (the last line must be "Answer: ..." with the answer alone)'
ENDS_PROGRAM = (
    "that the reply must be one ```python block whose program prints only the final answer"
)


@dataclass(frozen=True)
class Trial:
    words: str
    right: int
    n: int
    round: int  # 0: the words it started from

    @property
    def reward(self) -> float:
        return self.right / self.n if self.n else 0.0


@dataclass
class WordsSearch:
    """What the search tried, best first, and the runs behind each."""

    trials: list[Trial] = field(default_factory=list)

    @property
    def best(self) -> Trial:
        return max(self.trials, key=lambda t: (t.reward, -t.round))


Run = Callable[[str, Problem], tuple[bool, str]]


def clean(proposal: str) -> str:
    """The instruction in a proposer's reply: its first line with text, unquoted, cut to
    MAX_WORDS words; '' where there is none."""
    for line in proposal.strip().splitlines():
        text = line.replace("**", "").strip()
        for prefix in ("New instruction:", "Instruction:", "instruction:"):
            text = text.removeprefix(prefix).strip()
        text = text.strip('"').strip("'").strip()
        if text:
            return " ".join(text.split()[:MAX_WORDS])
    return ""


def reflect_prompt(
    words: str,
    failures: Sequence[tuple[Problem, str]],
    offset: int = 0,
    ending: str = ENDS_ANSWER,
) -> str:
    """The proposer's prompt: the words now and EXAMPLES of their failures, from `offset`
    on (each proposal of a round sees other failures)."""
    shown = []
    start = offset % len(failures) if failures else 0
    for problem, reply in [*failures[start:], *failures[:start]][:EXAMPLES]:
        answer = ", ".join(problem.aliases) if problem.aliases else problem.answer
        shown.append(
            f"Question: {problem.question[:EXAMPLE_CHARS]}\n"
            f"Reply: {reply.strip()[:EXAMPLE_CHARS]}\nRight answer: {answer}"
        )
    return REFLECT.format(words=words, examples="\n\n".join(shown), ending=ending)


def learn_words(
    run: Run,
    propose: Callable[[str], str],
    problems: Sequence[Problem],
    start: str,
    *,
    rounds: int = 3,
    per_round: int = 2,
    ending: str = ENDS_ANSWER,
    candidates: Sequence[str] = (),
) -> WordsSearch:
    """From `start` and the `candidates` (other words for the same step, round 0), `rounds`
    times: `per_round` proposals from the best words' failures, each run on every problem;
    words are kept as the best only if they are right more often (a tie keeps the earlier)."""
    search = WordsSearch()

    def trial(words: str, round_: int) -> list[tuple[Problem, str]]:
        failures, right = [], 0
        for problem in problems:
            ok, reply = run(words, problem)
            right += ok
            if not ok:
                failures.append((problem, reply))
        search.trials.append(Trial(words, right, len(problems), round_))
        return failures

    failures = {start: trial(start, 0)}
    tried = {start}
    for words in candidates:
        if words not in tried:
            tried.add(words)
            failures[words] = trial(words, 0)
    for round_ in range(1, rounds + 1):
        best = search.best
        if not failures[best.words]:
            break  # nothing left to learn from
        for k in range(per_round):
            prompt = reflect_prompt(best.words, failures[best.words], k * EXAMPLES, ending)
            words = clean(propose(prompt))
            if not words or words in tried:
                continue
            tried.add(words)
            failures[words] = trial(words, round_)
    return search
