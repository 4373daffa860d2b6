"""Learned words as shapes a head can pick (issue 57, train/word_shapes.py): which kind's
words are searched, which step's, what the proposer reads, when new words become a shape, and
that a shape with learned words runs, saves, reads back and keys its measurements by its
words. The model calls are the caller's: scripted callables stand in for them here (the
choices are what is tested; bench/train_public.py --learn-words runs them on the real team)."""

from __future__ import annotations

import numpy as np

from conductor_cli.evals.records import Problem
from conductor_cli.policy.head import Head
from conductor_cli.policy.shapes import Shape, parse_shape, shape_grammar
from conductor_cli.policy.words import WORDS, alternatives
from conductor_cli.train.measured import shape_key
from conductor_cli.train.word_shapes import (
    MIN_GAIN,
    HeldOut,
    Learned,
    StepWords,
    learn_word_shapes,
    learned_name,
    learned_step,
    step_context,
    words_calls,
)
from conductor_cli.train.words import ENDS_PROGRAM

WORKERS = ("local", "coder", "python")
TOOLS = frozenset({"python"})
CODER = parse_shape("coder", WORKERS)
LOCAL = parse_shape("local", WORKERS)
CHECKED = parse_shape("coder[program] > python[run]<0 > coder[check]<0,1", WORKERS)
PROGRAM = parse_shape("coder[program] > python[run]<0", WORKERS)


def problems(kind: str, n: int) -> list[Problem]:
    return [
        Problem(id=f"{kind}{i}", kind="qa", question=f"{kind} question {i}", answer=str(i),
                scorer="exact", category=kind)
        for i in range(n)
    ]  # fmt: skip


def test_the_searched_step_is_the_last_a_model_runs_and_names_say_kind_and_words() -> None:
    assert learned_step(CODER, TOOLS) == 0
    assert learned_step(PROGRAM, TOOLS) == 0  # the tool's step does what its input says
    assert learned_step(CHECKED, TOOLS) == 2
    assert learned_step(parse_shape("python", WORKERS), TOOLS) is None
    assert learned_name("check", "bbh:object_counting") == "check_bbh_object_counting"
    assert learned_name("answer", "") == "answer_kind"


def test_a_shape_with_learned_words_runs_them_saves_them_and_keys_by_them() -> None:
    learned = CHECKED.with_words(
        2, "check_objects", "Repeat the program's output unless it failed."
    )
    assert learned.label == "coder[program] > python[run]<0 > coder[check_objects]<0,1"
    assert learned.workflow().steps[2].task == "Repeat the program's output unless it failed."
    assert learned.workflow().steps[0].task == CHECKED.workflow().steps[0].task
    assert "Repeat the program" in shape_grammar(learned)  # the conductor writes no other words
    assert Shape.from_dict(learned.to_dict()) == learned
    fingerprints = {w: w + "-fp" for w in WORKERS}
    assert shape_key(learned, fingerprints) != shape_key(CHECKED, fingerprints)
    other = CHECKED.with_words(2, "check_objects", "Other words.")
    assert shape_key(other, fingerprints) != shape_key(learned, fingerprints)
    # A trained head's file carries the words: planning runs them with no table beside it.
    head = Head(np.zeros(2), np.ones(2), np.zeros((1, 2)), np.zeros((2, 2)), (CODER, learned))
    assert Head.from_dict(head.to_dict()).shapes[1].workflow() == learned.workflow()


def test_each_kind_searches_its_best_shapes_words_and_keeps_only_a_clear_gain() -> None:
    objects, dates, capitals = problems("objects", 6), problems("dates", 6), problems("caps", 6)
    few = problems("rare", 3)  # under MIN_KIND: not searched
    training = [*objects, *dates, *capitals, *few]
    shapes = [LOCAL, CODER, CHECKED]
    n = len(training)
    table = np.zeros((n, 3))
    table[0:6, 2] = [1, 1, 1, 0, 0, 0]  # objects: the checked program earns most
    table[6:12, 1] = [1, 1, 0, 0, 0, 0]  # dates: the coder alone
    table[12:18, 1] = 1.0  # capitals: every one right already
    ran: list[tuple[str, str, str]] = []

    def trial(shape: Shape, problem: Problem) -> tuple[bool, str]:
        i = int(problem.id[-1])
        if problem.category == "objects":
            ran.append(("objects", shape.label, problem.id))
            # The program trusted: two more right; other program words change nothing.
            return (shape.text(2) == WORDS["check_trust"] and i < 5) or i < 3, "step 2: wrong"
        ran.append(("dates", shape.text(0), problem.id))
        return ("calendar" in shape.text(0) and i < 3) or i < 2, "Answer: wrong"

    asked: list[tuple[str, str]] = []

    def propose(worker: str, prompt: str, k: int) -> str:
        asked.append((worker, prompt))
        return "Use a calendar."

    found = learn_word_shapes(shapes, table, table, training, TOOLS, trial, propose, rounds=1,
                              per_round=1)  # fmt: skip
    by_kind = {item.kind: item for item in found}
    assert set(by_kind) == {"objects", "dates"}  # capitals all right, rare too few
    objects_found = by_kind["objects"]
    assert objects_found.base == CHECKED.label
    # The check step first (the last a model runs), then the program step, from the kept check.
    assert [s.step for s in objects_found.steps] == [2, 0]
    # Searched on every other question (0, 2, 4), confirmed on the rest, which it never ran.
    assert (objects_found.n, objects_found.right_before, objects_found.right_after) == (3, 2, 3)
    assert objects_found.held_out == HeldOut(3, 1, 2)
    assert objects_found.steps[0].words == WORDS["check_trust"]
    assert objects_found.steps[1].words == WORDS["program"]  # no program words did better
    assert objects_found.shape is not None
    # Words of the library keep their name; the shape shows them.
    assert objects_found.shape.label == ("coder[program] > python[run]<0 > coder[check_trust]<0,1")
    # The calendar gains one where searched, none on the questions held out: not kept.
    dates_found = by_kind["dates"]
    assert dates_found.right_after - dates_found.right_before == MIN_GAIN
    assert dates_found.held_out == HeldOut(3, 1, 1)
    assert dates_found.shape is None and dates_found.steps[0].words == "Use a calendar."
    assert dates_found.to_dict()["held_out"] == {"questions": 3, "right_before": 1,
                                                 "right_after": 1}  # fmt: skip
    # The held-out questions ran the shape's own words and the words found, nothing else.
    held = {words for kind, words, qid in ran if kind == "dates" and qid in {"dates1", "dates3"}}
    assert held == {WORDS["answer"], "Use a calendar."}
    assert {w for w, _ in asked} == {"coder"}
    # Each other answer word of the library was tried on the dates before reflection.
    tried = {words for kind, words, _ in ran if kind == "dates"}
    assert {WORDS["answer_steps"], WORDS["answer_short"], "Use a calendar."} <= tried


def test_the_estimate_of_the_words_search_bounds_its_calls() -> None:
    """train's --dry-run adds words_calls: each trial is one call a step, each proposal one,
    and each kept shape is measured on every training question; the bound holds, and is not
    loose by more than the shapes' spread."""
    training = [*problems("objects", 6), *problems("dates", 7), *problems("rare", 5)]
    shapes = [LOCAL, CODER, CHECKED]
    table = np.zeros((len(training), 3))
    table[:, 2] = 0.5
    calls = [0]

    def trial(shape: Shape, problem: Problem) -> tuple[bool, str]:
        calls[0] += len(shape.workers)
        # The program trusted: right on every question, so a shape is kept on each kind.
        return shape.text(2) == WORDS["check_trust"], "wrong"

    def propose(worker: str, prompt: str, k: int) -> str:
        calls[0] += 1
        return f"Try again, {k}."

    found = learn_word_shapes(shapes, table, table, training, TOOLS, trial, propose, rounds=2)
    kept = [item.shape for item in found if item.shape is not None]
    assert len(kept) == 2  # objects and dates; rare has too few questions to halve
    spent = calls[0] + sum(len(shape.workers) for shape in kept) * len(training)
    bound = words_calls(shapes, training, TOOLS, rounds=2)
    assert spent <= bound <= 2 * spent, (spent, bound)
    assert words_calls([parse_shape("python", WORKERS)], training, TOOLS, 2) == 0


def test_a_program_step_is_told_to_stay_a_program() -> None:
    training = problems("sums", 6)
    table = np.zeros((6, 2))
    prompts: list[str] = []

    def propose(worker: str, prompt: str, k: int) -> str:
        prompts.append(prompt)
        return "Write a program."

    learn_word_shapes([LOCAL, PROGRAM], table, table + np.array([0, 0.1]), training, TOOLS,
                      lambda shape, p: (False, "Traceback"), propose, rounds=1,
                      per_round=1)  # fmt: skip
    assert prompts and ENDS_PROGRAM in prompts[0]


def test_the_proposer_reads_each_step_with_the_searched_one_marked() -> None:
    text = step_context([("coder", "print(7)"), ("python", "7"), ("coder", "Answer: 8")], 2)
    assert text.splitlines() == [
        "step 0, coder: print(7)",
        "step 1, python: 7",
        "step 2, coder (the step whose instruction you improve): Answer: 8",
    ]


def test_the_words_library_offers_each_step_the_other_words_of_its_role() -> None:
    assert alternatives("check") == ["check_trust"]
    assert set(alternatives("program")) == {"program_steps", "program_choice"}
    assert "answer" not in alternatives("answer") and "check" not in alternatives("answer")
    assert alternatives("run") == [] and alternatives("check_objects") == []
    # Library words are shapes a user can name too.
    shape = parse_shape("coder[program_steps] > python[run]<0", WORKERS)
    assert shape.workflow().steps[0].task == WORDS["program_steps"]


def test_the_training_summary_says_per_kind_whether_written_or_learned_words_won() -> None:
    """`conductor train --learn-words` prints, for each kind searched, the counts where the
    words were searched and on the half held out, and which words the conductor keeps."""
    from conductor_cli.cli.train_summary import summary

    step = StepWords(0, WORDS["program"], WORDS["program_steps"], 2, 4, 3)
    kept_shape = CHECKED.with_words(0, "program_steps", WORDS["program_steps"])
    kept = Learned("objects", CHECKED.label, (step,), 4, kept_shape, HeldOut(4, 1, 3))
    lost = Learned("dates", CODER.label, (StepWords(0, "a", "b", 1, 2, 2),), 3, None,
                   HeldOut(3, 2, 2))  # fmt: skip
    same = Learned("caps", CODER.label, (StepWords(0, "a", "a", 2, 2, 2),), 3, None)
    record = {"name": "mine", "method": "head",
              "learned_words": {"searches": [x.to_dict() for x in (kept, lost, same)]}}  # fmt: skip
    lines = summary(record).splitlines()
    said = {line.split(" (")[0].strip(): line for line in lines if "words for" in line}
    assert "2 -> 4 of 4 searched, 1 -> 3 of 4 held out" in said["words for objects"]
    assert f"learned words kept: {kept_shape.label}" in said["words for objects"]
    assert "1 -> 2 of 3 searched, 2 -> 2 of 3 held out" in said["words for dates"]
    assert (
        "the written words kept: the learned ones gained nothing held out"
        in said["words for dates"]
    )
    assert said["words for caps"].endswith("the written words kept: no words did better")
