"""The tests a question comes with, run on the code of its answer (issue 69), whatever workflow
was planned: a rule of the run, not a learned choice (the head never trained on them).

- A user's test file attached (`--file test_bug.py`): the code of the answer is run on those
  tests by a tool that runs programs, and its writer repairs what failed. A user who hands
  over tests expects them run.
- Else, a question that shows code examples (doctest lines, an assert, a function's
  signature with examples: tools/examples.shows_code_examples): the answer's code is run on
  those examples, and where one fails its writer writes the code again shown only what failed
  (tools/examples.RETRY), conductor.code_retries times at most (4); a piped code file is shown
  to those tries as its outline (tools/outline.py), not with the bodies that failed. An answer
  with no code is kept as it is; a question without such examples gets no step.

The tests run in the sandbox like any program (tools/examples.py), and the trace's test step
lists each test and what it said. Code that passes them all is kept without another call
(run/engine's `kept`): where the first answer passes, the rule costs one sandboxed run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from conductor_cli.config.settings import CODE_RETRIES, MAX_STEPS_LIMIT
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.tools.examples import REPAIR, RETRY, TEST, holds_tests, shows_code_examples


class _Member(Protocol):
    """A worker as the planner lists it (run/planner.WorkerInfo)."""

    @property
    def name(self) -> str: ...
    @property
    def tool(self) -> bool: ...
    @property
    def runs_programs(self) -> bool: ...


def with_user_tests(
    workflow: Workflow,
    pool: Sequence[_Member],
    attachments: Sequence[Attachment],
    question: str = "",
    retries: int = CODE_RETRIES,
) -> Workflow:
    """`workflow` with test steps after its last where the last step is a model's, the pool
    runs programs and no step tests already: a test and a repair step where a test file is
    attached; else, where `question` or its attachments show code examples, a test and a
    retry step, `retries` times (conductor.code_retries); else `workflow` as it is. These
    steps come on top of the plan (max_steps bounds what the conductor plans, code_retries
    the tries), as far as a workflow's limit of MAX_STEPS_LIMIT steps leaves room."""
    tests = [a.name for a in attachments if a.name.endswith(".py") and holds_tests(a.text)]
    runner = next((w.name for w in pool if w.runs_programs), None)
    if runner is None or not workflow.steps:
        return workflow
    last = len(workflow.steps) - 1
    writer = workflow.steps[last].worker
    tools = {w.name for w in pool if w.tool}
    if writer in tools or any(s.task == TEST for s in workflow.steps):
        return workflow
    if not tests:
        shown = "\n\n".join([question, *(a.text for a in attachments)])
        return (
            _with_retries(workflow, runner, writer, retries)
            if shows_code_examples(shown)
            else workflow
        )
    if len(workflow.steps) + 2 > MAX_STEPS_LIMIT:
        said = f"tests attached ({', '.join(tests)}) not run: the plan has no room for 2 steps"
        return replace(workflow, repairs=(*workflow.repairs, said))
    steps = (
        *workflow.steps,
        Step(runner, TEST, (last,)),
        Step(writer, REPAIR, (last, last + 1)),
    )
    said = f"tests attached ({', '.join(tests)}): {runner} runs them on step {last}'s code"
    return Workflow(steps, (*workflow.repairs, said))


def _with_retries(workflow: Workflow, runner: str, writer: str, retries: int) -> Workflow:
    tries = min(retries, (MAX_STEPS_LIMIT - len(workflow.steps)) // 2)
    if tries < 1:
        return workflow
    said = (
        f"the question shows examples: {runner} runs step {len(workflow.steps) - 1}'s code on "
        f"them, and {writer} writes it again where one fails ({tries} times at most)"
    )
    return replace(with_retries(workflow, runner, writer, tries), repairs=(*workflow.repairs, said))


def with_retries(workflow: Workflow, runner: str, writer: str, tries: int) -> Workflow:
    """`workflow` then, `tries` times, `runner` testing the last step's code on the examples
    the question shows and `writer` writing it again shown only what failed:
    `... > runner[test]<n > writer[retry]<n+1 > runner[test]<n+2 > ...`."""
    steps = list(workflow.steps)
    for _ in range(tries):
        last = len(steps) - 1
        steps += [Step(runner, TEST, (last,)), Step(writer, RETRY, (last + 1,))]
    return replace(workflow, steps=tuple(steps))
