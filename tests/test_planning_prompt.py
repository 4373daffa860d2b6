"""The planning prompt's example workflows (issue 17): one per shape, on topics unlike the
questions users ask, in the pool's own names, within max_steps; and the real embedded conductor
writes its own tasks instead of copying the examples' word for word."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.backends.prefix_state import PrefixStateStore
from conductor_cli.config.settings import DEFAULT_WORKER, Config
from conductor_cli.run.planner import (
    EXAMPLES,
    Conductor,
    WorkerInfo,
    example_workflows,
    plan_messages,
    system_prompt,
)
from conductor_cli.run.workflow import (
    TASK_MAX_WORDS,
    TASK_MIN_WORDS,
    TASK_VERBS,
    WORD_MAX_CHARS,
    parse_workflow,
)

THREE = [
    WorkerInfo("solver", "good at arithmetic and logic"),
    WorkerInfo("coder", "writes and fixes code"),
    WorkerInfo("writer", "writes, translates and explains"),
]
ONE_STEP = ((),)
SOLVE_CHECK = ((), (0,))
PARALLEL_COMPARE = ((), (), (0, 1))
PLAN_WRITE_REVIEW = ((), (0,), (1,))


def shapes(max_steps: int, names: list[str]) -> list[tuple[tuple[int, ...], ...]]:
    return [tuple(s.sees for s in w.steps) for _, w in example_workflows(names, max_steps)]


def test_four_shapes_when_three_steps_fit() -> None:
    for max_steps in (3, 4, 5, 10):
        got = shapes(max_steps, ["a", "b", "c"])
        assert sorted(got) == sorted([ONE_STEP, SOLVE_CHECK, PARALLEL_COMPARE, PLAN_WRITE_REVIEW])
    # Fewer steps allowed: only the examples that fit, never a cut-down one.
    assert shapes(2, ["a"]) == [SOLVE_CHECK, ONE_STEP]
    assert shapes(1, ["a"]) == [ONE_STEP]


@pytest.mark.parametrize("max_steps", [1, 2, 3, 5])
@pytest.mark.parametrize("names", [["local"], ["solver", "coder", "writer"], ["x", "y"]])
def test_examples_use_the_pools_names_and_fit_the_grammar(names: list[str], max_steps: int) -> None:
    pool = [WorkerInfo(n, "") for n in names]
    system = system_prompt(pool, max_steps)
    used: set[str] = set()
    for question, workflow in example_workflows(names, max_steps):
        assert 1 <= len(workflow.steps) <= max_steps
        # Each example is a sentence the pool's grammar could produce, shown after its question.
        assert parse_workflow(workflow.to_json(), names, max_steps) == workflow
        assert f"Question: {question}\n{workflow.to_json()}" in system
        for step in workflow.steps:
            words = step.task.split()
            assert TASK_MIN_WORDS <= len(words) <= TASK_MAX_WORDS
            assert all(len(w) <= WORD_MAX_CHARS and '"' not in w for w in words)
            assert words[0] in TASK_VERBS
            used.add(step.worker)
    # The names are cycled through, so a pool's every worker appears once it fits.
    steps_shown = sum(len(w.steps) for _, w in example_workflows(names, max_steps))
    assert used == set(names[: min(len(names), steps_shown)])
    # The old generic examples, which the 135M conductor copied, are gone.
    assert "Easy question" not in system and "Solve the problem step by step" not in system


def test_example_questions_are_unlike_user_questions_and_tasks_do_not_restate_them() -> None:
    assert len(EXAMPLES) == 4
    for question, steps in EXAMPLES:
        for task, _ in steps:
            assert question.lower().rstrip("?.") not in task.lower()


def test_the_prompt_stays_compact() -> None:
    # Decoded once and saved, but every token still costs at training time.
    text = plan_messages("q", THREE, (), 5)[0]["content"]
    assert len(text) < 2400, len(text)


# ---------------------------------------------------------------- the real embedded conductor

QUESTIONS = [
    "What is the capital of France?",
    "What is 17 * 23?",
    "Write a Python function that reverses a string.",
    "Translate 'good night' into Italian.",
    "Why do cats purr?",
]


@pytest.fixture(scope="module")
def conductor_backend(gguf_path: Path) -> Iterator[LlamaCppBackend]:
    c = Config().conductor  # the embedded default's llama.cpp settings
    # With the saved prompt state, as the runtime plans (runtime.py).
    models = LlamaModels(
        n_ctx=c.n_ctx, kv_cache_type=c.kv_cache_type, state_store=PrefixStateStore.default()
    )
    yield LlamaCppBackend(models, gguf_path, "test")
    models.close()


def test_the_real_conductor_writes_its_own_tasks(conductor_backend: LlamaCppBackend) -> None:
    """Default settings (temperature, seed, max_steps), SmolLM2 alone and a pool of three:
    no planned task is an example's task word for word (the old prompt: 5 of 12 tasks), and
    every task is an instruction (the grammar opens it with a verb), never an answer."""
    c = Config().conductor
    conductor = Conductor(conductor_backend, temperature=c.temperature, seed=c.seed)
    default_pool = [WorkerInfo(DEFAULT_WORKER.name, DEFAULT_WORKER.description)]
    copied, planned = [], []
    for i, question in enumerate(QUESTIONS):
        pool = default_pool if i % 2 == 0 else THREE
        names = [w.name for w in pool]
        examples = {
            " ".join(s.task.lower().split())
            for _, w in example_workflows(names, c.max_steps)
            for s in w.steps
        }
        plan = conductor.plan(question, pool, (), c.max_steps)
        for step in plan.workflow.steps:
            planned.append(step.task)
            if " ".join(step.task.lower().split()) in examples:
                copied.append((question, step.task))
    assert planned and not copied, copied
    assert all(task.split()[0] in TASK_VERBS for task in planned), planned
