"""Same call, same answer (issue 68): a one-step workflow asks a member exactly what the
member alone is asked (eval's `single:`), and the answer does not depend on what the model
read before, in this process or another, so that a paired comparison of the team with its
member measures decisions, not sampling. The embedded team's real coder in llama.cpp, cache
off: before each call read its prompt whole, the very same request asked twice in a row
gave two answers (the context's prefix was reused and only the rest read, in other batches)."""

from __future__ import annotations

import json
from pathlib import Path

from conductor_cli.api import RunOptions, run_workflow
from conductor_cli.config.settings import CODER_MODEL, load_config
from conductor_cli.evals.strategies import single_workflow
from conductor_cli.run.workflow import parse_workflow
from conductor_cli.runtime import Runtime
from conductor_cli.storage.cache import CacheMode

# BIG-bench navigate, where the conductor's one step and `single:coder` disagreed.
QUESTION = (
    "If you follow these instructions, do you return to the starting point? Turn left. Take "
    "7 steps. Take 8 steps. Turn right. Take 8 steps. Options: (A) True (B) False"
)
OTHER = "Write one sentence about the sea."
CONFIG = f"""
[conductor]
max_steps = 2

[[workers]]
name = "coder"
model = "gguf:{CODER_MODEL}"
description = "a small coding model"
max_tokens = 30
"""


def test_a_one_step_workflow_answers_as_the_member_alone_whatever_came_before(
    tmp_path: Path, coder_pulled: Path
) -> None:
    path = tmp_path / "coder.toml"
    path.write_text(CONFIG, encoding="utf-8")
    config = load_config(path)
    written = parse_workflow(
        json.dumps({"steps": [{"worker": "coder", "task": "Answer the question.", "sees": []}]}),
        [w.name for w in config.workers],
        5,
    )
    assert written == single_workflow("coder")  # what eval's `single:coder` runs
    off = RunOptions(CacheMode.OFF)

    def ask(runtime: Runtime, question: str) -> str:
        return run_workflow(written, question, config=config, options=off, runtime=runtime).answer

    with Runtime(config) as runtime:
        first = ask(runtime, QUESTION)
        twice = ask(runtime, QUESTION)  # the context still holds this very prompt
        ask(runtime, OTHER)
        later = ask(runtime, QUESTION)
    with Runtime(config) as fresh:
        elsewhere = ask(fresh, QUESTION)
    assert len(first) > 100, len(first)
    assert first == twice == later == elsewhere


def test_a_step_that_continues_its_writers_conversation_keeps_what_the_model_read(
    tmp_path: Path, coder_pulled: Path, monkeypatch
) -> None:
    """The check of `coder > python<0 > coder<0,1` begins with the program step's own
    messages and reply, the coder's context still holds them, and it reads only the rest;
    after the same calls it gives the same answer, in this process or a fresh one."""
    from conductor_cli.backends import llamacpp

    path = tmp_path / "coder.toml"
    path.write_text(
        CONFIG.replace("max_tokens = 30", "max_tokens = 80")
        + '\n[[workers]]\nname = "python"\nmodel = "tool:python"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    steps = [
        {"worker": "coder", "task": "Answer the question.", "sees": []},
        {"worker": "python", "task": "Run the program from step 0.", "sees": [0]},
        {"worker": "coder", "task": "Check the earlier answer.", "sees": [0, 1]},
    ]
    workflow = parse_workflow(json.dumps({"steps": steps}), ["coder", "python"], 5)
    kept: list[bool] = []

    def spied(*args: object) -> bool:  # the real decision, recorded
        said = continues(*args)
        kept.append(said)
        return said

    continues = llamacpp.continues
    monkeypatch.setattr(llamacpp, "continues", spied)
    question = "What is 17 * 23 + 5?"
    off = RunOptions(CacheMode.OFF)

    def ask(runtime: Runtime) -> tuple[str, tuple[dict, ...], tuple[dict, ...]]:
        run = run_workflow(workflow, question, config=config, options=off, runtime=runtime)
        return run.answer, run.steps[0].messages, run.steps[2].messages

    with Runtime(config) as runtime:
        answer, writer, check = ask(runtime)
        again = ask(runtime)[0]
    with Runtime(config) as fresh:
        elsewhere = ask(fresh)[0]
    assert check[: len(writer)] == writer  # the writer's own conversation, continued
    assert check[len(writer)]["role"] == "assistant" and "```" in check[len(writer)]["content"]
    assert kept == [False, True] * 3  # each check kept the context; each program read whole
    assert answer == again == elsewhere
