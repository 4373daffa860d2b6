"""A step whose program the python tool runs stops once its program block closes
(sandbox/fences.program_end, Request.stop_after_program): what the 1.5B coder writes after it
is its guess of what the program prints ("When you run this program, it will output: ..."),
which no step reads, and it costs about a second a question (issue 68's seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conductor_cli.backends.base import Completion, Request
from conductor_cli.config.settings import WorkerConfig
from conductor_cli.problems import QA_INSTRUCTION
from conductor_cli.run.engine import Engine
from conductor_cli.run.pool import Pool, Worker
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.sandbox.fences import program_end
from conductor_cli.testing.fake_backend import FakeBackend

PROGRAM = "Here it is:\n```python\nword = 'statistician'\nprint(word.count('t'))\n```"
GUESS = "\n\nWhen you run this program, it will output:\n\n```\nAnswer: 3\n```"


@pytest.mark.parametrize(
    ("text", "end"),
    [
        (PROGRAM + GUESS, len(PROGRAM)),
        (PROGRAM, len(PROGRAM)),
        (PROGRAM[:-1], None),  # the closing fence not yet whole
        ("```python\nprint(1)```\nmore", len("```python\nprint(1)```")),
        # only a function: a later block may call it
        ("```python\ndef f():\n    return 1\n```\n", None),
        ("```python\ndef f():\n    return 1\n```\n```python\nprint(f())\n```\nx", 60),
        ("```\nprint(1)\n```\n", None),  # untagged: the tool may run a later tagged one
        ("```python\nAnswer: 17\n```\n", None),  # shows output
        ("```python\n# in one ```python block\nprint(1)\n```\n", 47),
        ("no program at all", None),
        # cut while a ``` inside a line is being written: not a closer until the line ends
        ('```python\nprint("```', None),
        ('```python\nprint("```")\nprint(42)\n```\n', 36),
        # a print inside a function never called: the call comes in a later block
        ("```python\ndef solve(n):\n    print(n)\n```\n```python\nsolve(2)\n```\n", None),
        ("```python\ndef solve(n):\n    print(n)\nsolve(2)\n```\nx", 49),
    ],
)
def test_a_program_ends_where_its_first_printing_python_block_closes(
    text: str, end: int | None
) -> None:
    assert program_end(text) == end


def test_only_a_step_whose_program_a_tool_runs_is_asked_to_stop_there() -> None:
    """Fault injection: fake workers record what the engine asks (a local model's flag; the
    fake stands in for the local coder and for the tool)."""
    seen: dict[str, list[Request]] = {"coder": [], "python": []}

    class Recorder(FakeBackend):
        def complete(self, request: Request, on_text=None) -> Completion:  # type: ignore[no-untyped-def]
            seen[self.name].append(request)
            return super().complete(request, on_text)

    # The configs of a local model and of the tool, the backends fakes that record.
    coder = Worker(WorkerConfig("coder", "gguf:smollm2-135m-instruct"),
                   Recorder(reply=PROGRAM, name="coder"))  # fmt: skip
    python = Worker(WorkerConfig("python", "tool:python"), Recorder(reply="3", name="python"))
    flow = Workflow((Step("coder", "Write it.", ()), Step("python", "Run it.", (0,)),
                     Step("coder", "Check it.", (0, 1))))  # fmt: skip
    Engine(Pool((coder, python)), lambda e: None).run_steps("count the t's", flow, [], {})
    assert [r.stop_after_program for r in seen["coder"]] == [True, False]
    assert [r.stop_after_program for r in seen["python"]] == [False]


# A typed training question of ours in its set's form (bench/data/typed_train24.jsonl, tt1).
QUESTION = f"count the t's in statistician\n{QA_INSTRUCTION}"


def test_the_real_coder_stops_after_its_program_and_writes_the_same_program(
    tmp_path: Path, coder_pulled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded team's coder in llama.cpp, cache off, the same seed: asked to go on, it
    writes the same program and then its guess; asked to stop, the program alone, which the
    tool runs the same."""
    from conductor_cli.api import RunOptions, run_workflow
    from conductor_cli.backends import llamacpp
    from conductor_cli.config.settings import CODER_MODEL, load_config
    from conductor_cli.run.workflow import parse_workflow
    from conductor_cli.runtime import Runtime
    from conductor_cli.storage.cache import CacheMode

    path = tmp_path / "coder.toml"
    path.write_text(
        f'[[workers]]\nname = "coder"\nmodel = "gguf:{CODER_MODEL}"\nmax_tokens = 200\n\n'
        '[[workers]]\nname = "python"\nmodel = "tool:python"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    steps = [
        {"worker": "coder", "task": "Answer the question.", "sees": []},
        {"worker": "python", "task": "Run the program from step 0.", "sees": [0]},
    ]
    workflow = parse_workflow(json.dumps({"steps": steps}), ["coder", "python"], 5)
    options = RunOptions(cache_mode=CacheMode.OFF, seed=0)  # it then adds "Answer: 4"
    runtime = Runtime(config)
    try:
        stopped = run_workflow(workflow, QUESTION, config=config, options=options, runtime=runtime)
        monkeypatch.setattr(llamacpp, "program_end", lambda text: None)
        went_on = run_workflow(workflow, QUESTION, config=config, options=options, runtime=runtime)
    finally:
        runtime.close()
    program, whole = stopped.steps[0].output, went_on.steps[0].output
    assert program.rstrip().endswith("```") and program_end(program) == len(program)
    assert whole.startswith(program) and len(whole) > len(program)
    assert stopped.steps[0].tokens_out < went_on.steps[0].tokens_out
    assert stopped.steps[1].output == went_on.steps[1].output
    assert "3" in stopped.steps[1].output
