"""The code sandbox: model-written code runs limited, offline, writing only in its own temp
dir, and dies whole. Every test runs real processes."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.errors import InputError
from conductor_cli.sandbox import Limits, Sandbox

LIMITS = Limits(wall_s=2.5, cpu_s=1, memory_mb=256, file_mb=1, processes=16)

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
    try:
        return Sandbox(LIMITS, use_namespace=request.param)
    except InputError as e:  # a kernel without Landlock: the sandbox refuses to run
        pytest.skip(str(e))


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


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening TCP socket on loopback that nothing should ever reach (accept times out)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    try:
        yield server
    finally:
        server.close()


def test_a_program_cannot_reach_the_network(sandbox: Sandbox, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    outcome = sandbox.run(
        "import socket, urllib.request\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n"
    )
    assert not outcome.passed
    assert "network" in outcome.output or "unreachable" in outcome.output.lower()
    with pytest.raises(TimeoutError):
        listener.accept()  # nothing ever connected


def test_a_big_file_is_refused(sandbox: Sandbox) -> None:
    outcome = sandbox.run("open('big', 'wb').write(b'x' * (4 * 2**20))\n")
    assert outcome.status == "file_size"


def test_endless_output_is_bounded(sandbox: Sandbox) -> None:
    outcome = sandbox.run("while True:\n    print('x' * 1000)\n")
    assert not outcome.passed
    assert len(outcome.output) <= 2000


def test_what_it_forks_dies_with_it(sandbox: Sandbox) -> None:
    # The child detaches into its own session, so only the namespace or process group kill
    # can reach it; it reports its pid on its output (it may write nowhere else).
    program = """
import os, time
if os.fork() == 0:
    os.setsid()
    print("child", os.getpid(), flush=True)
    time.sleep(60)
else:
    time.sleep(60)
"""
    outcome = sandbox.run(program)
    assert outcome.status == "timeout"
    reported = [line.split()[1] for line in outcome.output.splitlines() if line.startswith("child")]
    if reported:
        time.sleep(0.2)
        if sandbox.isolation.namespace:
            # The pid is the child's pid inside its PID namespace; no process of ours may
            # still run the sleep.
            assert not _sleepers()
        else:
            assert not _alive(int(reported[0]))
    assert not _sleepers()


def test_a_fork_bomb_meets_the_process_limit_and_nothing_survives(sandbox: Sandbox) -> None:
    # Every process forks until the process limit refuses; they sleep between tries so that
    # the test stays light on a shared machine.
    bomb = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        print("refused", flush=True)
        time.sleep(0.2)
"""
    outcome = sandbox.run(bomb)
    assert outcome.status == "timeout"
    assert "refused" in outcome.output  # RLIMIT_NPROC held, not only the wall clock
    time.sleep(0.2)
    assert not _sleepers()


def _alive(pid: int) -> bool:
    # A killed orphan may stay a zombie when PID 1 does not reap (containers): that is dead.
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _sleepers() -> list[int]:
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


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder anyone may write to, outside the program's own: like /tmp, or a home folder.

    Made under the system temp dir, not tmp_path, whose parents `nobody` may not enter: only
    the sandbox itself should stop these writes, not file permissions."""
    folder = Path(tempfile.mkdtemp(prefix="conductor-test-outside-"))
    (folder / "home").mkdir()
    for path in (folder, folder / "home"):
        path.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _escape_program(targets: list[str]) -> str:
    # A file, a folder, a file renamed out of its folder, and a write from a child process.
    return f"""
import os

def shell(target):
    if os.system(f"echo x > {{target}} 2>/dev/null") != 0:
        raise OSError("the shell could not write")

open("mine", "w").write("x")
for target in {targets!r}:
    for name, act in (
        ("open", lambda: open(target, "w").write("x")),
        ("mkdir", lambda: os.mkdir(target + ".d")),
        ("rename", lambda: os.rename("mine", target + ".moved")),
        ("shell", lambda: shell(target + ".sh")),
    ):
        try:
            act()
            print("WROTE", name, target)
        except OSError as e:
            print("refused", name, target, type(e).__name__)
"""


def _targets(outside: Path) -> list[str]:
    name = f"conductor-test-{secrets.token_hex(6)}"
    return [
        str(outside / "file"),
        str(outside / "home" / ".profile"),
        f"/tmp/{name}",
        f"/var/tmp/{name}",
        f"/dev/shm/{name}",
    ]


def _written(targets: list[str]) -> list[str]:
    suffixes = ("", ".d", ".moved", ".sh")
    return [t + x for t in targets for x in suffixes if os.path.lexists(t + x)]


def test_writes_outside_its_folder_fail_and_leave_nothing(sandbox: Sandbox, outside: Path) -> None:
    targets = _targets(outside)
    try:
        outcome = sandbox.run(_escape_program(targets))
        assert outcome.passed, outcome.output
        assert "WROTE" not in outcome.output, outcome.output
        assert outcome.output.count("refused") == 4 * len(targets), outcome.output
        assert not _written(targets)
    finally:
        for path in _written(targets):  # what a failing run left behind
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)


def test_it_writes_in_its_own_folder_and_reads_elsewhere(sandbox: Sandbox) -> None:
    readable = Path("/etc/hostname") if Path("/etc/hostname").exists() else Path("/etc/passwd")
    outcome = sandbox.run(
        f"""
import os, subprocess
os.mkdir("d")
open("d/f", "w").write("x")
os.rename("d/f", "g")
os.truncate("g", 0)
os.remove("g")
os.rmdir("d")
assert os.system("echo from-a-child > child.txt") == 0
assert open("child.txt").read() == "from-a-child\\n"
open(os.devnull, "w").write("thrown away")
subprocess.run(["true"], stdout=subprocess.DEVNULL, check=True)
print(open({str(readable)!r}).read())
"""
    )
    assert outcome.passed, outcome.output
    assert readable.read_text().strip() in outcome.output


def test_tcp_is_blocked_below_python(sandbox: Sandbox, listener: socket.socket) -> None:
    # The type under the Python-level block is still reachable, so this tests the kernel's
    # block: the network namespace or Landlock.
    port = listener.getsockname()[1]
    outcome = sandbox.run(
        "import _socket\n"
        "real = _socket.socket.__mro__[1]\n"
        "s = real(_socket.AF_INET, _socket.SOCK_STREAM)\n"
        "s.settimeout(2)\n"
        f"s.connect(('127.0.0.1', {port}))\n"
        "s.sendall(b'leak')\n"
    )
    assert not outcome.passed
    assert "Error" in outcome.output, outcome.output
    with pytest.raises(TimeoutError):
        listener.accept()


def test_no_secret_from_the_environment(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-conductor-test-{secrets.token_hex(8)}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    outcome = sandbox.run(
        "import os\n"
        "print(dict(os.environ))\n"
        # Other processes' environments too, this one's included, where /proc lets it look.
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
    )
    assert outcome.passed, outcome.output
    assert "OPENAI_API_KEY" not in outcome.output
    assert secret not in outcome.output


def test_the_isolation_is_named(sandbox: Sandbox) -> None:
    described = sandbox.isolation.describe()
    assert f"Landlock v{sandbox.isolation.landlock} (writes only in its folder" in described
    assert "16 processes" in described
    assert sandbox.run("pass").isolation == described


def test_without_landlock_it_refuses_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDUCTOR_SANDBOX", raising=False)
    with pytest.raises(InputError) as refused:
        Sandbox(LIMITS, use_landlock=False)
    message = str(refused.value)
    assert "\n" not in message
    assert "Landlock" in message and "CONDUCTOR_SANDBOX=unconfined" in message


def test_unconfined_runs_without_landlock_and_says_so(
    monkeypatch: pytest.MonkeyPatch, outside: Path
) -> None:
    monkeypatch.setenv("CONDUCTOR_SANDBOX", "unconfined")
    sandbox = Sandbox(LIMITS, use_landlock=False)
    assert sandbox.isolation.describe().startswith("unconfined (CONDUCTOR_SANDBOX=unconfined")
    outcome = sandbox.run(CORRECT)
    assert outcome.passed and "unconfined" in outcome.isolation
    # The control for the write test: without Landlock this folder really is writable, so
    # there only Landlock stopped the writes.
    outcome = sandbox.run(f"open({str(outside / 'file')!r}, 'w').write('x')\n")
    assert outcome.passed, outcome.output
    assert (outside / "file").exists()
