"""A user's tests attached (`--file test_bug.py`, issue 69 item 3): the python tool runs them
in the real sandbox on the code a step wrote (or on the attached file, where the writer wrote
none) and lists each test and what it said; a planned workflow gets a test step and a repair
step after its answer where such a file is attached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conductor_cli.backends.base import Request
from conductor_cli.config.settings import CODE_RETRIES
from conductor_cli.policy.words import REPAIR, RETRY, TEST
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import Conductor, WorkerInfo
from conductor_cli.run.user_tests import with_user_tests
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.testing.fake_backend import FakeBackend
from conductor_cli.tools import examples
from conductor_cli.tools.python_tool import PythonTool

BUG = '''def to_roman(n):
    """Roman numeral for 1 <= n < 40."""
    out = ""
    for v, s in [(10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]:
        while n > v:
            n -= v
            out += s
    return out
'''
FIXED = BUG.replace("n > v", "n >= v")
TESTS = """import unittest
from bug import to_roman


def test_three():
    assert to_roman(3) == "III"


def test_with_a_fixture(tmp_path):
    raise AssertionError("never collected: it takes a fixture")


class TestMore(unittest.TestCase):
    def test_four(self):
        self.assertEqual(to_roman(4), "IV")


class TestPlain:
    def test_nine(self):
        assert to_roman(9) == "IX"
"""


def question(tests: str = TESTS, code_name: str = "bug.py") -> str:
    # The layout run/messages.step_messages gives attachments.
    return (
        f"fix this\n\nAttached {code_name}:\n```\n{BUG.rstrip()}\n```\n\n"
        f"Attached test_bug.py:\n```\n{tests.rstrip()}\n```"
    )


@pytest.fixture(scope="module")
def tool() -> PythonTool:
    return PythonTool()


def outcome(tool: PythonTool, written: str, asked: str) -> str:
    messages = (
        {"role": "user", "content": "Step 0 (coder): Answer the question."},
        {"role": "assistant", "content": written},
        {"role": "user", "content": f"{asked}\n\n{TEST}"},
    )
    return tool.complete(Request(messages, 0, 0.0, 0)).text


def test_the_tool_runs_each_test_of_an_attached_file_and_says_what_each_said(
    tool: PythonTool,
) -> None:
    said = outcome(tool, f"```python\n{BUG}```", question())
    assert said == (
        "0 of 3 examples pass. Failed:\n"
        'test_bug.py::test_three\nassert to_roman(3) == "III"\n'
        "failed: the left side is 'II'\n\n"
        'test_bug.py::TestMore::test_four\nself.assertEqual(to_roman(4), "IV")\n'
        "failed: 'III' != 'IV'\n- III\n+ IV\n\n"
        'test_bug.py::TestPlain::test_nine\nassert to_roman(9) == "IX"\n'
        "failed: the left side is 'VIII'\n"
        "Tests run: test_bug.py::test_three failed, test_bug.py::TestMore::test_four failed, "
        "test_bug.py::TestPlain::test_nine failed."
    )
    assert not examples.nothing_to_repair(said)
    passed = outcome(tool, f"Fixed:\n```python\n{FIXED}```", question())
    assert passed.splitlines()[0] == "All 3 examples pass."
    assert "test_bug.py::TestPlain::test_nine passed" in passed
    assert examples.nothing_to_repair(passed)


def test_a_piped_file_has_no_name_so_the_names_the_code_defines_stand_for_it(
    tool: PythonTool,
) -> None:
    piped = question(TESTS.replace("from bug import", "from solution import"), "stdin")
    assert outcome(tool, f"```python\n{FIXED}```", piped).startswith("All 3 examples pass.")
    # A module the code does not stand for stays missing, and the report says so.
    other = TESTS.replace("from bug import to_roman", "from elsewhere import roman")
    said = outcome(tool, f"```python\n{FIXED}```", question(other, "stdin"))
    assert said.startswith("0 of 1 examples pass. Failed:\ntest_bug.py failed to load: ")
    assert "No module named 'elsewhere'" in said


def test_a_writer_that_wrote_no_code_has_the_attached_file_tested(tool: PythonTool) -> None:
    said = outcome(tool, "The code looks right to me.", question())
    assert said.startswith("0 of 3 examples pass.")
    assert said.endswith("The step it tests wrote no code; bug.py was tested as attached.")
    # Without tests attached there is nothing of the user's to judge it by: no code to test.
    plain = "fix this\n\nAttached bug.py:\n```\n" + BUG + "```"
    assert outcome(tool, "The code looks right to me.", plain) == examples.NO_CODE


POOL = [
    WorkerInfo("coder", "writes code"),
    WorkerInfo("python", "runs programs", tool=True, runs_programs=True),
]
ATTACHED = (Attachment("stdin", BUG), Attachment("test_bug.py", TESTS))
ONE = Workflow((Step("local", "Answer the question.", ()),))
POOL_OF_CONFIG = [
    WorkerInfo("local", "a small model"),
    WorkerInfo("python", "runs programs", tool=True, runs_programs=True),
]


def test_a_plan_gets_a_test_and_a_repair_step_where_tests_are_attached() -> None:
    got = with_user_tests(ONE, POOL_OF_CONFIG, ATTACHED)
    assert got.steps[1:] == (Step("python", TEST, (0,)), Step("local", REPAIR, (0, 1)))
    assert got.repairs == ("tests attached (test_bug.py): python runs them on step 0's code",)
    # No tests, no tool that runs programs, an answer by a tool, a plan that tests already,
    # or no room under a workflow's 10 steps: the plan stays as it was (the last said in the
    # trace).
    pool = POOL_OF_CONFIG
    assert with_user_tests(ONE, pool, ATTACHED[:1]) is ONE
    assert with_user_tests(ONE, pool[:1], ATTACHED) is ONE
    by_tool = Workflow((Step("python", "print(1)", ()),))
    assert with_user_tests(by_tool, pool, ATTACHED) is by_tool
    assert with_user_tests(got, pool, ATTACHED) is got
    nine = Workflow((*ONE.steps,) * 9)
    full = with_user_tests(nine, pool, ATTACHED)
    assert full.steps == nine.steps and "not run" in full.repairs[0]


MBPP_LIKE = "Write a function to add two numbers. Your code should pass this test:\n\n" + (
    "assert add(2, 3) == 5"
)
DOCTESTED = 'def double(x):\n    """\n    >>> double(2)\n    4\n    """'


def test_code_asked_with_examples_gets_tests_and_retries_and_nothing_else_does() -> None:
    got = with_user_tests(ONE, POOL_OF_CONFIG, (), MBPP_LIKE, retries=2)
    assert got.steps[1:] == (
        Step("python", TEST, (0,)),
        Step("local", RETRY, (1,)),
        Step("python", TEST, (2,)),
        Step("local", RETRY, (3,)),
    )
    assert "writes it again where one fails (2 times at most)" in got.repairs[-1]
    # conductor.code_retries' default, 4 tries, on top of the plan; 0, none.
    default = with_user_tests(ONE, POOL_OF_CONFIG, (), MBPP_LIKE)
    assert [s.task for s in default.steps[1:]] == [TEST, RETRY] * CODE_RETRIES == [TEST, RETRY] * 4
    assert with_user_tests(ONE, POOL_OF_CONFIG, (), MBPP_LIKE, retries=0) is ONE
    # A piped file's doctest lines count as the question's; a signature with prose examples
    # (HumanEval's style) too.
    piped = with_user_tests(ONE, POOL_OF_CONFIG, (Attachment("stdin", DOCTESTED),), "fix it")
    assert [s.task for s in piped.steps[:3]] == [ONE.steps[0].task, TEST, RETRY]
    prose = 'def area(a, b, c):\n    """area(3, 4, 5) == 6.00"""'
    assert len(with_user_tests(ONE, POOL_OF_CONFIG, (), prose, retries=2).steps) == 5
    # No code asked, or no example: no test step, no cost.
    for plain in ("If f(2) = 5 and f(3) = 7, what is f(4)?", "Write a function to add", ""):
        assert with_user_tests(ONE, POOL_OF_CONFIG, (), plain) is ONE
    # As many tries as a workflow's 10 steps leave room for: a 7-step plan gets one.
    seven = Workflow((*ONE.steps,) * 7)
    assert len(with_user_tests(seven, POOL_OF_CONFIG, (), MBPP_LIKE).steps) == 9
    nine = Workflow((*ONE.steps,) * 9)
    assert with_user_tests(nine, POOL_OF_CONFIG, (), MBPP_LIKE) is nine  # no room


def test_the_conductors_plan_is_the_one_the_rule_extends() -> None:
    # The conductor's model is scripted here: what is tested is the planner's wiring.
    reply = json.dumps({"steps": [{"worker": "coder", "task": "Fix the file.", "sees": []}]})
    planner = Conductor(FakeBackend(reply=reply, grammar=True), temperature=0.2, seed=0)
    plan = planner.plan("fix this", POOL, ATTACHED, 5)
    assert [s.task for s in plan.workflow.steps] == ["Fix the file.", TEST, REPAIR]
    assert plan.reply == reply  # the conductor's own reply, kept as it wrote it
    assert planner.plan("fix this", POOL, ATTACHED[:1], 5).workflow.shape == "coder"
    asked = planner.plan(MBPP_LIKE, POOL, (), 5).workflow
    assert [s.task for s in asked.steps] == ["Fix the file.", *[TEST, RETRY] * CODE_RETRIES]
    once = Conductor(
        FakeBackend(reply=reply, grammar=True), temperature=0.2, seed=0, code_retries=1
    )
    assert [s.task for s in once.plan(MBPP_LIKE, POOL, (), 5).workflow.steps[1:]] == [TEST, RETRY]
    # An agent's turn (run/execution plans it with tests=False): its last step is the one
    # that may call the client's tools, so no test step follows it.
    assert planner.plan(MBPP_LIKE, POOL, ATTACHED, 5, tests=False).workflow.shape == "coder"


def test_code_that_passes_the_users_tests_is_kept_and_the_trace_lists_them(
    tmp_path: Path, gguf_path: Path
) -> None:
    """The engine, the real tool and the real SmolLM2 as writer and repairer: the writer's
    answer comes from a recorded run (as `conductor run` replays one), the tool tests it,
    and SmolLM2 is never asked to repair code that passes."""
    from conductor_cli.api import RunOptions, run_workflow
    from conductor_cli.config.settings import load_config
    from conductor_cli.run.engine import StepResult
    from conductor_cli.storage.cache import CacheMode

    path = tmp_path / "c.toml"
    path.write_text(
        '[[workers]]\nname = "local"\nmodel = "gguf:smollm2-135m-instruct"\nmax_tokens = 40\n\n'
        '[[workers]]\nname = "python"\nmodel = "tool:python"\n',
        encoding="utf-8",
    )
    workflow = with_user_tests(ONE, POOL_OF_CONFIG, ATTACHED)
    written = f"Fixed:\n```python\n{FIXED}```"
    recorded = StepResult(0, "local", ONE.steps[0].task, (), (), written, 0, 0, 0.0, "cache")
    result = run_workflow(
        workflow,
        "fix this",
        config=load_config(path),
        attachments=ATTACHED,
        keep={0: recorded},
        options=RunOptions(CacheMode.OFF),
    )
    assert result.steps[1].output.startswith("All 3 examples pass.\nTests run: ")
    assert result.steps[2].source == "kept" and result.answer == written
    assert result.model_calls == 1  # the tool's run; SmolLM2 was not asked
