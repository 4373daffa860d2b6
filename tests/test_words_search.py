"""The reflective words search (issue 57, train/words.py): words are kept only where they are
right more often on the training questions. Its model calls are the caller's: here scripted
callables stand in for them (the search's logic is what is tested; bench/learn_words.py runs
it on the real team)."""

from __future__ import annotations

from conductor_cli.evals.records import Problem
from conductor_cli.train.words import EXAMPLES, MAX_WORDS, clean, learn_words, reflect_prompt

PROBLEMS = [
    Problem(id=f"q{i}", kind="qa", question=f"What date is {i} days after 1/1/2020?",
            answer=f"day {i}", scorer="exact")
    for i in range(10)
]  # fmt: skip


def scripted_run(good: str, partial: str = "") -> tuple[list[str], object]:
    """A step right on every question with words containing `good`, on the even ones with
    words containing `partial`, else on none; it records the words it was run with."""
    seen: list[str] = []

    def run(words: str, problem: Problem) -> tuple[bool, str]:
        seen.append(words)
        n = int(problem.id[1:])
        right = good in words or (bool(partial) and partial in words and n % 2 == 0)
        return right, problem.answer if right else "Answer: no idea"

    return seen, run


def test_better_words_are_kept_and_worse_ones_are_not() -> None:
    proposals = iter(["Guess the date.", '"Count the days on a calendar, step by step."'])
    seen, run = scripted_run(good="calendar")
    search = learn_words(run, lambda prompt: next(proposals), PROBLEMS, "Answer the question.",
                         rounds=1, per_round=2)  # fmt: skip
    assert search.best.words == "Count the days on a calendar, step by step."
    assert search.best.right == 10 and search.best.round == 1
    rewards = {t.words: t.reward for t in search.trials}
    assert rewards == {"Answer the question.": 0.0, "Guess the date.": 0.0,
                       search.best.words: 1.0}  # fmt: skip
    assert len(seen) == 3 * len(PROBLEMS)  # each trial ran every question once


def test_a_proposal_is_built_on_the_best_words_and_their_failures() -> None:
    prompts: list[str] = []
    proposals = iter(["Use a calendar for half.", "Use a calendar fully."])

    def propose(prompt: str) -> str:
        prompts.append(prompt)
        return next(proposals)

    _, run = scripted_run(good="fully", partial="half")
    search = learn_words(run, propose, PROBLEMS, "Answer.", rounds=2, per_round=1)
    assert search.best.words == "Use a calendar fully."
    # Round 2 reflects on round 1's better words and shows only their failures (odd items).
    assert '"Use a calendar for half."' in prompts[1]
    assert "1 days after" in prompts[1] and "2 days after" not in prompts[1]
    assert prompts[1].count("Question:") == EXAMPLES


def test_repeated_empty_or_overlong_proposals_are_not_run_again() -> None:
    seen, run = scripted_run(good="never")
    long = "word " * (MAX_WORDS + 50)
    proposals = iter(["Answer the question.", "", long, long])
    learn_words(run, lambda p: next(proposals), PROBLEMS, "Answer the question.",
                rounds=1, per_round=4)  # fmt: skip
    assert len(seen) == 2 * len(PROBLEMS)  # the start, and the long one once
    assert len(clean(long).split()) == MAX_WORDS


def test_the_search_stops_when_nothing_fails() -> None:
    _, run = scripted_run(good="Answer")
    search = learn_words(run, lambda p: "never called", PROBLEMS, "Answer.", rounds=3)
    assert len(search.trials) == 1 and search.best.reward == 1.0


def test_what_the_proposer_is_shown() -> None:
    failures = [(p, "Answer: no idea") for p in PROBLEMS[:6]]
    prompt = reflect_prompt("Answer.", failures, offset=EXAMPLES)
    assert prompt.count("Question:") == EXAMPLES and "4 days after" in prompt
    assert clean('**Instruction:** "Think, then answer."\nMore text') == "Think, then answer."
