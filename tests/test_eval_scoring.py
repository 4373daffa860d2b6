"""HumanEval answers scored for real: the packaged problem, a model-style reply, the sandbox."""

from __future__ import annotations

import socket

import pytest

from conductor_cli.errors import InputError
from conductor_cli.evals import scoring
from conductor_cli.evals.datasets import load_humaneval
from conductor_cli.evals.kinds import scoring_limits
from conductor_cli.sandbox import Limits, Sandbox


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    return next(p for p in load_humaneval() if p.id == "HumanEval/0")


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    try:
        return Sandbox(Limits(wall_s=3, cpu_s=2, memory_mb=256, file_mb=1))
    except InputError as e:  # a kernel without Landlock: the sandbox refuses to run
        pytest.skip(str(e))


def reply(body: str) -> str:
    """A reply the way models write them: prose, then the whole function in a fence."""
    return (
        "Here is the completed function:\n\n```python\nfrom typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        f"{body}```\n\nIt compares every pair."
    )


def test_the_canonical_solution_passes(problem, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    correct, code, detail = scoring.score(problem, reply(problem.answer), sandbox)
    assert correct and detail["sandbox"] == "passed"
    assert "def has_close_elements" in code


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("    return False\n", "failed"),
        ("    while True:\n        pass\n", None),  # the CPU limit or the wall clock stops it
        ("    x = bytearray(2 * 1024**3)\n    return False\n", "memory"),
        ("    import urllib.request\n    urllib.request.urlopen('http://127.0.0.1:{port}/')\n"
         "    return True\n", "failed"),
    ],
    ids=["wrong", "endless", "memory", "network"],
)  # fmt: skip
def test_bad_solutions_fail_without_harm(problem, sandbox: Sandbox, body: str, status) -> None:  # type: ignore[no-untyped-def]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    try:
        body = body.replace("{port}", str(listener.getsockname()[1]))
        correct, _, detail = scoring.score(problem, reply(body), sandbox)
        assert not correct
        if status is not None:
            assert detail["sandbox"] == status, detail
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_hidden_tests_are_bounded_by_cpu_seconds_not_the_wall_clock(problem) -> None:  # type: ignore[no-untyped-def]
    """Scored beside llama.cpp, a right answer gets a fraction of a core: the wall seconds it
    takes are not its own. Scoring's limits (one CPU second here) let a right answer take
    2.5 wall seconds, and still stop one that runs past its CPU seconds."""
    try:
        sandbox = Sandbox(scoring_limits(cpu_s=1))
    except InputError as e:
        pytest.skip(str(e))
    waits = (  # once: the tests call the function many times
        "    import builtins, time\n    if not hasattr(builtins, 'slept'):\n"
        "        builtins.slept = time.sleep(2.5)\n" + problem.answer
    )
    correct, _, detail = scoring.score(problem, reply(waits), sandbox)
    assert correct, detail
    spins = (
        "    import time\n    end = time.process_time() + 3\n"
        "    while time.process_time() < end:\n        pass\n    return False\n"
    )
    correct, _, detail = scoring.score(problem, reply(spins), sandbox)
    assert not correct and detail["sandbox"] != "failed", detail
