"""Workflow shapes: which worker runs each step and what each step sees, without the words.

A head learns to pick a shape; the conductor then writes each step's task under a grammar that
fixes the shape. Shapes of at most two steps are enumerated: n workers give n + 2n² shapes
(21 for 3 workers, 36 for 4, 55 for 5); the adaptive search adds three-step joins
(`join_shapes`) where conductor.max_steps allows three and the pool is small enough. Beyond
MAX_SHAPES a head of one score per shape is too large to learn from a few hundred questions,
and the head method refuses the pool; the LoRA methods sample workflows from the conductor
instead, and draw exploration shapes from any number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from conductor_cli.errors import InputError
from conductor_cli.policy import words
from conductor_cli.run.workflow import Step, Workflow, task_rules

MAX_SHAPE_STEPS = 2
MAX_SHAPES = 60

# The words of each step when a shape's reward is measured, unless the shape names others
# (policy/words.py).
ANSWER_TASK = words.ANSWER
CHECK_TASK = words.CHECK


@dataclass(frozen=True)
class Shape:
    workers: tuple[str, ...]
    sees: tuple[tuple[int, ...], ...]
    # Each step's words by name (policy/words.WORDS); empty: `answer`, `check` where it sees.
    words: tuple[str, ...] = ()
    # Each step's words themselves where a training learned some (train/word_shapes.py): the
    # names above are then the learned ones' (`check_objects`), not entries of WORDS.
    texts: tuple[str, ...] = ()

    def word(self, step: int) -> str:
        return self.words[step] if self.words else words.default(self.sees[step])

    def text(self, step: int) -> str:
        """What step `step` is told."""
        return self.texts[step] if self.texts else words.WORDS[self.word(step)]

    def with_words(self, step: int, name: str, text: str) -> Shape:
        """This shape with step `step` told `text`, named `name` (learned words)."""
        names = [self.word(i) for i in range(len(self.workers))]
        texts = [self.text(i) for i in range(len(self.workers))]
        names[step], texts[step] = name, text
        return Shape(self.workers, self.sees, tuple(names), tuple(texts))

    @property
    def label(self) -> str:
        """`w0`, `w0 > w1`, `w0 > w1<0` (step 2 sees step 1), `w0[program] > w1[run]<0` (words
        other than the default); `keep` for the empty shape."""
        if not self.workers:
            return "keep"
        parts = []
        for i, (worker, sees) in enumerate(zip(self.workers, self.sees, strict=True)):
            named = f"[{self.word(i)}]" if self.words else ""
            parts.append(worker + named + ("<" + ",".join(map(str, sees)) if sees else ""))
        return " > ".join(parts)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"workers": list(self.workers), "sees": [list(s) for s in self.sees]}
        if self.words:
            d["words"] = list(self.words)
        if self.texts:
            d["texts"] = list(self.texts)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Shape:
        workers = d["workers"]
        sees = d["sees"]
        named = d.get("words", [])
        texts = d.get("texts", [])
        if not isinstance(workers, list) or not isinstance(sees, list):
            raise ValueError("a shape needs lists 'workers' and 'sees'")
        if not isinstance(texts, list) or (texts and len(texts) != len(workers)):
            raise ValueError("a shape's 'texts' give the words of every step")
        if not isinstance(named, list) or (not texts and any(w not in words.WORDS for w in named)):
            raise ValueError(f"a shape's 'words' name entries of {', '.join(words.WORDS)}")
        return cls(
            tuple(str(w) for w in workers),
            tuple(tuple(int(i) for i in s) for s in sees),
            tuple(str(w) for w in named),
            tuple(str(t) for t in texts),
        )

    def workflow(self) -> Workflow:
        """The shape with its words (the training words where it names none)."""
        steps = []
        for i, (worker, sees) in enumerate(zip(self.workers, self.sees, strict=True)):
            steps.append(Step(worker, self.text(i), sees))
        return Workflow(tuple(steps))

    def matches(self, workflow: Workflow) -> bool:
        return (
            tuple(s.worker for s in workflow.steps) == self.workers
            and tuple(s.sees for s in workflow.steps) == self.sees
        )


_PART = re.compile(
    r"(?P<worker>[^\s\[<>]+)(?:\[(?P<word>[a-z0-9_]+)\])?(?:<(?P<sees>\d+(?:,\d+)*))?"
)


def parse_shape(label: str, workers: Sequence[str]) -> Shape:
    """The shape a label names (`Shape.label`'s form: `coder`, `coder > python<0`,
    `coder[program] > python[run]<0`), its workers among `workers`; InputError names what is
    wrong in one line."""
    steps = [part.strip() for part in label.split(">")]
    named, seen, said = [], [], []
    for i, part in enumerate(steps):
        m = _PART.fullmatch(part)
        if m is None:
            raise InputError(f"shape {label!r}: step {i} {part!r} is not WORKER[words]<i,j")
        if m["worker"] not in workers:
            raise InputError(
                f"shape {label!r}: no worker {m['worker']!r} in the pool ({', '.join(workers)})"
            )
        sees = tuple(int(x) for x in m["sees"].split(",")) if m["sees"] else ()
        if any(j >= i for j in sees):
            raise InputError(f"shape {label!r}: step {i} can see only earlier steps")
        if m["word"] is not None and m["word"] not in words.WORDS:
            raise InputError(
                f"shape {label!r}: no words {m['word']!r}; use one of {', '.join(words.WORDS)}"
            )
        named.append(m["worker"])
        seen.append(sees)
        said.append(m["word"])
    if any(w is not None for w in said) and None in said:
        raise InputError(f"shape {label!r}: name the words of every step, or of none")
    return Shape(tuple(named), tuple(seen), tuple(w for w in said if w is not None))


def enumerate_shapes(workers: Sequence[str], max_steps: int = MAX_SHAPE_STEPS) -> list[Shape]:
    """Every shape of 1..min(max_steps, 2) steps over `workers`, in a fixed order (the head
    method bounds how many it takes: head_method.candidate_shapes)."""
    names = list(workers)
    if not names:
        raise InputError("the pool has no workers to train a conductor for.")
    shapes = [Shape((w,), ((),)) for w in names]
    if min(max_steps, MAX_SHAPE_STEPS) >= 2:
        for first in names:
            for second in names:
                shapes.append(Shape((first, second), ((), ())))
                shapes.append(Shape((first, second), ((), (0,))))
    return shapes


def program_shape(model: str, tool: str) -> Shape:
    """A model writes a program and the python tool runs it, in those words:
    `model[program] > tool[run]<0`."""
    return Shape((model, tool), ((), (0,)), ("program", "run"))


def repair_shape(model: str, tool: str) -> Shape:
    """Write, test, repair (issue 69): a model answers (code), the python tool runs that code
    on the examples the question shows, the model reads both and gives the code fixed where
    an example failed: `model > tool[test]<0 > model[repair]<0,1`."""
    return Shape((model, tool, model), ((), (0,), (0, 1)), ("answer", "test", "repair"))


def program_shapes(models: Sequence[str], tools: Sequence[str], max_steps: int) -> list[Shape]:
    """The program-aided shapes a training measures by default where the pool has a tool that
    runs programs: each model writes a program the tool runs, and, where three steps are
    allowed, the model then reads both and answers (`m[program] > t[run]<0 > m[check]<0,1`).
    The words are the program's own (a model step a python step sees is asked for a program
    anyway, run/messages.feeds_python, after "Answer the question."); a chain of three steps
    is not among the enumerated shapes, and it is the one the public sets' training kept
    (issue 57)."""
    shapes = []
    for model in models:
        for tool in tools:
            shapes.append(program_shape(model, tool))
            if max_steps >= 3:
                shapes.append(
                    Shape((model, tool, model), ((), (0,), (0, 1)), ("program", "run", "check"))
                )
    return shapes


def single_index(shapes: Sequence[Shape]) -> dict[str, int]:
    """Each worker's one-step shape: its position in `shapes`."""
    return {s.workers[0]: i for i, s in enumerate(shapes) if len(s.workers) == 1}


def join_shapes(workers: Sequence[str]) -> list[Shape]:
    """Three steps: two workers answer independently, a third sees both (`a > b > c<0,1`), for
    each pair a before b in the pool's order and each c: n * n(n-1)/2 shapes."""
    names = list(workers)
    return [
        Shape((a, b, c), ((), (), (0, 1)))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        for c in names
    ]


# A later round's empty workflow: keep the team's answer (`train --rounds`).
KEEP = Shape((), ())


def _lit(text: str) -> str:
    return json.dumps(text)


def shape_grammar(shape: Shape) -> str:
    """A llama.cpp grammar whose sentences are workflows of exactly this shape: the workers and
    what each step sees are fixed, the conductor writes only the tasks (the same word bounds as
    the pool's grammar). The empty shape's one sentence is the keep reply."""
    if not shape.workers:
        return fixed_grammar(shape)
    steps = []
    for i, (worker, sees) in enumerate(zip(shape.workers, shape.sees, strict=True)):
        head = json.dumps({"worker": worker})[:-1] + ', "task": '
        tail = ', "sees": ' + json.dumps(list(sees)) + "}"
        # Words a shape names are part of it: the conductor writes only the others.
        task = _lit(json.dumps(shape.text(i))) if shape.words else "task"
        steps.append(f"{_lit(head)} {task} {_lit(tail)}")
    body = ' ", " '.join(steps)
    return "\n".join([f'root ::= "{{\\"steps\\": [" {body} "]}}"', *task_rules()]) + "\n"


def fixed_grammar(shape: Shape) -> str:
    """A llama.cpp grammar with one sentence: the shape with the training words
    (`shape.workflow()`), for a head trained with `--tasks fixed`."""
    return f"root ::= {_lit(shape.workflow().to_json())}\n"
