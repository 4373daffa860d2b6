"""A step whose program the python tool runs stops once its program block closes, against
generating on (issue 68's seconds): what the 1.5B coder writes after its program is its guess
of what the program prints ("When you run this program, it will output: ```Answer: 3```"),
which no step reads. The same plans of the shipped conductor on the same training questions,
each run both ways in one process, the cache off; right answers, seconds a question, the
program step's seconds and tokens, both ways.

    .venv/bin/python bench/program_end.py [--set bbh:object_counting] [--n 16] [--seed 5]
        [--file bench/data/typed_train24.jsonl] [--out FILE]

`on`: what ships (Request.stop_after_program, sandbox/fences.program_end). `off`: the
generation goes on to the model's end (program_end patched to find no end). The items and their
order: bench/_paired.py. The embedded default team. Run alone (llama.cpp)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from _paired import arguments, both_ways, plans_of_several_steps

import conductor_cli.backends.llamacpp as llamacpp
from conductor_cli.api import RunResult

ORIGINAL = llamacpp.program_end


@contextlib.contextmanager
def way(name: str) -> Iterator[None]:
    if name == "off":
        llamacpp.program_end = lambda text: None
    try:
        yield
    finally:
        llamacpp.program_end = ORIGINAL


def first_step(run: RunResult) -> dict[str, Any]:
    first = run.steps[0]
    return {
        "first_seconds": round(first.seconds, 2),
        "first_tokens_out": first.tokens_out,
        "first_output": first.output,
    }


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    rows = both_ways(args, ("off", "on"), way, first_step, "first_tokens_out")
    for name in ("off", "on"):
        multi = plans_of_several_steps(rows, name)
        first = sum(m["first_seconds"] for m in multi) / len(multi) if multi else 0.0
        tokens = sum(m["first_tokens_out"] for m in multi) / len(multi) if multi else 0.0
        print(f"{name}: the program step of a plan of several steps {first:.2f} s, "
              f"{tokens:.0f} tokens ({len(multi)} plans)")  # fmt: skip


if __name__ == "__main__":
    main()
