"""Run untrusted Python (a model's code) in a subprocess that cannot hurt the machine.

`conductor eval`'s code scorer and the python tool call this. The program runs in a fresh
temp dir (its scratch folder) with limits on CPU time, memory, file size and processes, a
scrubbed environment, and is killed with everything it started when the wall-clock limit
passes. Under root it runs as `nobody`: root may write anywhere and is exempt from the
process limit.

Writes: Landlock (confine.py) lets the program and everything it starts write beneath its
scratch folder and to /dev/null only; reads and execution stay allowed. A machine without
Landlock is refused (InputError) unless CONDUCTOR_SANDBOX=unconfined says to run anyway.

No network: a network namespace (with a PID namespace so that nothing it forks outlives it)
where the kernel allows one, Landlock's TCP block (ABI 4+), and socket creation blocked
inside Python in every case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.errors import InputError
from conductor_cli.sandbox import confine

# CONDUCTOR_SANDBOX=unconfined: run where Landlock is missing, knowingly, with the rest.
ENV = "CONDUCTOR_SANDBOX"
UNCONFINED = "unconfined"

# Runs before the program, in the same interpreter, so nothing in the program runs without
# it: the limits, then the drop from root and Landlock, then the Python socket block.
_LIMITS = """\
import resource as _r
for _k, _v in ((_r.RLIMIT_CPU, {cpu}), (_r.RLIMIT_AS, {memory}), (_r.RLIMIT_FSIZE, {fsize}),
               (_r.RLIMIT_NPROC, {nproc}), (_r.RLIMIT_CORE, 0)):
    _r.setrlimit(_k, (_v, _v))
del _r, _k, _v
"""
# confine.py's source runs in a namespace of its own, so the program's globals stay clean;
# a failure stops the program before it starts (fail closed).
_CONFINE = """\
_ns = {{}}
exec(compile({source!r}, "conductor-confine", "exec"), _ns)
"""
_CONFINE_STEP = """\
try:
    _ns[{function!r}](*{args!r})
except OSError as _e:
    raise SystemExit("{failed}: {step}: " + str(_e)) from None
"""
_CONFINE_FAILED = "conductor sandbox: could not confine"
_CONFINE_SOURCE = Path(confine.__file__).read_text(encoding="utf-8")
_SOCKETS = """\
import socket as _s, _socket as _ss
def _no_network(*_a, **_k):
    raise OSError("network access is disabled in conductor's sandbox")
# Subclasses, not functions, so that modules which subclass socket (ssl) still import.
class _NoSocket(_s.socket):
    __init__ = _no_network
class _NoRawSocket(_ss.socket):
    __init__ = _no_network
_s.socket, _ss.socket, _ss.SocketType = _NoSocket, _NoRawSocket, _NoRawSocket
for _m in (_s, _ss):
    for _n in ("socketpair", "fromfd", "create_connection", "create_server"):
        if hasattr(_m, _n):
            setattr(_m, _n, _no_network)
del _s, _ss, _m, _n
"""

_OUTPUT_TAIL = 2000
# Inherited by everything the program starts: without a PID namespace, this finds the
# processes that escaped the process group.
_MARK = "CONDUCTOR_SANDBOX_RUN"


@dataclass(frozen=True)
class Limits:
    wall_s: float = 15.0
    cpu_s: int = 10
    memory_mb: int = 512
    file_mb: int = 16
    # Processes and threads the program may add (RLIMIT_NPROC, which counts all of a user's).
    processes: int = 64

    def describe(self) -> str:
        return f"limits cpu {self.cpu_s} s / {self.memory_mb} MB / {self.processes} processes"


@dataclass(frozen=True)
class Outcome:
    passed: bool
    # passed | failed | timeout | memory | file_size | error
    status: str
    returncode: int | None
    output: str  # the tail of stdout and stderr together
    seconds: float
    isolation: str  # Isolation.describe()


def _nobody() -> tuple[int, int]:
    try:
        ids = pwd.getpwnam("nobody")
        return ids.pw_uid, ids.pw_gid
    except KeyError:
        return 65534, 65534


def _popen_drop(ids: tuple[int, int]) -> dict[str, Any]:
    return {"user": ids[0], "group": ids[1], "extra_groups": []}


# Network and PID namespaces; --mount-proc so that the program sees only its own processes
# in /proc, not this one's (its /proc/PID/environ holds API keys).
_NAMESPACES = ["-n", "-p", "-f", "--kill-child", "--mount-proc", "--"]
# `-r`: a user namespace, which lets a user other than root make the others.
_USER_NAMESPACE = ["unshare", "-r", *_NAMESPACES]
# Root needs none, and must not have one: its program drops to `nobody`, whom `-r` leaves
# unmapped.
_ROOT_NAMESPACE = ["unshare", *_NAMESPACES]


def _works(command: list[str], drop: dict[str, Any]) -> bool:
    try:
        probe = subprocess.run(
            [*command, sys.executable, "-I", "-c", "pass"],
            capture_output=True,
            timeout=20,
            cwd="/",
            **drop,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def _strongest_launch(
    use_namespace: bool | None,
) -> tuple[bool, dict[str, Any], tuple[int, int] | None]:
    """(namespace, Popen drop, drop in the program): the best way to start the interpreter.

    Root starts it as `nobody` where `nobody` may run this Python; otherwise (an interpreter
    under /root) starts it as root and its preamble drops to `nobody` (confine.drop_root).
    """
    nobody = _nobody() if os.geteuid() == 0 else None
    namespaces = [True, False] if use_namespace is None else [use_namespace]
    if shutil.which("unshare") is None:
        namespaces = [False]
    for namespace in namespaces:
        if nobody and _works(_USER_NAMESPACE if namespace else [], _popen_drop(nobody)):
            return namespace, _popen_drop(nobody), None
        if _works((_ROOT_NAMESPACE if nobody else _USER_NAMESPACE) if namespace else [], {}):
            return namespace, {}, nobody
    return False, {}, nobody


def _landlock_missing(error: OSError) -> str:
    if error.errno == errno.ENOSYS:
        return "this kernel has no Landlock"
    if error.errno == errno.EOPNOTSUPP:
        return "Landlock is built in but not enabled"
    return f"Landlock does not start: {error.strerror or error}"


# Tries what the sandbox must stop: a write to a folder anyone may write to, and TCP to a
# port of this machine. Run without the Python socket block, so the kernel's block is tested.
_PROBE = """
import socket
try:
    open({target!r}, "w").close()
    print("write allowed")
except OSError:
    print("write refused")
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    print("tcp allowed")
except OSError:
    print("tcp refused")
"""


@dataclass(frozen=True)
class Isolation:
    namespace: bool
    # Popen arguments that switch to `nobody` (empty when not root, or when `nobody` cannot
    # run this Python, e.g. an interpreter under /root)
    drop: dict[str, Any]
    landlock: int = 0  # the Landlock ABI version in force; 0: writes are not confined
    # (uid, gid) the program's preamble drops root to, keeping the right to read
    drop_in_program: tuple[int, int] | None = None
    kernel_net_block: bool = False  # TCP to this machine failed below Python in the probe
    missing: str = ""  # why Landlock is not in force
    unconfined: bool = False  # CONDUCTOR_SANDBOX=unconfined: running without Landlock
    limits: Limits | None = None

    @classmethod
    def probe(
        cls,
        use_namespace: bool | None = None,
        use_landlock: bool = True,
        limits: Limits | None = None,
    ) -> Isolation:
        """The strongest confinement this machine allows, tried on real processes.

        `use_landlock=False` acts as if the kernel had none (tests of the refusal)."""
        namespace, drop, drop_in_program = _strongest_launch(use_namespace)
        version, missing = 0, "turned off by the caller"
        if use_landlock:
            try:
                version, missing = confine.abi(), ""
            except OSError as e:
                missing = _landlock_missing(e)
        found = cls(namespace, drop, version, drop_in_program, missing=missing, limits=limits)
        return _try_escape(found)

    @property
    def owner(self) -> tuple[int, int] | None:
        """Who the program runs as, where that is not this process's user."""
        if self.drop:
            return self.drop["user"], self.drop["group"]
        return self.drop_in_program

    def describe(self) -> str:
        if self.landlock:
            tcp = ", no TCP" if self.landlock >= 4 else ""
            parts = [f"Landlock v{self.landlock} (writes only in its folder{tcp})"]
        elif self.unconfined:
            parts = [f"unconfined ({ENV}={UNCONFINED}: writes anywhere it may; {self.missing})"]
        else:
            parts = [f"no write confinement ({self.missing})"]
        if self.namespace:
            parts.append("network namespace")
        parts.append(
            "sockets blocked" if self.kernel_net_block else "sockets blocked in Python only"
        )
        if self.drop:
            parts.append("as nobody")
        elif self.drop_in_program:
            parts.append("as nobody (reading as root)")
        elif os.geteuid() == 0:
            parts.append("as root")
        if self.limits:
            parts.append(self.limits.describe())
        return ", ".join(parts)

    def refusal(self) -> str:
        """One line: what is missing, and how to run anyway."""
        return (
            f"the code sandbox needs Landlock to keep a program's writes in its own folder "
            f"({self.missing}): use Linux 5.13+ with landlock in the kernel's lsm= list, or "
            f"set {ENV}={UNCONFINED} to run code without write confinement knowingly"
        )


def _try_escape(isolation: Isolation) -> Isolation:
    """Run _PROBE under `isolation`; keep only what really held."""
    outside = Path(tempfile.mkdtemp(prefix="conductor-probe-"))
    target = outside / "escaped"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        try:
            os.chmod(outside, 0o777)  # so that only Landlock can refuse the write
            program = _PROBE.format(target=str(target), port=listener.getsockname()[1])
            limits = Limits(wall_s=10, cpu_s=5, memory_mb=256, file_mb=1, processes=16)
            output = _execute(isolation, limits, program, sockets=False).output
            escaped = target.exists()
        finally:
            shutil.rmtree(outside, ignore_errors=True)
    failure = next((line for line in output.splitlines() if _CONFINE_FAILED in line), "")
    # Each retry gives up one thing, so this ends.
    if isolation.drop_in_program and "dropping root" in failure:
        return _try_escape(dataclasses.replace(isolation, drop_in_program=None))
    if isolation.landlock and (escaped or "write refused" not in output):
        missing = failure or "a probe's write outside its folder was not stopped"
        return _try_escape(dataclasses.replace(isolation, landlock=0, missing=missing))
    return dataclasses.replace(isolation, kernel_net_block="tcp refused" in output)


class Sandbox:
    """Probe the isolation once, then run any number of programs (thread-safe).

    Raises InputError where writes cannot be confined, unless CONDUCTOR_SANDBOX=unconfined.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        use_namespace: bool | None = None,
        use_landlock: bool = True,
    ):
        self.limits = limits or Limits()
        isolation = Isolation.probe(use_namespace, use_landlock, self.limits)
        if not isolation.landlock:
            if os.environ.get(ENV, "") != UNCONFINED:
                raise InputError(isolation.refusal())
            isolation = dataclasses.replace(isolation, unconfined=True)
        self.isolation = isolation

    def run(self, program: str) -> Outcome:
        return _execute(self.isolation, self.limits, program)


def _tasks_of(uid: int) -> int:
    """Processes and threads whose real user is `uid`: what RLIMIT_NPROC counts."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:  # gone since
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            count += int(fields.get("Threads", "1"))
    return count


def _process_limit(isolation: Isolation, lim: Limits) -> int:
    """RLIMIT_NPROC for the run: `lim.processes` more than its user has now.

    The kernel counts per user and user namespace: a fresh count where the program gets a user
    namespace of its own; otherwise its user's other processes count too (the zombies of
    earlier runs until they are reaped, a desktop session), and must not use up the limit."""
    if isolation.namespace and not isolation.drop_in_program:
        return lim.processes + 2  # unshare and the interpreter
    uid = isolation.owner[0] if isolation.owner else os.getuid()
    return lim.processes + _tasks_of(uid)


def _preamble(isolation: Isolation, lim: Limits, folder: Path, sockets: bool) -> str:
    text = _LIMITS.format(
        cpu=lim.cpu_s,
        memory=lim.memory_mb * 2**20,
        fsize=lim.file_mb * 2**20,
        nproc=_process_limit(isolation, lim),
    )
    steps = []
    if isolation.drop_in_program:
        steps.append(("drop_root", isolation.drop_in_program, "dropping root"))
    if isolation.landlock:
        steps.append(("restrict_writes", (str(folder),), "Landlock"))
    if steps:
        text += _CONFINE.format(source=_CONFINE_SOURCE)
        for function, args, step in steps:
            text += _CONFINE_STEP.format(
                function=function, args=args, step=step, failed=_CONFINE_FAILED
            )
        text += "del _ns\n"
    return text + (_SOCKETS if sockets else "")


def _execute(isolation: Isolation, lim: Limits, program: str, *, sockets: bool = True) -> Outcome:
    token = secrets.token_hex(8)
    workdir = Path(tempfile.mkdtemp(prefix="conductor-sandbox-"))
    # -I: ignore PYTHON* variables and the user's site-packages; the program gets the
    # standard library only.
    script = workdir / "program.py"
    command = [sys.executable, "-I", str(script)]
    if isolation.namespace:
        namespace = _ROOT_NAMESPACE if isolation.drop_in_program else _USER_NAMESPACE
        command = [*namespace, *command]
    start = time.monotonic()
    try:
        script.write_text(_preamble(isolation, lim, workdir, sockets) + program, encoding="utf-8")
        out_path = workdir / "output.txt"
        out_path.touch()
        if isolation.owner:
            for path in (workdir, script, out_path):
                os.chown(path, *isolation.owner)
        env = {
            _MARK: token,
            "PATH": os.defpath,
            "HOME": str(workdir),
            "LANG": "C.UTF-8",
            "TMPDIR": str(workdir),
        }
        with open(out_path, "wb") as out:  # a file, not a pipe: RLIMIT_FSIZE bounds it
            proc = subprocess.Popen(
                command,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,  # killpg reaches everything it starts
                **isolation.drop,
            )
            timed_out = False
            try:
                returncode: int | None = proc.wait(timeout=lim.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                returncode = None
            finally:
                _kill_group(proc.pid)
                proc.wait()
                if not isolation.namespace:
                    _kill_marked(token)
        output = _tail(out_path)
        seconds = time.monotonic() - start
        full = out_path.stat().st_size >= lim.file_mb * 2**20
        status = "file_size" if full else _status(returncode, output, timed_out)
        if status == "timeout":  # unshare's own line is not the program's output
            output = output.rstrip().removesuffix(_UNSHARE_SIGNALLED + ": Invalid argument")
        return Outcome(
            status == "passed", status, returncode, output, seconds, isolation.describe()
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_marked(token: str) -> None:
    """Kill what left the process group (setsid) but still carries this run's mark."""
    mark = f"{_MARK}={token}".encode()
    for _ in range(3):  # a process may fork while we look
        found = False
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if mark in environ.split(b"\0"):
                found = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), signal.SIGKILL)
        if not found:
            return


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - _OUTPUT_TAIL))
        return f.read().decode("utf-8", errors="replace")


# util-linux `unshare --fork`, whose child died of a signal, re-raises it on itself; the CPU
# limit it inherited makes that fail, and it exits 1 with this line instead of the signal.
_UNSHARE_SIGNALLED = "unshare: sigprocmask unblock failed"


def _status(returncode: int | None, output: str, timed_out: bool) -> str:
    if timed_out or returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "timeout"
    if returncode == 1 and output.rstrip().endswith(_UNSHARE_SIGNALLED + ": Invalid argument"):
        return "timeout"  # killed by the CPU limit (SIGXCPU or its SIGKILL), inside unshare
    if returncode == 0:
        return "passed"
    if _CONFINE_FAILED in output:
        return "error"  # the program never ran
    if returncode == -signal.SIGXFSZ or "File too large" in output:
        return "file_size"
    if "MemoryError" in output:
        return "memory"
    return "failed" if returncode is not None and returncode > 0 else "error"
