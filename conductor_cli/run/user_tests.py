"""A user's tests attached to a question (`--file test_bug.py`, issue 69): whatever workflow was
planned, the code of its answer is run on those tests by a tool that runs programs, and its
writer repairs what failed. A user who hands over tests expects them run; the head never
trained on attached files, so this is a rule of the run, not a learned choice. The tests
run in the sandbox like any program (tools/examples.py), and the trace's test step lists
each test and what it said. Code that passes them all is kept without another call
(run/engine's `kept`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.tools.examples import REPAIR, TEST, holds_tests


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
    max_steps: int,
) -> Workflow:
    """`workflow` with a test step and a repair step after its last, where a test file is
    attached, the pool runs programs, the last step is a model's and no step tests already;
    else `workflow` as it is."""
    tests = [a.name for a in attachments if a.name.endswith(".py") and holds_tests(a.text)]
    runner = next((w.name for w in pool if w.runs_programs), None)
    if not tests or runner is None or not workflow.steps:
        return workflow
    last = len(workflow.steps) - 1
    writer = workflow.steps[last].worker
    tools = {w.name for w in pool if w.tool}
    if writer in tools or any(s.task == TEST for s in workflow.steps):
        return workflow
    if len(workflow.steps) + 2 > max_steps:
        said = f"tests attached ({', '.join(tests)}) not run: the plan has no room for 2 steps"
        return replace(workflow, repairs=(*workflow.repairs, said))
    steps = (
        *workflow.steps,
        Step(runner, TEST, (last,)),
        Step(writer, REPAIR, (last, last + 1)),
    )
    said = f"tests attached ({', '.join(tests)}): {runner} runs them on step {last}'s code"
    return Workflow(steps, (*workflow.repairs, said))
