"""A step that sees its own worker's program and the program's run, continuing that worker's
conversation, against the layout it replaced (issue 68's seconds): the same plans of the
shipped conductor on the same training questions, each run both ways in one process, the
cache off; right answers, seconds a question and the reading step's seconds, both ways.

    .venv/bin/python bench/continue_check.py [--set bbh:object_counting] [--n 16]
        [--seed 5] [--file bench/data/typed_train24.jsonl] [--out FILE]

`before`: each step seen comes as "Step j (worker): task" and its output, and every local
call reads its prompt whole (backends/llamacpp.continues patched to False, no `own`
messages). `after`: what ships (run/messages.step_messages with `own`). The items and their
order: bench/_paired.py. The embedded default team. Run alone (llama.cpp)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from _paired import arguments, both_ways, plans_of_several_steps

import conductor_cli.backends.llamacpp as llamacpp
import conductor_cli.run.engine as engine
from conductor_cli.api import RunResult

ORIGINAL_MESSAGES = engine.step_messages
ORIGINAL_CONTINUES = llamacpp.continues


@contextlib.contextmanager
def layout(name: str) -> Iterator[None]:
    if name == "before":

        def messages(*args: Any, own: Any = None, **kwargs: Any) -> Any:
            return ORIGINAL_MESSAGES(*args, **kwargs)

        engine.step_messages = messages
        llamacpp.continues = lambda *a: False
    try:
        yield
    finally:
        engine.step_messages = ORIGINAL_MESSAGES
        llamacpp.continues = ORIGINAL_CONTINUES


def last_step(run: RunResult) -> dict[str, Any]:
    last = run.steps[-1]
    return {
        "last_seconds": round(last.seconds, 2),
        "last_tokens_in": last.tokens_in,
        "last_output": last.output,
    }


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    rows = both_ways(args, ("before", "after"), layout, last_step, "last_seconds")
    for name in ("before", "after"):
        multi = plans_of_several_steps(rows, name)
        last = sum(m["last_seconds"] for m in multi) / len(multi) if multi else 0.0
        print(f"{name}: last step of a plan of several steps {last:.1f} s ({len(multi)} plans)")


if __name__ == "__main__":
    main()
