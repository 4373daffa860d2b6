"""Workflow parsing, validation, repair, and the grammar, against llama.cpp's own grammar parser."""

from __future__ import annotations

import json

import pytest

from conductor_cli.errors import WorkflowError
from conductor_cli.run.workflow import (
    TASK_MAX_CHARS,
    Step,
    Workflow,
    gbnf_grammar,
    max_plan_tokens,
    parse_workflow,
)

POOL = ["local", "coder", "reviewer"]

JSON_FORM = json.dumps(
    {
        "steps": [
            {
                "worker": "coder",
                "task": "Write a Python function that adds two numbers.",
                "sees": [],
            },
            {"worker": "reviewer", "task": "Check the function for bugs.", "sees": [0]},
            {
                "worker": "coder",
                "task": "Apply the review and give the final code.",
                "sees": [0, 1],
            },
        ]
    }
)
LIST_FORM = """Here is my plan.
model_id = [1, 2, 1]
subtasks = ["Write a Python function that adds two numbers.", "Check the function for bugs.", "Apply the review and give the final code."]
access_list = [[], [0], "all"]
"""  # noqa: E501


def test_list_form_parses_to_the_same_workflow_as_json() -> None:
    from_json = parse_workflow(JSON_FORM, POOL, 5)
    from_lists = parse_workflow(LIST_FORM, POOL, 5)
    assert from_json == from_lists
    assert from_json.steps[2] == Step("coder", "Apply the review and give the final code.", (0, 1))
    assert from_json.repairs == ()


def test_json_round_trips() -> None:
    wf = parse_workflow(JSON_FORM, POOL, 5)
    assert parse_workflow(wf.to_json(), POOL, 5) == wf


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"steps": [{"worker": "gpt9", "task": "Do it now", "sees": []}]}',
            "unknown worker 'gpt9'",
        ),
        ('{"steps": []}', "no steps"),
        (
            '{"steps": [{"worker": "local", "task": "   ", "sees": []}]}',
            "step 0: the task is empty",
        ),
        ("I think Paris is the answer.", "no workflow found"),
        ("{not json at all", "no workflow found"),
        ('{"steps": [{"worker": "local", "task": "Do it", "sees": "some"}]}', "sees must be"),
        ("model_id = [0, 1]\nsubtasks = ['a b c']\naccess_list = [[], []]\n", "different lengths"),
        ("model_id = [7]\nsubtasks = ['a b c']\naccess_list = [[]]\n", "outside the pool"),
        ("model_id = [0]\nsubtasks = ['a b c']\n", "together"),
    ],
)
def test_invalid_workflows_are_rejected_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(WorkflowError, match=message):
        parse_workflow(text, POOL, 5)


def test_too_many_steps_is_rejected() -> None:
    steps = [{"worker": "local", "task": f"Step number {i}", "sees": []} for i in range(6)]
    with pytest.raises(WorkflowError, match="6 steps; the limit is 5"):
        parse_workflow(json.dumps({"steps": steps}), POOL, 5)


def test_self_and_forward_references_are_dropped_and_recorded() -> None:
    text = json.dumps(
        {
            "steps": [
                {"worker": "local", "task": "First step here", "sees": [0, 1]},
                {"worker": "coder", "task": "Second step here", "sees": [1, 0, 0, 2]},
            ]
        }
    )
    wf = parse_workflow(text, POOL, 5)
    assert wf.steps[0].sees == ()
    assert wf.steps[1].sees == (0,)
    assert any("step 0: dropped references to steps [0, 1]" in r for r in wf.repairs)
    assert any("step 1: dropped references to steps [1, 2]" in r for r in wf.repairs)


def test_clear_intent_is_repaired() -> None:
    text = (
        "Sure! Here is the workflow:\n```json\n"
        '{"steps": [{"worker": " Coder ", "task": "  Write it  ", "sees": []},'
        ' {"worker": "reviewer", "task": "Review it", "sees": [0, 0]}]}\n```'
    )
    wf = parse_workflow(text, POOL, 5)
    assert wf.steps[0] == Step("coder", "Write it", ())
    assert wf.steps[1].sees == (0,)
    assert "cut the JSON workflow out of surrounding text" in wf.repairs
    assert any("read as 'coder'" in r for r in wf.repairs)


def test_all_means_every_earlier_step() -> None:
    text = "model_id = ['local', 'coder', 'reviewer']\nsubtasks = ['a b c', 'd e f', 'g h i']\n"
    text += "access_list = ['all', 'all', 'all']\n"
    wf = parse_workflow(text, POOL, 5)
    assert [s.sees for s in wf.steps] == [(), (0,), (0, 1)]


def test_grammar_enumerates_workers_and_bounds_indices() -> None:
    g = gbnf_grammar(POOL, 3)
    assert 'worker ::= "\\"local\\"" | "\\"coder\\"" | "\\"reviewer\\""' in g
    # step 0 sees nothing; step 2 sees a strictly increasing subset of {0, 1}
    assert 'sees0 ::= "[]"' in g
    assert 'i2-0 ::= "0" ( ", " ( i2-1 ) )?' in g
    assert 'i2-1 ::= "1"' in g
    assert "step3" not in g  # no fourth step can be written
    # Every repetition is bounded: no '*' or '+' anywhere, so generation must terminate.
    assert "*" not in g.replace('"', "") and "+" not in g


def test_grammar_is_accepted_by_llama_cpp() -> None:
    from llama_cpp import LlamaGrammar

    for max_steps in (1, 5, 10):
        LlamaGrammar.from_string(gbnf_grammar(POOL, max_steps), verbose=False)


def test_token_bound_covers_the_longest_workflow() -> None:
    longest = Workflow(
        tuple(Step("x" * 32, " ".join(["w" * 16] * 24), tuple(range(k))) for k in range(5))
    )
    assert len(longest.steps[0].task) <= TASK_MAX_CHARS
    assert len(longest.to_json()) <= max_plan_tokens(5)


def test_grammar_words_exclude_every_space_python_splits_on() -> None:
    import re

    from conductor_cli.run.workflow import _SPACES

    excluded: set[int] = set()
    for lo, hi in re.findall(r"\\[xu]([0-9A-Fa-f]+)(?:-\\[xu]([0-9A-Fa-f]+))?", _SPACES):
        excluded.update(range(int(lo, 16), int(hi or lo, 16) + 1))
    spaces = {c for c in range(0x110000) if chr(c).isspace()}
    assert spaces <= excluded, sorted(hex(c) for c in spaces - excluded)
    assert f'[^"\\\\{_SPACES}]' in gbnf_grammar(["a"], 2)
