"""Run untrusted Python (a model's code) in a subprocess that cannot hurt the machine.

`conductor eval`'s code scorer and the python tool call this. The program runs in a fresh
folder with a scrubbed environment, limits on CPU time, memory, disk, file size and
processes, and is killed with everything it started when the wall-clock limit passes. Its
preamble (confine.py, run first in the same interpreter) confines it before a line of it
runs: a memory cgroup, its own mount namespace (the folder and /dev/shm are size-bounded
tmpfs), `nobody` with no capability, Landlock (reads only of Python, the system's libraries
and its folder; writes only in its folder; no TCP), a seccomp filter (no sockets), and a
Python-level socket block. isolation.py finds which of these the machine allows; a machine
that cannot confine reads, writes, unix sockets and the disk is refused (InputError) unless
CONDUCTOR_SANDBOX=unconfined says to run anyway.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from conductor_cli.errors import InputError
from conductor_cli.sandbox import confine
from conductor_cli.sandbox.cgroup import MemoryCgroup
from conductor_cli.sandbox.isolation import (
    CONFINE_FAILED,
    ENV,
    ROOT_NAMESPACE,
    SHM_MB,
    SYSTEM_READS,
    UNCONFINED,
    USER_NAMESPACE,
    Isolation,
    Limits,
    interpreter_reads,
    judge,
    popen_user,
)

# Runs before the program, in the same interpreter, so nothing in the program runs without
# it: the limits, then the confinement steps, then the Python socket block.
_LIMITS = """\
import resource as _r
for _k, _v in ((_r.RLIMIT_CPU, {cpu}), (_r.RLIMIT_AS, {memory}), (_r.RLIMIT_FSIZE, {fsize}),
               (_r.RLIMIT_NPROC, {nproc}), (_r.RLIMIT_CORE, 0), (_r.RLIMIT_NOFILE, {files}),
               (_r.RLIMIT_SIGPENDING, {signals})):
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
_CONFINE_SOURCE = Path(confine.__file__).read_text(encoding="utf-8")
_SOCKETS = """\
import socket as _s, _socket as _ss
def _no_network(*_a, **_k):
    raise OSError("network access is disabled in conductor's sandbox")
# Subclasses, not functions, so that modules which subclass socket (ssl) still import. One
# that wraps a descriptor it was given (socketpair's) may be made.
def _wrap_only(base):
    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        if fileno is None:
            _no_network()
        base.__init__(self, family, type, proto, fileno)
    return __init__
class _NoSocket(_s.socket):
    __init__ = _wrap_only(_s.socket)
class _NoRawSocket(_ss.socket):
    __init__ = _wrap_only(_ss.socket)
_s.socket, _ss.socket, _ss.SocketType = _NoSocket, _NoRawSocket, _NoRawSocket
for _m in (_s, _ss):
    for _n in ("fromfd", "create_connection", "create_server"):
        if hasattr(_m, _n):
            setattr(_m, _n, _no_network)
del _s, _ss, _m, _n, _wrap_only
"""

_OUTPUT_TAIL = 2000
# Queued signals and POSIX timers (kernel memory no other limit counts; nothing ordinary
# queues more than a few).
SIGNALS = 128
# Inherited by everything the program starts: without a PID namespace, this finds the
# processes that escaped the process group.
_MARK = "CONDUCTOR_SANDBOX_RUN"
_NO_SPACE = "No space left on device"


@dataclass(frozen=True)
class Outcome:
    passed: bool
    # passed | failed | timeout | memory | disk | file_size | error
    status: str
    returncode: int | None
    output: str  # the tail of stdout and stderr together
    seconds: float
    isolation: str  # Isolation.describe()


class Sandbox:
    """Probe the isolation once, then run any number of programs (thread-safe).

    Raises InputError where a confinement cannot be had, unless CONDUCTOR_SANDBOX=unconfined.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        use_namespace: bool | None = None,
        use_landlock: bool = True,
    ):
        self.limits = limits or Limits()
        isolation = probe(use_namespace, use_landlock, self.limits)
        if isolation.missing:
            if os.environ.get(ENV, "") != UNCONFINED:
                raise InputError(isolation.refusal())
            isolation = dataclasses.replace(isolation, unconfined=True)
        self.isolation = isolation

    def run(self, program: str) -> Outcome:
        return execute(self.isolation, program)


def probe(
    use_namespace: bool | None = None, use_landlock: bool = True, limits: Limits | None = None
) -> Isolation:
    """The strongest confinement this machine allows, tried on real processes: a program
    tries what the sandbox must stop, and only what really held is kept."""
    isolation = Isolation.guess(use_namespace, use_landlock, limits)
    while True:
        said, escaped, sent = _try_escape(isolation)
        isolation, again = judge(isolation, said, escaped, sent)
        if not again:
            return isolation


# Tries what the sandbox must stop: a read and a write in a folder anyone may use, TCP to a
# port of this machine, a unix socket anyone may connect to, a datagram socket anyone may
# send to. Run without the Python socket
# block, so that the kernel's blocks are what is tested.
_PROBE = """
import _socket, os
def attempt(what, act):
    try:
        act()
        print(what, "allowed")
    except OSError:
        print(what, "refused")
def connect(family, address):
    s = _socket.socket(family, _socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(address)
    s.close()
attempt("write", lambda: open({target!r}, "w").close())
attempt("read", lambda: open({planted!r}).read())
attempt("tcp", lambda: connect(_socket.AF_INET, ("127.0.0.1", {port})))
attempt("unix", lambda: connect(_socket.AF_UNIX, {unix!r}))
attempt("dgram", lambda: _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_DGRAM)[0].sendto(
    b"escaped", {dgram!r}))
attempt("pair", lambda: _socket.socketpair())
"""


def _try_escape(isolation: Isolation) -> tuple[str, bool, bool]:
    """(what _PROBE printed under `isolation`, whether its write outside landed, whether
    its datagram did)."""
    outside = Path(tempfile.mkdtemp(prefix="conductor-probe-"))
    target, planted, unix = outside / "escaped", outside / "planted", outside / "socket"
    dgram = outside / "dgram"
    with (
        socket.socket() as listener,
        socket.socket(socket.AF_UNIX) as unix_listener,
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as dgram_listener,
    ):
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        unix_listener.bind(str(unix))
        unix_listener.listen(1)
        dgram_listener.bind(str(dgram))
        dgram_listener.setblocking(False)
        try:
            # So that only the sandbox can refuse them.
            os.chmod(outside, 0o777)
            for path in (unix, dgram):
                os.chmod(path, 0o777)
            planted.write_text("planted")
            planted.chmod(0o644)
            program = _PROBE.format(
                target=str(target),
                planted=str(planted),
                port=listener.getsockname()[1],
                unix=str(unix),
                dgram=str(dgram),
            )
            limits = Limits(wall_s=10, cpu_s=5, memory_mb=256, file_mb=1, processes=16)
            tried = dataclasses.replace(isolation, limits=limits)
            said = execute(tried, program, sockets=False).output
            try:
                arrived = bool(dgram_listener.recv(64))
            except BlockingIOError:
                arrived = False
            return said, target.exists(), arrived
        finally:
            shutil.rmtree(outside, ignore_errors=True)


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


def _process_limit(isolation: Isolation) -> int:
    """RLIMIT_NPROC for the run: isolation.processes() more than its user has now.

    The kernel counts per user and user namespace: a fresh count where the program gets a user
    namespace of its own; otherwise its user's other processes count too (the zombies of
    earlier runs until they are reaped, a desktop session), and must not use up the limit."""
    if isolation.namespace and not isolation.drop_in_program:
        return isolation.processes() + 2  # unshare and the interpreter
    uid = isolation.owner[0] if isolation.owner else os.getuid()
    return isolation.processes() + _tasks_of(uid)


def _reads(isolation: Isolation, interpreter: list[str]) -> list[str]:
    own_proc = ["/proc"] if isolation.namespace else []  # only its own processes there
    return [*interpreter, *SYSTEM_READS, *own_proc]


def _preamble(
    isolation: Isolation, folder: Path, cgroup: MemoryCgroup | None, sockets: bool
) -> str:
    lim = isolation.limits or Limits()
    text = _LIMITS.format(
        cpu=lim.cpu_s,
        memory=lim.memory_mb * 2**20,
        fsize=lim.file_mb * 2**20,
        nproc=_process_limit(isolation),
        files=lim.files,
        signals=SIGNALS,
    )
    interpreter = interpreter_reads()
    steps: list[tuple[str, tuple[object, ...], str]] = []
    if cgroup:
        steps.append(("join_cgroup", (str(cgroup.procs),), "cgroup"))
    if isolation.namespace:
        # Its minimal root shows the interpreter and the system's libraries; /proc and the
        # devices it makes itself.
        shown = [p for p in [*interpreter, *SYSTEM_READS] if p not in confine.DEVICES]
        args = (str(folder), lim.disk_mb, SHM_MB, isolation.drop_in_program, shown)
        steps.append(("mount_view", args, "mounting"))
    steps.append(("drop_privileges", (isolation.drop_in_program,), "dropping root"))
    if isolation.landlock:
        # Its private /tmp (its folder is in it) and /dev/shm exist only in its own root.
        private = ["/tmp", "/dev/shm"] if isolation.namespace else []
        writes = ["/dev/null", *private]
        steps.append(
            ("restrict", (str(folder), _reads(isolation, interpreter), writes), "Landlock")
        )
    if isolation.seccomp:
        steps.append(("refuse_calls", (), "seccomp"))
    text += _CONFINE.format(source=_CONFINE_SOURCE)
    for function, args, step in steps:
        text += _CONFINE_STEP.format(function=function, args=args, step=step, failed=CONFINE_FAILED)
    text += "del _ns\n"
    return text + (_SOCKETS if sockets else "")


def execute(isolation: Isolation, program: str, sockets: bool = True) -> Outcome:
    """Run `program` once under `isolation` (`sockets=False`: without the Python socket
    block, so that a probe tests the kernel's)."""
    lim = isolation.limits or Limits()
    cgroup = None
    if isolation.memory:
        cgroup = MemoryCgroup.make(lim.memory_mb * 2**20, popen_user(isolation.drop))
        if cgroup is None:  # fail closed: the bound describe() promises cannot be had now
            said = f"{CONFINE_FAILED}: no memory cgroup could be made for this run"
            return Outcome(False, "error", None, said, 0.0, isolation.describe())
    token = secrets.token_hex(8)
    # Beneath /tmp, where its minimal root's private /tmp shows it at the same path.
    workdir = Path(tempfile.mkdtemp(prefix="conductor-sandbox-", dir=_TMP))
    # -I: ignore PYTHON* variables and the user's site-packages; the program gets the
    # standard library only.
    script = workdir / "program.py"
    command = [sys.executable, "-I", str(script)]
    if isolation.namespace:
        namespace = ROOT_NAMESPACE if isolation.drop_in_program else USER_NAMESPACE
        command = [*namespace, *command]
    start = time.monotonic()
    try:
        script.write_text(
            _preamble(isolation, workdir, cgroup, sockets) + program, encoding="utf-8"
        )
        _hand_over(workdir, script, isolation)
        env = {
            _MARK: token,
            "PATH": os.defpath,
            "HOME": str(workdir),
            "LANG": "C.UTF-8",
            "TMPDIR": str(workdir),
        }
        # A pipe, not a file: nothing of the host's disk to fallocate, and this process
        # decides how much it keeps (the file-size limit, as for its files).
        proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0,  # killpg reaches everything it starts
            **isolation.drop,
        )
        assert proc.stdout is not None
        reader = _Output(proc.stdout, lim.file_mb * 2**20, lambda: _kill_group(proc.pid))
        timed_out = False
        try:
            returncode: int | None = proc.wait(timeout=lim.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            returncode = None
        finally:
            if isolation.namespace:
                # Its pid 1 takes the whole PID namespace along, whatever session it made
                # itself and whatever became of the parent-death signal unshare gave it.
                _kill_children(proc.pid)
            _kill_group(proc.pid)
            proc.wait()
            if not isolation.namespace:
                _kill_marked(token)
            if cgroup:
                cgroup.kill()
            reader.close()
        output = reader.tail()
        seconds = time.monotonic() - start
        oom = cgroup is not None and cgroup.oom_killed()
        status = (
            "file_size"
            if reader.full
            else "memory"
            if oom
            else _status(returncode, output, timed_out)
        )
        if status == "timeout":  # unshare's own line is not the program's output
            output = output.rstrip().removesuffix(_UNSHARE_SIGNALLED + ": Invalid argument")
        return Outcome(
            status == "passed", status, returncode, output, seconds, isolation.describe()
        )
    finally:
        if cgroup:
            cgroup.remove()
        shutil.rmtree(workdir, ignore_errors=True)


_TMP = "/tmp"


class _Output:
    """Reads a program's output pipe in a thread, keeping its tail; past `cap` bytes in all,
    calls `stop` (the program has printed more than a file of its may hold).

    Reads the descriptor itself, never through the file object's buffer: that buffer's lock
    is held by a blocked read, and a process that escaped the kill can keep the pipe open
    for ever; `close()` must return all the same."""

    _POLL_S = 0.05
    _DRAIN_S = 2.0  # after close(): how long what is still being written is read

    def __init__(self, pipe: IO[bytes], cap: int, stop: Callable[[], None]) -> None:
        self._pipe, self._cap, self._stop = pipe, cap, stop
        self._fd = pipe.fileno()
        self._kept = bytearray()
        self.total = 0
        self._closing: float | None = None  # the monotonic time close() was called
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    @property
    def full(self) -> bool:
        return self.total > self._cap

    def _read(self) -> None:
        while True:
            closing = self._closing
            if closing is not None and time.monotonic() - closing > self._DRAIN_S:
                return
            try:
                readable, _, _ = select.select([self._fd], [], [], self._POLL_S)
                chunk = os.read(self._fd, 65536) if readable else None
            except OSError:
                return
            if chunk is None:
                if closing is not None:  # nothing more now, and everything was killed
                    return
                continue
            if not chunk:  # every writer closed the pipe
                return
            self.total += len(chunk)
            self._kept += chunk
            del self._kept[: max(0, len(self._kept) - _OUTPUT_TAIL * 4)]
            if self.full:
                self._stop()
                return

    def close(self) -> None:
        """Read what is left (everything holding the pipe was killed), then close it."""
        self._closing = time.monotonic()
        self._thread.join(timeout=self._DRAIN_S + 1)
        if not self._thread.is_alive():
            self._pipe.close()

    def tail(self) -> str:
        text = self._kept.decode("utf-8", errors="replace")
        return text[-_OUTPUT_TAIL:]


def _hand_over(workdir: Path, script: Path, isolation: Isolation) -> None:
    """What the program's user gets of the run's folder on the host: nothing it could
    replace the program with (the preamble that confines it is in that file, and root may
    start it). In its own mount namespace the program writes in a tmpfs of its own, so the
    host folder stays root's, readable; without one, it writes in the host folder, made
    sticky so that nobody but root may rename or delete root's program there."""
    if not isolation.owner:
        return  # it runs as this process's own user
    script.chmod(0o644)
    workdir.chmod(0o755 if isolation.namespace else 0o1777)


def _kill_children(pid: int) -> None:
    """Kill the children of `pid` (unshare's: the PID namespace's first process), each
    through a pidfd taken while it is still `pid`'s child, so that no recycled pid is hit."""
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return
    for child in map(int, listed):
        try:
            fd = os.pidfd_open(child)
        except OSError:
            continue
        try:
            stat = Path(f"/proc/{child}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # still its child
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
        finally:
            os.close(fd)


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
    if CONFINE_FAILED in output:
        return "error"  # the program never ran
    if _NO_SPACE in output:
        return "disk"
    if returncode == -signal.SIGXFSZ or "File too large" in output:
        return "file_size"
    if "MemoryError" in output:
        return "memory"
    return "failed" if returncode is not None and returncode > 0 else "error"
