"""The code sandbox: model-written code runs limited, offline, writing only in its own temp
dir, and dies whole. Every test runs real processes."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conductor_cli.errors import InputError
from conductor_cli.sandbox import Limits, Sandbox
from conductor_cli.sandbox.isolation import machine_mb
from conductor_cli.testing import hostile
from conductor_cli.tools.python_tool import LIMITS as PYTHON_TOOL_LIMITS

LIMITS = Limits(wall_s=2.5, cpu_s=1, memory_mb=256, file_mb=1, processes=16)

CORRECT = """
def add(a, b):
    return a + b

def check(candidate):
    assert candidate(2, 3) == 5
    assert candidate(-1, 1) == 0

check(add)
"""


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    # The strongest isolation this machine allows; a machine that cannot confine refuses
    # (tested below), so there is nothing weaker to test.
    try:
        return Sandbox(LIMITS)
    except InputError as e:  # a kernel without Landlock, seccomp or namespaces
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
print("run", os.environ["CONDUCTOR_SANDBOX_RUN"], flush=True)
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
            assert not _sleepers(outcome.output)
        else:
            assert not _alive(int(reported[0]))
    assert not _sleepers(outcome.output)


def test_a_fork_bomb_meets_the_process_limit_and_nothing_survives(sandbox: Sandbox) -> None:
    # Every process forks until the process limit refuses; they sleep between tries so that
    # the test stays light on a shared machine.
    bomb = """
import os, time
print("run", os.environ["CONDUCTOR_SANDBOX_RUN"], flush=True)
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
    assert not _sleepers(outcome.output)


def _alive(pid: int) -> bool:
    # A killed orphan may stay a zombie when PID 1 does not reap (containers): that is dead.
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _sleepers(output: str) -> list[int]:
    """Live processes of the run whose output this is (it printed its run's mark), zombies
    excluded. Other tests' programs may run beside it."""
    return hostile.survivors(output.split("run ")[1].split()[0])


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
        f"/var/tmp/{name}",
        f"/usr/{name}",
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


def test_its_tmp_is_its_own(sandbox: Sandbox) -> None:
    # Model-written code writes to /tmp: it gets a private one, which the host never sees.
    name = f"conductor-test-{secrets.token_hex(6)}"
    host = Path(tempfile.gettempdir()) / f"conductor-host-{secrets.token_hex(6)}"
    host.write_text("the host's", encoding="utf-8")
    try:
        outcome = sandbox.run(
            f"import os, tempfile\nopen('/tmp/{name}', 'w').write('x')\n"
            "print(sorted(os.listdir('/tmp')))\n"
            "print(tempfile.NamedTemporaryFile().name.startswith(os.getcwd()))\n"
        )
    finally:
        host.unlink()
    assert outcome.passed, outcome.output
    listed, own_tmp = outcome.output.splitlines()
    # Its folder and its file, and where the interpreter it runs is mounted when that lies
    # under /tmp (a checkout there): nothing else of the host's /tmp.
    mounted = {
        Path(p).resolve().relative_to("/tmp").parts[0]
        for p in (sys.prefix, sys.base_prefix, sys.executable)
        if Path(p).resolve().is_relative_to("/tmp")
    }
    names = set(eval(listed)) - mounted
    assert name in names and host.name not in names, listed
    assert len(names) == 2 and any(n.startswith("conductor-sandbox-") for n in names), listed
    assert own_tmp == "True"
    assert not os.path.exists(f"/tmp/{name}")


def test_its_dev_shm_is_its_own(sandbox: Sandbox) -> None:
    # multiprocessing's semaphores live in /dev/shm: the program gets a private one.
    name = f"conductor-test-{secrets.token_hex(6)}"
    outcome = sandbox.run(
        f"import os\nopen('/dev/shm/{name}', 'w').write('x')\nprint(os.listdir('/dev/shm'))\n"
    )
    assert outcome.passed, outcome.output
    assert outcome.output.strip() == repr([name])
    assert not os.path.exists(f"/dev/shm/{name}")


def test_it_writes_in_its_own_folder_and_reads_the_system(sandbox: Sandbox) -> None:
    readable = Path("/etc/ssl/certs")
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
print(sorted(os.listdir({str(readable)!r}))[:3])
"""
    )
    assert outcome.passed, outcome.output
    assert str(sorted(os.listdir(readable))[:3]) in outcome.output


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


def test_each_confinement_is_named(sandbox: Sandbox) -> None:
    described = sandbox.isolation.describe()
    v = sandbox.isolation.landlock
    for said in (
        f"reads: Python, system libraries and its folder only (Landlock v{v})",
        f"writes: its folder only (Landlock v{v})",
        "network: none (Landlock, network namespace)",
        "unix sockets: none (seccomp)",
        "root: its own (the system read-only, a private /tmp)",
        "IPC: its own (namespace)",
        "system calls: datagram socketpairs, connect, SysV IPC",
        "processes: 16",
        f"disk: {LIMITS.disk_mb} MB (tmpfs)",
    ):
        assert said in described, described
    assert "memory: 256 MB" in described
    assert sandbox.run("pass").isolation == described


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"use_landlock": False}, ["reads and writes", "Landlock"]),
        ({"use_namespace": False}, ["disk", "namespace"]),
    ],
    ids=["no-landlock", "no-namespaces"],
)
def test_without_a_confinement_it_refuses_in_one_line(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, bool], names: list[str]
) -> None:
    monkeypatch.delenv("CONDUCTOR_SANDBOX", raising=False)
    with pytest.raises(InputError) as refused:
        Sandbox(LIMITS, **kwargs)
    message = str(refused.value)
    assert "\n" not in message
    assert all(name in message for name in names), message
    assert "CONDUCTOR_SANDBOX=unconfined" in message


def test_unconfined_runs_without_landlock_and_says_so(
    monkeypatch: pytest.MonkeyPatch, outside: Path
) -> None:
    monkeypatch.setenv("CONDUCTOR_SANDBOX", "unconfined")
    sandbox = Sandbox(LIMITS, use_landlock=False)
    assert sandbox.isolation.describe().startswith("unconfined (CONDUCTOR_SANDBOX=unconfined")
    assert "reads: anything its user may" in sandbox.isolation.describe()
    outcome = sandbox.run(CORRECT)
    assert outcome.passed and "unconfined" in outcome.isolation
    # The control for the write test: outside the sandbox, the user its programs run as
    # really may write this folder, so there only the sandbox stopped the writes.
    owner = sandbox.isolation.owner
    drop = {"user": owner[0], "group": owner[1], "extra_groups": []} if owner else {}
    script = f"echo x > {outside / 'file'}"
    assert subprocess.run(["/bin/sh", "-c", script], cwd="/", **drop).returncode == 0
    assert (outside / "file").exists()


# --- Hostile code (issue 40): what a program must not read, reach, fill or allocate, and
# ordinary programs that must still run. Each runs under the python tool's limits and under
# eval's code scorer's (the default Limits), the two users of the sandbox.

TOOL_LIMITS = dataclasses.replace(PYTHON_TOOL_LIMITS, wall_s=20.0, cpu_s=20)


@pytest.fixture(scope="module", params=["python-tool", "eval-scorer"])
def confined(request: pytest.FixtureRequest) -> Sandbox:
    try:
        return Sandbox(TOOL_LIMITS if request.param == "python-tool" else Limits())
    except InputError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def planted() -> Iterator[dict[str, Path]]:
    """Secrets where a program might look: a file only its owner may read, a world-readable
    file in a folder anyone may enter, and a config file like conductor's own."""
    folder = Path(tempfile.mkdtemp(prefix="conductor-test-planted-"))
    folder.chmod(0o755)
    files = {
        "owner_only": folder / "id_ed25519",
        "world": folder / "notes.txt",
        "config": folder / "conductor" / "config.toml",
    }
    files["config"].parent.mkdir(mode=0o755)
    for name, path in files.items():
        path.write_text(f"SECRET-{name}-{secrets.token_hex(6)}")
        path.chmod(0o600 if name == "owner_only" else 0o644)
    yield files
    shutil.rmtree(folder, ignore_errors=True)


_READS = """
import os
def attempt(what, act):
    try:
        print(what, "GOT", repr(act())[:200])
    except OSError as e:
        print(what, "refused", type(e).__name__)
for path in {paths!r}:
    attempt(path, lambda: open(path).read())
for folder in {folders!r}:
    attempt(folder, lambda: os.listdir(folder))
print("capabilities", open("/proc/self/status").read().split("CapEff:")[1].split()[0])
print("processes", sorted(p for p in os.listdir("/proc") if p.isdigit()))
"""


def test_it_reads_nothing_outside_what_python_needs(
    confined: Sandbox, planted: dict[str, Path]
) -> None:
    home = os.path.expanduser("~")
    paths = [str(p) for p in planted.values()] + ["/etc/shadow", "/etc/passwd"]
    folders = [home, str(planted["world"].parent), "/", "/home", "/root", "/etc/ssl", "/var"]
    outcome = confined.run(_READS.format(paths=paths, folders=folders))
    assert outcome.passed, outcome.output
    assert "GOT" not in outcome.output, outcome.output
    assert outcome.output.count("refused") == len(paths) + len(folders), outcome.output
    assert all(p.read_text() not in outcome.output for p in planted.values())
    # No capability reads past file permissions; its own processes only (a PID namespace).
    assert "capabilities 0000000000000000" in outcome.output
    listed = outcome.output.split("processes ")[1]
    assert len(eval(listed)) <= 3, listed  # unshare, the program (and a zombie at most)


@pytest.fixture
def unix_listener() -> Iterator[tuple[str, socket.socket]]:
    """A pathname unix socket anyone may connect to (like an ssh agent's or docker's)."""
    folder = Path(tempfile.mkdtemp(prefix="conductor-test-unix-"))
    folder.chmod(0o777)
    path = str(folder / "agent.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(4)
    server.settimeout(0.5)
    try:
        yield path, server
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_no_unix_socket_outside_from_a_child_or_ctypes(
    confined: Sandbox, unix_listener: tuple[str, socket.socket]
) -> None:
    path, server = unix_listener
    program = f"""
import ctypes, subprocess, sys
child = "import _socket; s = _socket.socket(_socket.AF_UNIX); s.connect({path!r}); s.send(b'x')"
ran = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
print("child exit", ran.returncode, ran.stderr.strip().splitlines()[-1:])
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM, below Python altogether
print("ctypes socket", fd, ctypes.get_errno())
"""
    outcome = confined.run(program)
    assert outcome.passed, outcome.output
    assert "child exit 1" in outcome.output and "PermissionError" in outcome.output
    assert "ctypes socket -1 1" in outcome.output  # EPERM
    with pytest.raises(TimeoutError):
        server.accept()  # nothing ever connected


def test_its_folder_is_bounded(confined: Sandbox) -> None:
    # Files as big as the file limit lets it write, until the folder is full.
    size = confined.limits.file_mb * 2**20
    program = f"""
written = 0
try:
    for i in range(1000):
        with open(f"f{{i}}", "wb") as f:
            f.write(b"x" * {size})
        written += 1
finally:
    print("MB written", written * {confined.limits.file_mb})
"""
    outcome = confined.run(program)
    assert outcome.status == "disk", outcome.output
    written = int(outcome.output.split("MB written ")[1].split()[0])
    assert confined.limits.disk_mb - confined.limits.file_mb <= written <= confined.limits.disk_mb


def test_memory_is_bounded_for_all_it_starts(confined: Sandbox) -> None:
    # Six processes of 400 MB each: each is under the per-process limit, together not.
    program = """
import os, time
children = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        block = bytearray(400 * 2**20)
        for j in range(0, len(block), 4096):
            block[j] = 1
        time.sleep(3)
        os._exit(0)
    children.append(pid)
print([os.waitpid(pid, 0)[1] for pid in children])
"""
    outcome = confined.run(program)
    if not confined.isolation.memory:  # no cgroup: fewer processes, each bounded
        assert confined.isolation.processes() * confined.limits.memory_mb * 4 <= machine_mb()
        assert not outcome.passed
        return
    assert outcome.status == "memory", outcome.output


def test_ordinary_programs_still_run(confined: Sandbox) -> None:
    program = """
import asyncio, collections, datetime, decimal, json, math, random, re, statistics
import multiprocessing, subprocess, sys, tempfile, threading
data = {"mean": statistics.mean([1, 2, 3, 4]), "sqrt": math.sqrt(16),
        "date": datetime.date(2026, 11, 27).isoformat(), "dec": str(decimal.Decimal("0.1") * 3),
        "re": re.findall(r"\\d+", "a1b22"), "count": collections.Counter("aab")["a"],
        "rand": random.Random(1).randint(1, 6)}
print(json.dumps(data, sort_keys=True))
print(subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                     text=True).stdout.strip())
with multiprocessing.Pool(2) as pool:
    print(pool.map(abs, [-1, -2, -3]))
with open("notes.txt", "w") as f:
    f.write("kept")
print(open("notes.txt").read())
async def answer():
    await asyncio.sleep(0.01)
    return 7
print(asyncio.run(answer()))  # its event loop wakes itself through a socketpair
results = []
threads = [threading.Thread(target=results.append, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(results))
with tempfile.TemporaryDirectory() as d, open("/tmp/scratch.txt", "w") as f:
    f.write(d)
print(open("/tmp/scratch.txt").read().startswith(tempfile.gettempdir()))
"""
    outcome = confined.run(program)
    assert outcome.passed, outcome.output
    lines = outcome.output.splitlines()
    assert json.loads(lines[0]) == {
        "count": 2, "date": "2026-11-27", "dec": "0.3", "mean": 2.5, "rand": 2,
        "re": ["1", "22"], "sqrt": 4.0,
    }  # fmt: skip
    assert lines[1:] == ["42", "[1, 2, 3]", "kept", "7", "[0, 1, 2, 3]", "True"]


# --- Issue 56: six ways out that a read allow-list and a socket() ban left open (unix
# datagrams, the host's SysV IPC, chmod/utime/xattrs outside, disk through stdout, memory no
# per-process limit counts, inotify), and the variants a careful attacker tries next. Each
# hostile program is in conductor_cli/testing/hostile.py, checked from outside: what arrived
# at a socket, what was left in /proc/sysvipc, what changed on a file, how much disk or
# memory the machine lost while it ran. Under the python tool's own limits.


@pytest.fixture(scope="module")
def tool_sandbox() -> Sandbox:
    try:
        return Sandbox(PYTHON_TOOL_LIMITS)
    except InputError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("step", hostile.STEPS, ids=lambda step: step.__name__.strip("_"))
def test_a_hostile_program_gets_nothing_out(
    tool_sandbox: Sandbox, step: Callable[[Sandbox], list[hostile.Attempt]]
) -> None:
    found = step(tool_sandbox)
    assert found
    assert not [a for a in found if a.escaped], found


@pytest.fixture(scope="module")
def ordinary_user() -> Iterator[tuple[int, int, str]]:
    """A user made for the test (uid, gid, home), removed after; skipped where this process
    cannot make one."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("making a user for the test needs root and useradd")
    name = f"cnd-{secrets.token_hex(4)}"
    made = subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/sh", name], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.decode().strip()}")
    try:
        import pwd

        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid, entry.pw_dir
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def test_as_an_ordinary_user_a_hostile_program_gets_nothing_out(
    ordinary_user: tuple[int, int, str],
) -> None:
    uid, gid, home = ordinary_user
    # An interpreter this user may run (a pyenv under /root is not one), and this checkout.
    pythons = [sys.executable, "/usr/bin/python3", shutil.which("python3") or ""]
    python = next((p for p in pythons if p and hostile.runs_python(p, (uid, gid))), None)
    if python is None:
        pytest.skip("no Python interpreter this test's user may run")
    # A venv of copies that the user owns, as pyenv, uv and conda make them: its interpreter
    # is a file the sandboxed program's own user may chmod, if it can reach it.
    venv = Path(home) / "venv"
    made = subprocess.run(
        [python, "-m", "venv", "--copies", "--without-pip", str(venv)],
        user=uid,
        group=gid,
        extra_groups=[],
        cwd=home,
        capture_output=True,
    )
    if made.returncode == 0 and (venv / "bin" / "python3").exists():
        python = str(venv / "bin" / "python3")
    root = str(Path(hostile.__file__).resolve().parents[2])
    limits = {f.name: getattr(PYTHON_TOOL_LIMITS, f.name) for f in dataclasses.fields(Limits)}
    ran = subprocess.run(
        [python, "-m", "conductor_cli.testing.hostile", "--limits", json.dumps(limits)],
        user=uid,
        group=gid,
        extra_groups=[],
        cwd=home,
        env={"PATH": os.defpath, "HOME": home, "PYTHONPATH": root, "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if ran.returncode != 0 and "No module named" in ran.stderr:
        pytest.skip(f"this checkout is not readable by the test's user: {ran.stderr[-200:]}")
    assert ran.returncode == 0, ran.stderr[-2000:]
    report = json.loads(ran.stdout)
    assert report["user"] == uid
    found = [hostile.Attempt(**a) for a in report["attempts"]]
    assert len(found) >= 20
    assert not [a for a in found if a.escaped], found
    # Without a cgroup, the memory of all it starts is bounded by counting, and said so.
    if "cgroup" not in report["isolation"]:
        assert "MB in all (counted)" in report["isolation"], report["isolation"]
        assert report["memory_note"].startswith("memory: no cgroup for this user, so at most")
        assert "\n" not in report["memory_note"]


# --- Issue 67: for a run as root, any `nobody` process of the host could swap the program
# between its writing and its start (the confining preamble is inside that file) and run as
# root. A watcher as `nobody` tries it on each of 20 runs, judged from outside: a file only
# root may write appears where a program that ran as root would leave it.


def test_a_nobody_watcher_cannot_swap_a_root_runs_program(sandbox: Sandbox) -> None:
    if os.geteuid() != 0:
        pytest.skip("the run starts as root only when conductor runs as root")
    found = hostile.swapped_program(sandbox)
    if not found:
        pytest.skip("no Python interpreter `nobody` may run for the watcher")
    assert not [a for a in found if a.escaped], found
    assert " 0 swap(s)" in found[0].seen  # nobody was given nothing to replace


# --- Issue 67: a program whose pid 1 leaves its session ends at the wall clock, and the call
# returns, with its memory cgroup and without (hostile._outliving judges from outside).


def test_a_program_that_leaves_its_session_ends_with_its_run(sandbox: Sandbox) -> None:
    # Also among hostile.STEPS, under the python tool's limits and as an ordinary user.
    found = hostile._outliving(sandbox)
    assert found
    assert not [a for a in found if a.escaped], found
