"""Same call, same answer (issue 68): a one-step workflow asks a member exactly what the
member alone is asked (eval's `single:`), and the answer does not depend on what the model
answered before, in this process or another, so that a paired comparison of the team with
its member measures decisions, not sampling. Real SmolLM2 in llama.cpp, cache off."""

from __future__ import annotations

import json
from pathlib import Path

from conductor_cli.api import RunOptions, run_workflow
from conductor_cli.config.settings import load_config
from conductor_cli.evals.strategies import single_workflow
from conductor_cli.run.workflow import parse_workflow
from conductor_cli.runtime import Runtime
from conductor_cli.storage.cache import CacheMode

QUESTION = "Name a famous Italian painter."
OTHER = "Write one sentence about the sea."


def test_a_one_step_workflow_answers_as_the_member_alone_whatever_came_before(
    fast_config: Path,
) -> None:
    config = load_config(fast_config)
    names = [w.name for w in config.workers]
    written = parse_workflow(
        json.dumps({"steps": [{"worker": "local", "task": "Answer the question.", "sees": []}]}),
        names,
        5,
    )
    alone = single_workflow("local")  # what eval's `single:local` runs
    assert written == alone
    off = RunOptions(CacheMode.OFF)

    def ask(runtime: Runtime, question: str) -> str:
        return run_workflow(written, question, config=config, options=off, runtime=runtime).answer

    with Runtime(config) as runtime:
        first = ask(runtime, QUESTION)
        ask(runtime, OTHER)  # the model's state now holds another conversation
        again = ask(runtime, QUESTION)
    with Runtime(config) as fresh:
        elsewhere = ask(fresh, QUESTION)
    assert first and first == again == elsewhere
