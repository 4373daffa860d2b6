"""A checking step that copies the question's template ("Answer: <your answer>") instead of
answering: where it saw a program's run that printed a result, that result is the run's answer
(run/template_slot.py; issue 68, item 5)."""

from __future__ import annotations

import pytest

from conductor_cli.backends.base import Request
from conductor_cli.config.settings import Config, WorkerConfig
from conductor_cli.problems import QA_INSTRUCTION
from conductor_cli.run.engine import Engine, StepResult
from conductor_cli.run.pool import Pool, Worker
from conductor_cli.run.template_slot import answer, is_slot
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.testing.fake_backend import FakeBackend, fake_worker, user_text
from conductor_cli.tools import tool_backend
from conductor_cli.tools.examples import TEST

QUESTION = f"write pancake backwards\n{QA_INSTRUCTION}"


@pytest.mark.parametrize(
    ("reply", "slot"),
    [
        ("Answer: <your answer>", True),
        ("The reversed word is below.\nAnswer: <your answer>.", True),
        ('Spell it backwards: Pan soup. Answer: "<your answer>"', True),
        ("**Answer:** <your answer>", True),
        ("Answer: ekacnap", False),
        ("ekacnap", False),
        ("Answer: <ekacnap>", False),  # not the question's slot
        ("Answer: <your answer> is ekacnap", False),
    ],
)  # fmt: skip
def test_a_reply_is_a_slot_only_where_its_final_answer_is_the_questions_slot(
    reply: str, slot: bool
) -> None:
    assert is_slot(QUESTION, reply) is slot
    assert not is_slot("write pancake backwards", "Answer: <your answer>")  # no such template


def python_worker() -> Worker:
    wc = WorkerConfig("python", "tool:python")
    return Worker(wc, tool_backend("python", Config(workers=(wc,)), "workers[1]"))


def test_a_check_that_copies_the_template_gives_way_to_what_the_program_printed() -> None:
    """The real sandboxed python tool runs the program; the checking step is a fake worker
    that copies the template, as the 1.5B coder did (fault injection)."""
    said = {"program": "```python\nprint('pancake'[::-1])\n```", "check": "Answer: <your answer>"}

    def reply(request: Request) -> str:
        return said["check" if "Check it." in user_text(request) else "program"]

    copier = FakeBackend(reply=reply, name="copies_template")
    pool = Pool((fake_worker("coder", copier), python_worker()))
    flow = Workflow(
        (
            Step("coder", "Write it.", ()),
            Step("python", "Run the program from step 0.", (0,)),
            Step("coder", "Check it.", (0, 1)),
        )
    )

    def run(workflow: Workflow) -> tuple[StepResult, ...]:
        return tuple(Engine(pool, lambda event: None).run_steps(QUESTION, workflow, ()))

    steps = run(flow)
    assert steps[1].output.strip() == "ekacnap"
    assert steps[2].output == "Answer: <your answer>"  # the step keeps what it said
    assert answer(QUESTION, steps, pool) == "ekacnap"
    # A test of examples is no answer: the reply stays.
    tested = Workflow((flow.steps[0], Step("python", TEST, (0,)), flow.steps[2]))
    assert answer(QUESTION, run(tested), pool) == "Answer: <your answer>"
    # Nor is a run that failed.
    said["program"] = "```python\nprint(undefined_name)\n```"
    steps = run(flow)
    assert steps[1].output.startswith("The program failed")
    assert answer(QUESTION, steps, pool) == "Answer: <your answer>"
    # A check that answers is the answer, whatever the run printed.
    said["check"] = "Answer: ekacnap!"
    assert answer(QUESTION, run(flow), pool) == "Answer: ekacnap!"
