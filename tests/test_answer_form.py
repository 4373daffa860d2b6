"""The run's answer in the form the question writes things (run/answer_form.py, issue 68): a
printed Python list of plain items answers as the items, and only the run's answer changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conductor_cli.run.answer_form import as_asked

from .conftest import run_cli


@pytest.mark.parametrize(
    ("question", "answer", "shaped"),
    [
        # Separated as the question separates them.
        ("sort these: violin drum cello", "['cello', 'drum', 'violin']", "cello drum violin"),
        ("sort smallest first: 42 7 19 3", "[3, 7, 19, 42]\n", "3 7 19 42\n"),
        ("alphabetize: river, canyon, dune", "('canyon', 'dune', 'river')", "canyon, dune, river"),
        # The answer line's label stays.
        ("order these: b a", "Answer: ['a', 'b']", "Answer: a b"),
        # A check step's reply: each line that is a list, after its short label.
        (
            "sort these alphabetically: violin drum flute cello",
            "Sorted instruments: ['cello', 'drum', 'flute', 'violin']\n"
            "Answer: ['cello', 'drum', 'flute', 'violin']",
            "Sorted instruments: cello drum flute violin\nAnswer: cello drum flute violin",
        ),
        # Code blocks are left as written.
        (
            "sort these: b a",
            "```\n['a', 'b']\n```\nAnswer: ['a', 'b']",
            "```\n['a', 'b']\n```\nAnswer: a b",
        ),
        # Asked for a literal: kept.
        ("give me a python list of the primes below 10", "[2, 3, 5, 7]", "[2, 3, 5, 7]"),
        ("return the result as JSON: b a", '["a", "b"]', '["a", "b"]'),
        # Not one list of plain items: kept.
        ("sort these: b a", "[['a'], ['b']]", "[['a'], ['b']]"),
        ("which are true?", "[True, False]", "[True, False]"),
        ("sort these: b a", "[]", "[]"),
        ("sort these: b a", "The sorted words are ['a', 'b'].", "The sorted words are ['a', 'b']."),
        ("sort these: b a", "['a',\n 'b']", "['a',\n 'b']"),
        ("sort these: b a", "[a, b]", "[a, b]"),
        ("what is 6 * 7?", "42", "42"),
    ],
)  # fmt: skip
def test_a_printed_list_answers_as_the_question_writes_things(
    question: str, answer: str, shaped: str
) -> None:
    assert as_asked(question, answer) == shaped


CONFIG = """
[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
max_tokens = 8

[[workers]]
name = "python"
model = "tool:python"
"""


def test_a_run_whose_program_prints_a_list_answers_with_its_words(tmp_path: Path) -> None:
    """The real sandboxed tool prints the list; the step's output keeps it as printed (what the
    trace and later steps read), the run's answer is the words."""
    config = tmp_path / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    program = "print(sorted('violin drum flute cello'.split()))"
    workflow = tmp_path / "wf.json"
    workflow.write_text(json.dumps({"steps": [{"worker": "python", "task": program}]}))
    question = "sort these alphabetically: violin drum flute cello"
    done = run_cli("--config", str(config), "run", "--json", str(workflow), question)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["steps"][0]["output"] == "['cello', 'drum', 'flute', 'violin']"
    assert result["answer"] == "cello drum flute violin"
    plain = run_cli("--config", str(config), "run", str(workflow), question)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == "cello drum flute violin"
