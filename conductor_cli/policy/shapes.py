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
from collections.abc import Sequence
from dataclasses import dataclass

from conductor_cli.errors import InputError
from conductor_cli.run.workflow import Step, Workflow, task_rules

MAX_SHAPE_STEPS = 2
MAX_SHAPES = 60

# The words of each step when a shape's reward is measured: the head learns routing, so the
# words are held fixed (the conductor writes its own when the trained head is used).
ANSWER_TASK = "Answer the question."
CHECK_TASK = "Check the earlier answer to the question and give the correct final answer."


@dataclass(frozen=True)
class Shape:
    workers: tuple[str, ...]
    sees: tuple[tuple[int, ...], ...]

    @property
    def label(self) -> str:
        """`w0`, `w0 > w1`, `w0 > w1<0` (step 2 sees step 1); `keep` for the empty shape."""
        if not self.workers:
            return "keep"
        parts = []
        for worker, sees in zip(self.workers, self.sees, strict=True):
            parts.append(worker + ("<" + ",".join(map(str, sees)) if sees else ""))
        return " > ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {"workers": list(self.workers), "sees": [list(s) for s in self.sees]}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Shape:
        workers = d["workers"]
        sees = d["sees"]
        if not isinstance(workers, list) or not isinstance(sees, list):
            raise ValueError("a shape needs lists 'workers' and 'sees'")
        return cls(tuple(str(w) for w in workers), tuple(tuple(int(i) for i in s) for s in sees))

    def workflow(self) -> Workflow:
        """The shape with the fixed training words."""
        steps = []
        for worker, sees in zip(self.workers, self.sees, strict=True):
            steps.append(Step(worker, CHECK_TASK if sees else ANSWER_TASK, sees))
        return Workflow(tuple(steps))

    def matches(self, workflow: Workflow) -> bool:
        return (
            tuple(s.worker for s in workflow.steps) == self.workers
            and tuple(s.sees for s in workflow.steps) == self.sees
        )


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
    for worker, sees in zip(shape.workers, shape.sees, strict=True):
        head = json.dumps({"worker": worker})[:-1] + ', "task": '
        tail = ', "sees": ' + json.dumps(list(sees)) + "}"
        steps.append(f"{_lit(head)} task {_lit(tail)}")
    body = ' ", " '.join(steps)
    return "\n".join([f'root ::= "{{\\"steps\\": [" {body} "]}}"', *task_rules()]) + "\n"


def fixed_grammar(shape: Shape) -> str:
    """A llama.cpp grammar with one sentence: the shape with the training words
    (`shape.workflow()`), for a head trained with `--tasks fixed`."""
    return f"root ::= {_lit(shape.workflow().to_json())}\n"
