"""`tool:python`: run the Python program a step sees, confined, and return what it printed.

The program is the last ```python block in the outputs of the steps it sees, else in the
question and task it is sent, else the task itself when that is Python. Whatever happens is
the step's output, said plainly (no code, an error, a timeout, nothing printed), so a later
step or round can react to it; only a machine that cannot confine the program is an error.

Told the `test` words (tools/examples.TEST), it runs the code of the steps it sees on the
examples the question shows instead, and reports which fail. No request before those words
existed ended in them, so its behaviour version (its runs' cache key and the fingerprint
rewards are kept under) stays: every earlier request is answered as before.

A block that only shows output (fences.shows_output: "```python\nAnswer: 17\n```" after the
program) is no longer the one run. The version stays here too, deliberately: the requests
that changes are those whose run printed nothing, so a cached run of one may still say so
(`--no-cache` runs it again), and the rewards kept under the version stay the shipped head's.
"""

from __future__ import annotations

import ast
import sys
import threading
from typing import TYPE_CHECKING

from conductor_cli.backends.base import Completion, Request, TextSink
from conductor_cli.config.settings import SandboxSettings
from conductor_cli.sandbox import Limits, Outcome, Sandbox
from conductor_cli.sandbox.fences import python_blocks
from conductor_cli.tools import examples

if TYPE_CHECKING:
    from conductor_cli.config.settings import Config

OUTPUT_MB = 1  # what a program prints is cut here (file_mb); the rest is the config's [sandbox]


def limits_of(settings: SandboxSettings) -> Limits:
    return Limits(
        wall_s=settings.wall_s,
        cpu_s=settings.cpu_s,
        memory_mb=settings.memory_mb,
        file_mb=OUTPUT_MB,
        disk_mb=settings.disk_mb,
        processes=settings.processes,
    )


LIMITS = limits_of(SandboxSettings())


NO_CODE = (
    "No Python program to run: the python tool runs the last ```python block of the steps it "
    "sees, or its task when that is Python, and found neither."
)


# The tool's failure reports begin so (describe() adds the details); eval's `answered` scorer
# tells a failure from an answer by these beginnings.
PRINTED_NOTHING = "The program ran and printed nothing."
FAILED = "The program failed"
STOPPED = "The program was stopped"
OUT_OF_MEMORY = "The program ran out of memory"
COULD_NOT_RUN = "The program could not run"
FAILURE_STARTS = (NO_CODE, PRINTED_NOTHING, FAILED, STOPPED, OUT_OF_MEMORY, COULD_NOT_RUN)


def is_failure(text: str) -> bool:
    """Whether `text` is this tool's report that its program gave no result."""
    return text.strip().startswith(FAILURE_STARTS)


def _is_program(text: str) -> bool:
    """Whether a task is itself Python ("print(2 ** 10)"), not an English sentence that
    happens to parse ("Compute" is a valid name)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.Call | ast.Assign | ast.Import | ast.ImportFrom | ast.FunctionDef)
        for node in ast.walk(tree)
    )


def seen_program(messages: tuple[dict[str, str], ...]) -> str | None:
    """The last ```python block of the steps it sees (the earlier assistant turns)."""
    for message in reversed(messages):
        if message["role"] == "assistant" and (found := python_blocks(message["content"])):
            return found[-1]
    return None


def find_program(messages: tuple[dict[str, str], ...]) -> str | None:
    """The program to run, from the step's messages (run/messages.py's layout: the steps it
    sees as earlier assistant turns, then one user message ending with its task)."""
    if (seen := seen_program(messages)) is not None:
        return seen
    last = messages[-1]["content"] if messages else ""
    if found := python_blocks(last):
        return found[-1]
    task = last.rsplit("\n\n", 1)[-1].strip()
    return task if _is_program(task) else None


def describe(outcome: Outcome, limits: Limits) -> str:
    printed = outcome.output.rstrip()
    if outcome.status == "passed":
        return printed or PRINTED_NOTHING
    said = {
        "failed": f"{FAILED} (exit code {outcome.returncode}).",
        "timeout": f"{STOPPED}: it ran past its time limit "
        f"({limits.wall_s:g} s, {limits.cpu_s} s of CPU).",
        "memory": f"{OUT_OF_MEMORY} (limit {limits.memory_mb} MB, with all it starts).",
        "disk": f"{STOPPED}: it filled its folder ({limits.disk_mb} MB).",
        "file_size": f"{STOPPED}: it printed more than {limits.file_mb} MB.",
    }.get(outcome.status, f"{COULD_NOT_RUN}.")
    return f"{said}\n{printed}" if printed else said


class PythonTool:
    """A Backend. The sandbox is probed on the first call (a few subprocesses), not at pool
    building, so a config that names the tool costs nothing until a step runs it."""

    def __init__(self, limits: Limits = LIMITS, version: int = 0) -> None:
        self.limits = limits
        self.version = version  # its behaviour version (tools.BUILTIN), in its fingerprint
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return "tool:python"

    @property
    def fingerprint(self) -> str:
        lim = self.limits
        return (
            f"tool:python:{self.version}:{lim.wall_s}:{lim.cpu_s}:{lim.memory_mb}:{lim.file_mb}:"
            f"{lim.disk_mb}:{lim.processes}{examples.HARNESS_KEY}"
        )

    @property
    def supports_grammar(self) -> bool:
        return False

    def sandbox(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None:
                self._sandbox = Sandbox(self.limits)
                if note := self._sandbox.isolation.memory_note():  # said once, at first use
                    print(f"conductor: python tool: {note}", file=sys.stderr)
            return self._sandbox

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        asked = request.messages[-1]["content"] if request.messages else ""
        if asked.rstrip().endswith(examples.TEST):
            text, confinement = self._test(
                request.messages, asked.rstrip().removesuffix(examples.TEST)
            )
        else:
            program = find_program(request.messages)
            if program is None:
                text, confinement = NO_CODE, None
            else:
                outcome = self.sandbox().run(program)
                text, confinement = describe(outcome, self.limits), outcome.isolation
        if on_text is not None:
            on_text(text)
        return Completion(
            text=text,
            tokens_in=0,
            tokens_out=0,
            finish_reason="stop",
            cost=0.0,
            confinement=confinement,
        )

    def _test(self, messages: tuple[dict[str, str], ...], shown: str) -> tuple[str, str | None]:
        """The `test` words: the code of the steps it sees, on the examples the question and
        its attachments show and the tests of attached test files (tools/examples.py)."""
        code, said = seen_program(messages), ""
        files = examples.attached(shown)
        tests = examples.test_files(files)
        if code is None and tests:
            # The writer answered in words ("the code looks right"): the file it was given is
            # what the user's tests judge.
            named = examples.code_file(files)
            if named is not None:
                said = f"\nThe step it tests wrote no code; {named[0]} was tested as attached."
                code = named[1]
        if code is None:
            return examples.NO_CODE, None
        found = examples.examples(shown)
        if not found and not tests:
            return examples.NO_EXAMPLES, None
        names = [name for name, _ in files]
        outcome = self.sandbox().run(examples.harness(code, found, tests, names))
        if outcome.status == "passed" and outcome.output.strip():
            return outcome.output.rstrip() + said, outcome.isolation
        return describe(outcome, self.limits) + said, outcome.isolation


def make(config: Config) -> PythonTool:
    """The tool of models/builtin_tools.BUILTIN["python"], with the config's [sandbox] limits."""
    from conductor_cli.tools import tool_version

    return PythonTool(limits_of(config.sandbox), tool_version("python"))
