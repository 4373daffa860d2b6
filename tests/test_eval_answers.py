"""Reading answers out of real-looking model replies, and scoring them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conductor_cli.evals.answers import (
    extract_choice,
    extract_code,
    extract_number,
    program_for,
    score_choice,
    score_qa,
)
from conductor_cli.evals.datasets import load_humaneval
from conductor_cli.evals.kinds import vote_key
from conductor_cli.evals.records import Problem

DATA = Path(__file__).parent / "data"
CITIES = ("London", "Paris", "Rome", "Berlin")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("The answer is (B)", "B"),
        ("Answer: C", "C"),
        ("**B**", "B"),
        ("B) Paris", "B"),
        ("(d)", "D"),
        ("I think it's B.", "B"),
        ("Option C is correct", "C"),
        ("the correct choice is B, because A is wrong", "B"),
        ("b", "B"),
        ("Answer: a", "A"),
        ("D. Berlin", "D"),
        ("B is the correct answer.", "B"),
        ("The correct answer is: **C) Rome**", "C"),
        ("I would choose option B.", "B"),
        ("I'll go with (A)", "A"),
        ("The final answer is $\\boxed{C}$", "C"),
        ("My answer:\n\nD", "D"),
        ("The answer is A because London is the largest.", "A"),
        # An explicit statement beats stray letters before it, and the last statement wins.
        ("A seems plausible at first, but the answer is B.", "B"),
        ("A is wrong. B is wrong. Answer: D", "D"),
        ("The answer is E. Hmm, no: the answer is C", "C"),
        ("The answer is B. Wait, London is bigger... Actually, the answer is (A).", "A"),
        ("Option B is correct? No. Final answer: D", "D"),
        ("Answer: B\n\nExplanation: A is the capital of England's rival.", "B"),
        ("The answer is a bit tricky; I'd pick C.", "C"),
        # The article "A" and the pronoun "I" are not choices; the restated text decides.
        ("A capital city is Paris, of course.", "B"),
        ("I believe it is Paris.", "B"),
        ("Paris", "B"),
        ("The capital of France is Paris (option B).", "B"),
        ("Rome.", "C"),
        # Nothing chosen, or a letter past the last choice.
        ("A capital city needs a river.", None),
        ("I don't know.", None),
        ("E", None),
        ("Answer: F", None),
        ("London and Paris are both big cities.", None),
        ("A) London\nB) Paris\nC) Rome\nD) Berlin", None),
        ("", None),
    ],
)
def test_extract_choice(reply: str, expected: str | None) -> None:
    assert extract_choice(reply, CITIES) == expected


def test_extract_choice_prefers_longer_restated_choice_and_word_bounds() -> None:
    choices = ("Paris", "Paris, Texas", "12", "2")
    assert extract_choice("It is Paris, Texas.", choices) == "B"
    assert extract_choice("The total is 12.", choices) == "C"  # "2" inside "12" is not "2"


def test_extract_choice_letter_range_follows_the_choices() -> None:
    assert extract_choice("Answer: C", ("yes", "no")) is None
    assert extract_choice("Answer: C", ("yes", "no", "maybe")) == "C"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("1,234", 1234.0),
        ("The answer is -3.5", -3.5),
        ("It costs $12.", 12.0),
        ("About 12% of them.", 12.0),
        ("It costs $1,234.50 in total.", 1234.5),
        ("She has 5 + 7 = 12 apples.\n#### 42", 42.0),
        ("so the result is \\boxed{7}.", 7.0),
        ("$\\boxed{\\frac{3}{4}}$", 0.75),
        ("$\\boxed{-\\dfrac{1}{2}}$", -0.5),
        ("3/4", 0.75),
        ("x = 10-3 = 7", 7.0),
        ("- 5 apples", 5.0),  # a markdown bullet, not a minus sign
        ("Temperature: \u22124 degrees", -4.0),
        ("The answer is 18. Check: 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.", 18.0),
        ("The answer is $18. She sold 16 - 3 - 4 = 9 eggs.", 18.0),
        ("**Answer:** 56", 56.0),
        ("Answer: 2 + 3 = 5", 5.0),
        ("The answer is 5 apples, since 2 + 3 = 5 and 1 is left.", 5.0),
        ("The total is 3.", 3.0),
        ("no number here", None),
        ("1/0", None),
        ("", None),
    ],
)
def test_extract_number(reply: str, expected: float | None) -> None:
    assert extract_number(reply) == expected


@pytest.mark.parametrize(
    ("reply", "reference", "scorer", "expected"),
    [
        ("The answer is: Paris.", "paris", "exact", (True, "Paris.")),
        ("Let me think.\nAnswer:   PARIS  ", "Paris", "exact", (True, "PARIS")),
        ("Answer:\nParis\n\nIt is on the Seine.", "Paris", "exact", (True, "Paris")),
        ('"Paris"', "Paris", "exact", (True, '"Paris"')),
        ("Paris is the capital.", "Paris", "exact", (False, "Paris is the capital.")),
        ("Answer: Lyon", "Paris", "exact", (False, "Lyon")),
        ("So she pays $1,200 in all.", "1200", "numeric", (True, "1200")),
        ("So 3/4 of them.", "0.75", "numeric", (True, "0.75")),
        ("#### 42", "42.0000001", "numeric", (True, "42")),
        ("#### 42", "42.01", "numeric", (False, "42")),
        ("I cannot tell.", "42", "numeric", (False, "")),
        ("It was written in 1984.", "1984", "contains", (True, "It was written in 1984.")),
        ("It was written in 1984.", "4", "contains", (False, "It was written in 1984.")),
        ("The cat sat. Answer: Cat", "cat", "contains", (True, "Cat")),
        ("A category error.", "cat", "contains", (False, "A category error.")),
        # An open request: any answer counts; a tool's report that it had nothing does not.
        ("Light scatters off the air.", "", "answered", (True, "Light scatters off the air.")),
        ("   ", "", "answered", (False, "")),
        (
            "The program ran and printed nothing.",
            "",
            "answered",
            (False, "The program ran and printed nothing."),
        ),
    ],
)
def test_score_qa(reply: str, reference: str, scorer: str, expected: tuple[bool, str]) -> None:
    assert score_qa(reply, reference, scorer) == expected


def test_the_answered_scorer_knows_every_failure_report_of_the_python_tool() -> None:
    from conductor_cli.sandbox import Outcome
    from conductor_cli.tools.python_tool import LIMITS, NO_CODE, describe

    def outcome(status: str, output: str) -> Outcome:
        return Outcome(status == "passed", status, 0, output, 0.1, "test")

    assert not score_qa(NO_CODE, "", "answered")[0]
    for status, output in [("failed", "Traceback"), ("timeout", ""), ("memory", ""),
                           ("file_size", "x"), ("error", ""), ("passed", "")]:  # fmt: skip
        report = describe(outcome(status, output), LIMITS)
        assert not score_qa(report, "", "answered")[0], report
    assert score_qa(describe(outcome("passed", "42\n"), LIMITS), "", "answered")[0]


def test_score_qa_rejects_unknown_scorer() -> None:
    with pytest.raises(ValueError, match="exact, numeric, contains"):
        score_qa("x", "x", "fuzzy")


def test_score_choice() -> None:
    problem = Problem(id="q", kind="mcq", question="?", answer="B", choices=CITIES)
    assert score_choice("The answer is (B).", problem) == (True, "B")
    assert score_choice("Answer: C", problem) == (False, "C")
    assert score_choice("No idea.", problem) == (False, "")


# --- code -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def close_elements() -> Problem:
    problem = load_humaneval(DATA / "humaneval5.jsonl")[0]
    assert problem.id == "HumanEval/0"
    return problem


BODY = """    for i, a in enumerate(numbers):
        for j, b in enumerate(numbers):
            if i != j and abs(a - b) < threshold:
                return True
    return False
"""
FUNCTION = "def has_close_elements(numbers, threshold):\n" + BODY


def _passes(program: str) -> bool:
    try:
        exec(compile(program, "<test>", "exec"), {"__name__": "candidate"})
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize(
    "reply",
    [
        f"Here it is:\n\n```python\nfrom typing import List\n\n\n{FUNCTION}```\n\nIt is O(n^2).",
        # No import: the prompt's `from typing import List` is needed by the annotations.
        "```python\n" + FUNCTION.replace("(numbers,", "(numbers: List[float],") + "```",
        f"```\n{FUNCTION}```",
        f"```Python\n{FUNCTION}",  # cut off before the closing fence
        FUNCTION,
        BODY,  # a body, indented
        "for i, a in enumerate(numbers):\n"  # a body with its first line's indent lost
        + "\n".join(BODY.splitlines()[1:]),
        "\n".join(line[4:] for line in BODY.splitlines()),  # a body, not indented
        f"```python\n{BODY}```",
        "```python\n    " + FUNCTION.replace("\n", "\n    ") + "```",  # the whole def indented
        f"Some notes first.\n```text\nnot code\n```\n```python\n{FUNCTION}```",
        # The layout of a message with a file attached, echoed in a Python block, and the
        # code in a bare one (Qwen2.5-Coder-1.5B on humaneval-fix).
        f"```python\nAttached stdin:\n```\n{FUNCTION}```",
    ],
)
def test_extract_code_gives_a_program_that_passes(reply: str, close_elements: Problem) -> None:
    code = extract_code(reply, close_elements)
    assert "check(" not in code  # the tests are added by program_for, not here
    assert _passes(program_for(code, close_elements))


@pytest.mark.parametrize(
    "reply",
    [
        "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```",
        "    return False\n",
        "return not numbers\n",
    ],
)
def test_extract_code_of_a_wrong_answer_fails_the_tests(
    reply: str, close_elements: Problem
) -> None:
    assert not _passes(program_for(extract_code(reply, close_elements), close_elements))


def test_extract_code_adds_the_prompt_imports_only_when_missing(close_elements: Problem) -> None:
    code = extract_code(f"```python\n{FUNCTION}```", close_elements)
    assert code.startswith("from typing import List\n")
    assert code.count("import List") == 1
    own = extract_code(f"```python\nfrom typing import List\n{FUNCTION}```", close_elements)
    assert own.count("import List") == 1


def test_extract_code_adds_helpers_the_prompt_defined() -> None:
    prompt = (
        "def is_palindrome(s: str) -> bool:\n"
        '    """Whether s reads the same backwards."""\n'
        "    return s == s[::-1]\n\n\n"
        "def shortest_palindrome_suffix(s: str) -> str:\n"
        '    """The shortest suffix of s that is a palindrome."""\n'
    )
    problem = Problem(
        id="p",
        kind="code",
        question="",
        answer="",
        scorer="tests",
        prompt=prompt,
        test="def check(f):\n    assert f('abcc') == 'cc'\n    assert f('ab') == 'b'\n",
        entry_point="shortest_palindrome_suffix",
    )
    reply = (
        "```python\ndef shortest_palindrome_suffix(s):\n"
        "    for i in range(len(s)):\n"
        "        if is_palindrome(s[i:]):\n"
        "            return s[i:]\n"
        "    return ''\n```"
    )
    code = extract_code(reply, problem)
    assert code.index("def is_palindrome") < code.index("def shortest_palindrome_suffix")
    assert _passes(program_for(code, problem))


def test_program_for_appends_tests_and_the_call(close_elements: Problem) -> None:
    program = program_for("CODE", close_elements)
    assert program.startswith("CODE\n\n")
    assert close_elements.test in program
    assert program.endswith("\n\ncheck(has_close_elements)\n")


# --- voting -----------------------------------------------------------------------------------


def _qa(scorer: str) -> Problem:
    return Problem(id="q", kind="qa", question="?", answer="1", scorer=scorer)


def test_vote_key_merges_answers_that_mean_the_same(close_elements: Problem) -> None:
    mcq = Problem(id="m", kind="mcq", question="?", answer="A", choices=CITIES, scorer="choice")
    assert vote_key(mcq, "b") == vote_key(mcq, " B") == "B"
    numeric = _qa("numeric")
    assert vote_key(numeric, "3/4") == vote_key(numeric, "0.75") == "0.75"
    assert vote_key(numeric, "1,200") == vote_key(numeric, "1200.0") == "1200"
    assert vote_key(numeric, "1201") != vote_key(numeric, "1200")
    exact = _qa("exact")
    assert vote_key(exact, "  Paris. ") == vote_key(exact, "paris") == "paris"
    commented = "def f(x):\n    # double it\n\n    return x*2   # done\n"
    assert vote_key(close_elements, commented) == vote_key(
        close_elements, "def f(x):\n  return x * 2"
    )
    assert vote_key(close_elements, commented) != vote_key(
        close_elements, "def f(x):\n  return x * 3"
    )
