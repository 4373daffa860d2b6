"""The code sandbox: model-written code runs limited, offline, in a temp dir, and dies whole."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from conductor_cli.sandbox import Limits, Sandbox

LIMITS = Limits(wall_s=2.5, cpu_s=1, memory_mb=256, file_mb=1)

CORRECT = """
def add(a, b):
    return a + b

def check(candidate):
    assert candidate(2, 3) == 5
    assert candidate(-1, 1) == 0

check(add)
"""


@pytest.fixture(scope="module", params=[None, False], ids=["best", "sockets-blocked"])
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    # `None` takes the strongest isolation this machine allows (a network namespace where the
    # kernel lets us make one); `False` is the fallback for machines without one.
    return Sandbox(LIMITS, use_namespace=request.param)


def test_a_correct_solution_passes(sandbox: Sandbox) -> None:
    outcome = sandbox.run(CORRECT)
    assert outcome.passed and outcome.status == "passed", outcome.output


def test_a_wrong_solution_fails_with_its_error(sandbox: Sandbox) -> None:
    outcome = sandbox.run(CORRECT.replace("a + b", "a - b"))
    assert not outcome.passed
    assert outcome.status == "failed"
    assert "AssertionError" in outcome.output


def test_an_endless_loop_is_stopped(sandbox: Sandbox) -> None:
    start = time.monotonic()
    outcome = sandbox.run("while True:\n    pass\n")
    assert not outcome.passed
    # Stopped by the CPU limit or the wall-clock limit, whichever comes first on a busy box.
    assert time.monotonic() - start < LIMITS.wall_s + 3


def test_a_sleeping_program_is_killed_at_the_wall_clock_limit(sandbox: Sandbox) -> None:
    outcome = sandbox.run("import time\ntime.sleep(60)\n")
    assert outcome.status == "timeout"
    assert LIMITS.wall_s <= outcome.seconds < LIMITS.wall_s + 3


def test_a_memory_hog_fails_without_harming_this_process(sandbox: Sandbox) -> None:
    outcome = sandbox.run("blocks = [bytearray(64 * 2**20) for _ in range(64)]\n")
    assert outcome.status == "memory", outcome.output
    assert not outcome.passed
    # This process can still allocate what the program could not.
    assert len(bytearray(300 * 2**20)) == 300 * 2**20


def test_a_program_cannot_reach_the_network(sandbox: Sandbox) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        outcome = sandbox.run(
            "import socket, urllib.request\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n"
        )
        assert not outcome.passed
        assert "network" in outcome.output or "unreachable" in outcome.output.lower()
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing ever connected
    finally:
        listener.close()


def test_a_big_file_is_refused(sandbox: Sandbox) -> None:
    outcome = sandbox.run("open('big', 'wb').write(b'x' * (4 * 2**20))\n")
    assert outcome.status == "file_size"


def test_endless_output_is_bounded(sandbox: Sandbox) -> None:
    outcome = sandbox.run("while True:\n    print('x' * 1000)\n")
    assert not outcome.passed
    assert len(outcome.output) <= 2000


def test_what_it_forks_dies_with_it(sandbox: Sandbox, tmp_path: Path) -> None:
    # The child detaches into its own session, so only the namespace or process group kill
    # can reach it; it reports its pid through a file the test can read.
    pid_file = tmp_path / "child.pid"
    os.chmod(tmp_path, 0o777)
    program = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    with open({str(pid_file)!r}, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)
else:
    time.sleep(60)
"""
    outcome = sandbox.run(program)
    assert outcome.status == "timeout"
    if pid_file.exists() and pid_file.read_text():
        pid = int(pid_file.read_text())
        time.sleep(0.2)
        if sandbox.isolation.namespace:
            # The pid is the child's pid inside its PID namespace; no process of ours may
            # still run the sleep.
            assert not _sleepers(tmp_path)
        else:
            assert not _alive(pid)
    assert not _sleepers(tmp_path)


def _alive(pid: int) -> bool:
    # A killed orphan may stay a zombie when PID 1 does not reap (containers): that is dead.
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _sleepers(marker: Path) -> list[int]:
    """Live processes whose command line mentions the sandbox program (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"conductor-sandbox-" in cmdline and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


def test_the_program_runs_in_a_fresh_temp_dir_that_is_removed(sandbox: Sandbox) -> None:
    outcome = sandbox.run(
        "import os\nprint(os.getcwd())\nprint(sorted(os.listdir('.')))\n"
        "open('scratch.txt', 'w').write('x')\n"
    )
    assert outcome.passed, outcome.output
    cwd = outcome.output.splitlines()[0]
    assert "conductor-sandbox-" in cwd
    assert not Path(cwd).exists()
