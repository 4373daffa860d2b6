"""The real default GGUF in llama.cpp plans valid workflows, every time, for many questions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.backends.prefix_state import PrefixStateStore
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import Conductor, WorkerInfo
from conductor_cli.run.workflow import parse_workflow

POOL = [
    WorkerInfo("local", "SmolLM2 135M: tiny, fast, weak"),
    WorkerInfo("coder", "writes and fixes Python code"),
    WorkerInfo("reviewer", "reviews answers and code for mistakes"),
]
QUESTIONS = [
    "What is the capital of France?",
    "Write a Python function that checks whether a number is prime.",
    "Explain why the sky is blue.",
    "What is 17 * 23?",
    "Summarize the plot of Hamlet in two sentences.",
    "Fix the bug in the attached sorting function.",
    "Translate 'good morning' into Spanish and German.",
    "Is 2**61 - 1 a prime number? Justify the answer.",
    "Write a haiku about autumn rain.",
    "Give three uses of a Python dictionary, with examples.",
    "Which is larger, 9.11 or 9.9?",
    "Design a SQL schema for a library with books, members and loans.",
    "What causes the seasons on Earth?",
    "Write a regular expression that matches an email address and test it.",
    "Convert 100 degrees Fahrenheit to Celsius.",
    "List the planets of the solar system in order from the sun.",
    "Refactor a long Python function into smaller ones; explain the steps.",
    "Who wrote 'Pride and Prejudice', and when?",
    "Plan, write and check a bash script that counts lines in every .py file.",
    "What is the time complexity of binary search, and why?",
]


@pytest.fixture(scope="module")
def conductor_backend(gguf_path: Path) -> Iterator[LlamaCppBackend]:
    # With the saved prompt state, as the runtime plans (runtime.py): the fixed planning
    # prompt is read once for the module, not once a plan.
    models = LlamaModels(n_ctx=4096, state_store=PrefixStateStore.default())
    yield LlamaCppBackend(models, gguf_path, "test")
    models.close()


def test_seven_questions_all_give_valid_workflows(conductor_backend: LlamaCppBackend) -> None:
    # Every third question of the twenty (the suite's time; bench/copy_rate.py plans all).
    names = [w.name for w in POOL]
    limits = [1, 2, 3, 5]
    attachment = (Attachment("stdin", "def sort(xs):\n    return xs.sort()\n"),)
    step_counts = []
    for i, question in enumerate(QUESTIONS[::3]):
        max_steps = limits[i % len(limits)]
        conductor = Conductor(conductor_backend, temperature=0.7, seed=100 + i)
        plan = conductor.plan(
            question, POOL, attachment if "attached" in question else (), max_steps
        )
        # The raw reply itself is a valid workflow: no repair was needed or done.
        again = parse_workflow(plan.reply, names, max_steps)
        assert again == plan.workflow and again.repairs == ()
        assert 1 <= len(plan.workflow.steps) <= max_steps
        for k, step in enumerate(plan.workflow.steps):
            assert step.worker in names
            assert all(0 <= j < k for j in step.sees)
            assert 3 <= len(step.task.split()) <= 24
        step_counts.append(len(plan.workflow.steps))
    assert len(step_counts) == 7


def test_grammar_stops_a_runaway_list(conductor_backend: LlamaCppBackend) -> None:
    """Unconstrained, SmolLM2 can loop on `1, 1, 1, ...`; under the grammar a plan always ends."""
    conductor = Conductor(conductor_backend, temperature=1.0, seed=7)
    plan = conductor.plan("Plan many steps that all see each other.", POOL, (), 10)
    assert plan.tokens_out < 10 * 450
    assert len(plan.workflow.steps) <= 10


def test_the_step_penalty_turns_copied_multi_step_plans_into_one_step(
    conductor_backend: LlamaCppBackend,
) -> None:
    """Unpriced, the 135M conductor copies its prompt's multi-step examples onto short facts;
    priced, the same conductor, prompt and seed plan one step, still valid, still its own task."""
    facts = [
        "What is the capital of France?",
        "What is the capital of Japan?",
        "What is the capital of Germany?",
        "In which year did the Berlin Wall fall?",
        "What is 7 + 8?",
        "Who wrote Hamlet?",
    ]
    pool = POOL[:1]

    def steps(penalty: float) -> list[int]:
        conductor = Conductor(conductor_backend, temperature=0.2, seed=0, step_penalty=penalty)
        return [len(conductor.plan(q, pool, (), 5).workflow.steps) for q in facts]

    free, priced = steps(0.0), steps(4.0)
    assert sum(n > 1 for n in free) >= 3, free
    assert priced == [1] * len(facts), priced


def test_a_cancelled_run_stops_planning_between_tokens(
    conductor_backend: LlamaCppBackend,
) -> None:
    """A server's client that hangs up while the conductor plans (its run's cancel flag set)
    stops the plan at the next token instead of leaving it to finish; the model then plans the
    next question as if nothing had happened (same call, same plan)."""
    from conductor_cli.errors import RunCancelled

    question = QUESTIONS[1]
    asked = 0

    def cancelled() -> bool:
        nonlocal asked
        asked += 1
        return asked > 3  # the client leaves after three tokens

    def plan() -> str:
        return (
            Conductor(conductor_backend, temperature=0.7, seed=5).plan(question, POOL, (), 3).reply
        )

    before = plan()
    stopped = Conductor(conductor_backend, temperature=0.7, seed=5, cancelled=cancelled)
    with pytest.raises(RunCancelled):
        stopped.plan(question, POOL, (), 3)
    assert asked == 4  # asked before each token; none generated after it said yes
    assert plan() == before
