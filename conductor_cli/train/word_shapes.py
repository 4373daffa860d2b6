"""Learned words as shapes a head can pick (issue 57, `train --learn-words ROUNDS`).

For each kind of training question (its `category`), the shape that earns most on that kind
is taken, and the words of its last step that a model runs (a tool's step does what its input
says, whatever its words) are searched by reflection (train/words.py: the step's own worker
reads failures, what the step was shown and the right answers, and proposes other words; they
are kept only where they are right more often on that kind's questions). The search sees half
of a kind's questions (every other one); the words it settles on are then run, beside the words
they replace, on the other half, which the search never ran (issue 68: words chosen on the
questions they are judged on were kept for object counting, 7 right of 8 against 5, and sent a
1.5B coder inventing quantities on letter questions). Words right on more questions on both
halves become a new shape (`coder[program] > python[run]<0 > coder[check_objects]<0,1`: the
words travel inside the shape), which the caller measures on every training question; the head
then picks among it and the shapes it came from by the question's hidden state, so words
learned on one kind serve wherever they earn, and the head's cross-validated fit (head_fit.py)
judges them on questions it did not see.

The model calls are the caller's (`trial`, `propose`), so the choices here are exact in tests.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from conductor_cli.evals.records import Problem
from conductor_cli.policy.shapes import Shape
from conductor_cli.policy.words import WORDS, alternatives
from conductor_cli.train.words import ENDS_ANSWER, ENDS_PROGRAM, WordsSearch, learn_words

MIN_KIND = 6  # a kind with fewer training questions has too few to halve and tell words apart
MIN_GAIN = 1  # right answers the learned words must add on each half: where chosen, and held out
NAME_CHARS = 24

# Runs `shape` on one training question: (right, what the step saw and replied, for the
# proposer).
Trial = Callable[[Shape, Problem], tuple[bool, str]]
# Asks `worker` the reflection prompt; the int tells proposals apart (their seed).
Propose = Callable[[str, str, int], str]


@dataclass(frozen=True)
class StepWords:
    """One step's search: the words it started from and the best found (the same where none
    beat them), with the right answers of each on the kind's questions."""

    step: int
    start: str
    words: str
    right_before: int
    right_after: int
    trials: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HeldOut:
    """The words found and the words they replace on a kind's questions the search never ran."""

    questions: int
    right_before: int
    right_after: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Learned:
    """A kind's search: the shape searched, each model step's words in turn (on the half of
    the kind's questions searched), those words on the other half (`held_out`; None where no
    words beat the shape's own), and the new shape (None unless the words are right on at least
    MIN_GAIN more questions of each half)."""

    kind: str
    base: str  # the label of the shape whose words were searched
    steps: tuple[StepWords, ...]
    n: int  # the questions searched
    shape: Shape | None
    held_out: HeldOut | None = None

    @property
    def right_before(self) -> int:
        return self.steps[0].right_before

    @property
    def right_after(self) -> int:
        return self.steps[-1].right_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "base": self.base,
            "questions": self.n,
            "right_before": self.right_before,
            "right_after": self.right_after,
            "steps": [step.to_dict() for step in self.steps],
            "held_out": self.held_out.to_dict() if self.held_out is not None else None,
            "shape": self.shape.label if self.shape is not None else None,
        }


def learned_name(word: str, kind: str) -> str:
    """`check` learned on `bbh:object_counting` -> `check_bbh_object_counting` (a shape label's
    words name: lower-case letters, digits and `_`)."""
    slug = re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_")[:NAME_CHARS] or "kind"
    return f"{word}_{slug}"


def learned_step(shape: Shape, tools: frozenset[str]) -> int | None:
    """The last step a model runs: its words are what a tool's output or the answer rests on."""
    steps = model_steps(shape, tools)
    return steps[0] if steps else None


def model_steps(shape: Shape, tools: frozenset[str]) -> list[int]:
    """The steps a model runs, last first: the order their words are searched in (a tool's
    step does what its input says, whatever its words)."""
    return [i for i in range(len(shape.workers) - 1, -1, -1) if shape.workers[i] not in tools]


def words_calls(
    shapes: Sequence[Shape],
    training: Sequence[Problem],
    tools: frozenset[str],
    rounds: int,
    per_round: int = 2,
) -> int:
    """At most the worker calls learn_word_shapes and the measuring of what it keeps make:
    for each kind it searches, the costliest shape's every trial on each of the kind's
    questions (each step a call), the proposals, the held-out half run twice, and a kept shape
    on every training question; train's estimate and --dry-run add it to the rest."""
    searchable = [s for s in shapes if learned_step(s, tools) is not None]
    if not searchable:
        return 0

    def trials(shape: Shape) -> int:
        return sum(
            1 + len(alternatives(shape.word(step))) + (rounds * per_round if k == 0 else 0)
            for k, step in enumerate(model_steps(shape, tools))
        )

    per_question = max(trials(s) * len(s.workers) for s in searchable)
    longest = max(len(s.workers) for s in searchable)
    kinds = Counter(p.category for p in training if p.category)
    searched = [n for n in kinds.values() if n >= MIN_KIND]
    return sum(
        per_question * ((n + 1) // 2)
        + rounds * per_round
        + 2 * longest * (n // 2)
        + longest * len(training)
        for n in searched
    )


def learn_word_shapes(
    shapes: Sequence[Shape],
    table: np.ndarray,
    target: np.ndarray,
    training: Sequence[Problem],
    tools: frozenset[str],
    trial: Trial,
    propose: Propose,
    *,
    rounds: int,
    per_round: int = 2,
    on_kind: Callable[[int, int, str], None] = lambda done, total, kind: None,
) -> list[Learned]:
    """One search per kind of `training` (at least MIN_KIND questions, not all right already):
    the words of each model step of the shape with the best mean `target` on that kind
    (`table`: the rewards, (n, S)). Returns every search, the kept ones with their new shape."""
    kinds: dict[str, list[int]] = {}
    for q, problem in enumerate(training):
        if problem.category:
            kinds.setdefault(problem.category, []).append(q)
    found: list[Learned] = []
    todo = [(kind, rows) for kind, rows in kinds.items() if len(rows) >= MIN_KIND]
    searchable = [s for s, shape in enumerate(shapes) if learned_step(shape, tools) is not None]
    for done, (kind, rows) in enumerate(todo):
        on_kind(done, len(todo), kind)
        if not searchable:
            break
        best = max(searchable, key=lambda s: (target[rows, s].mean(), -s))
        if table[rows, best].mean() >= 1.0:
            continue  # every question of the kind right: nothing to learn from
        found.append(_search(shapes[best], kind, [training[q] for q in rows], tools, trial,
                             propose, rounds, per_round))  # fmt: skip
    return found


def _search(
    base: Shape,
    kind: str,
    problems: list[Problem],
    tools: frozenset[str],
    trial: Trial,
    propose: Propose,
    rounds: int,
    per_round: int,
) -> Learned:
    """Each model step of `base` in turn, last first, from the words the steps before settled
    on: the other words of its role in policy/words.WORDS, then (the last step only) `rounds`
    of reflection; on every other one of `problems`, the rest held out to confirm the words."""
    searched, held = problems[0::2], problems[1::2]
    shape, found = base, []
    for k, step in enumerate(model_steps(base, tools)):
        name = learned_name(base.word(step), kind)
        library = {WORDS[alt]: alt for alt in alternatives(base.word(step))}
        search = _search_step(shape, step, name, list(library), searched, tools, trial, propose,
                              rounds if k == 0 else 0, per_round)  # fmt: skip
        first, best = search.trials[0], search.best
        start = shape.text(step)
        found.append(StepWords(step, start, best.words, first.right, best.right,
                               len(search.trials)))  # fmt: skip
        if best.words != start:
            shape = shape.with_words(step, library.get(best.words, name), best.words)
    gain = found[-1].right_after - found[0].right_before if found else 0
    if shape == base or gain < MIN_GAIN:
        return Learned(kind, base.label, tuple(found), len(searched), None)
    before = sum(trial(base, problem)[0] for problem in held)
    after = sum(trial(shape, problem)[0] for problem in held)
    kept = shape if after - before >= MIN_GAIN else None
    return Learned(kind, base.label, tuple(found), len(searched), kept,
                   HeldOut(len(held), before, after))  # fmt: skip


def _search_step(
    shape: Shape,
    step: int,
    name: str,
    candidates: list[str],
    problems: list[Problem],
    tools: frozenset[str],
    trial: Trial,
    propose: Propose,
    rounds: int,
    per_round: int,
) -> WordsSearch:
    """words.learn_words on one step of `shape`, the other steps' words fixed."""
    asked = [0]

    def run(words: str, problem: Problem) -> tuple[bool, str]:
        tried = shape if words == shape.text(step) else shape.with_words(step, name, words)
        return trial(tried, problem)

    def ask(prompt: str) -> str:
        asked[0] += 1
        return propose(shape.workers[step], prompt, asked[0])

    # A program a tool runs must stay a program, whatever the words say of the work.
    read_by_tool = any(
        step in shape.sees[j] and shape.workers[j] in tools
        for j in range(step + 1, len(shape.sees))
    )
    return learn_words(
        run, ask, problems, shape.text(step), rounds=rounds, per_round=per_round,
        ending=ENDS_PROGRAM if read_by_tool else ENDS_ANSWER, candidates=candidates,
    )  # fmt: skip


def step_context(outputs: Sequence[tuple[str, str]], step: int, limit: int = 240) -> str:
    """What a proposer reads of one run: each step's worker and the start of its output, the
    searched step marked (a check step's failure is only understood beside the program's
    output it read)."""
    lines = []
    for i, (worker, output) in enumerate(outputs):
        mark = " (the step whose instruction you improve)" if i == step else ""
        text = " ".join(output.split())[:limit]
        lines.append(f"step {i}, {worker}{mark}: {text}")
    return "\n".join(lines)
