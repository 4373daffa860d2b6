"""Hostile programs for the code sandbox, each checked from outside (issue 56's six ways out
and the variants a careful attacker tries next).

`attempts(sandbox)` runs every one through `Sandbox.run` and returns what was seen outside:
whether a datagram arrived, a segment or queue was left or read, a file outside changed, disk
or memory was taken, a folder's events were seen. A program's own word is never trusted where
the outside can be looked at. Standard library only, so that an ordinary user's interpreter
runs it (`python3 -m conductor_cli.testing.hostile --limits JSON` prints the attempts as JSON;
tests/test_sandbox.py does this as a user made for the test, bench/sandbox_escapes.py for the
table in the closing note). Linux x86_64 and aarch64.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from conductor_cli.sandbox import Limits, Sandbox

_IPC_CREAT, _IPC_RMID = 0o1000, 0
_X86 = os.uname().machine == "x86_64"
# System calls with no wrapper in every libc: userfaultfd, perf_event_open.
_USERFAULTFD, _PERF_EVENT_OPEN = (323, 298) if _X86 else (282, 241)


@dataclass(frozen=True)
class Attempt:
    group: int  # issue 56's numbering of the six; 0: the surface it also named
    name: str
    escaped: bool
    seen: str  # what was looked at outside, in a few words


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


# Every program starts with this: `attempt` prints a variant's result; the outside decides.
_HEAD = """
import ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def attempt(what, act):
    try:
        got = act()
        print(what, "DONE", repr(got)[:120], flush=True)
    except Exception as e:
        print(what, "refused", type(e).__name__, str(e)[:80], flush=True)
def check(result):
    if result == -1 or (isinstance(result, int) and result < 0 and result > -4096):
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result
"""


@contextlib.contextmanager
def _folder(mode: int = 0o777) -> Iterator[Path]:
    """A folder in the system temp dir that only the sandbox may keep a program out of."""
    folder = Path(tempfile.mkdtemp(prefix="conductor-hostile-"))
    folder.chmod(mode)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _datagrams(sandbox: Sandbox) -> list[Attempt]:
    """1: a datagram (and a descriptor) sent to a socket outside, seven ways."""
    with _folder() as folder:
        path = str(folder / "log.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        server.bind(path)
        os.chmod(path, 0o777)
        program = (
            _HEAD
            + f"""
import array
path = {path!r}
def pair(kind):
    return socket.socketpair(socket.AF_UNIX, kind)
attempt("sendto", lambda: pair(socket.SOCK_DGRAM)[0].sendto(b"LEAK sendto", path))
attempt("sendmsg", lambda: pair(socket.SOCK_DGRAM)[0].sendmsg([b"LEAK sendmsg"], [], 0, path))
fds = array.array("i", [0])
attempt("SCM_RIGHTS", lambda: pair(socket.SOCK_DGRAM)[0].sendmsg(
    [b"LEAK SCM_RIGHTS"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)], 0, path))
def connected(kind, word):
    s = pair(kind)[0]
    s.connect(path)
    s.send(word)
attempt("connect", lambda: connected(socket.SOCK_DGRAM, b"LEAK connect"))
attempt("stream pair", lambda: pair(socket.SOCK_STREAM)[0].sendto(b"LEAK stream pair", path))
attempt("stream connect", lambda: connected(socket.SOCK_STREAM, b"LEAK stream connect"))
attempt("seqpacket", lambda: pair(socket.SOCK_SEQPACKET)[0].sendto(b"LEAK seqpacket", path))
def raw():
    fds = (ctypes.c_int * 2)()
    check(libc.socketpair(1, 2, 0, fds))  # AF_UNIX, SOCK_DGRAM, below Python
    address = ctypes.create_string_buffer(110)
    ctypes.memmove(address, b"\\x01\\x00" + path.encode(), 2 + len(path))
    word = b"LEAK ctypes"
    return check(libc.sendto(fds[0], word, len(word), 0, address, 2 + len(path) + 1))
attempt("ctypes sendto", raw)
"""
        )
        try:
            outcome = sandbox.run(program)
            server.settimeout(0.3)
            arrived = []
            with contextlib.suppress(OSError):
                while True:
                    arrived.append(server.recv(256).decode(errors="replace"))
        finally:
            server.close()
    names = [
        "sendto",
        "sendmsg",
        "SCM_RIGHTS",
        "connect",
        "stream pair",
        "stream connect",
        "seqpacket",
        "ctypes",
    ]
    ran = "sendto" in outcome.output
    return [
        Attempt(
            1,
            f"unix datagram: {name}",
            any(a == f"LEAK {name}" or a.startswith(f"LEAK {name}") for a in arrived),
            f"datagrams at the socket outside: {len(arrived)}" + ("" if ran else " (no run)"),
        )
        for name in names
    ]


def _sysv_ids(kind: str) -> dict[int, list[str]]:
    """The host's SysV objects of `kind` (shm, msg), by id, as /proc/sysvipc lists them."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
            fields = line.split()
            found[int(fields[1])] = fields
    return found


def _ipc(sandbox: Sandbox) -> list[Attempt]:
    """2: the host's shared memory and message queues, and what a run leaves behind."""
    libc = _libc()
    libc.shmat.restype = ctypes.c_void_p
    key, queue_key = secrets.randbelow(2**30) + 1, secrets.randbelow(2**30) + 1
    secret = f"SECRET-shm-{secrets.token_hex(6)}".encode()
    shm = libc.shmget(key, 4096, _IPC_CREAT | 0o666)
    queue = libc.msgget(queue_key, _IPC_CREAT | 0o666)
    mq_name = f"/conductor-hostile-{secrets.token_hex(4)}"
    if shm < 0 or queue < 0:
        return [Attempt(2, "sysv: setup", False, "this machine refused SysV IPC to the harness")]
    address = libc.shmat(shm, None, 0)
    ctypes.memmove(address, secret, len(secret))
    libc.shmdt(ctypes.c_void_p(address))
    before = set(_sysv_ids("shm"))
    program = (
        _HEAD
        + f"""
libc.shmat.restype = ctypes.c_void_p
def read(ident):
    address = libc.shmat(ident, None, 0)
    if address in (None, 2**64 - 1, 2**32 - 1):
        raise OSError(ctypes.get_errno(), "shmat")
    return ctypes.string_at(address, 40)
attempt("shmat by id", lambda: read({shm}))
attempt("shmget by key", lambda: read(check(libc.shmget({key}, 0, 0))))
def leave():
    ident = check(libc.shmget(0, 64 << 20, 0o1000 | 0o600))
    address = libc.shmat(ident, None, 0)
    if address not in (None, 2**64 - 1):
        ctypes.memset(address, 1, 64 << 20)
        libc.shmdt(ctypes.c_void_p(address))
    return ident
attempt("segment left", leave)
class Message(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 16)]
def send(ident):
    return check(libc.msgsnd(ident, ctypes.byref(Message(1, b"LEAK")), 16, 0o4000))
attempt("msgsnd by id", lambda: send({queue}))
attempt("msgget by key", lambda: send(check(libc.msgget({queue_key}, 0))))
attempt("mq_open", lambda: check(libc.mq_open({mq_name.encode()!r}, 0o100 | 2, 0o600, None)))
"""
    )
    try:
        outcome = sandbox.run(program)
        left = {i: f for i, f in _sysv_ids("shm").items() if i not in before}
        queued = int(_sysv_ids("msg").get(queue, ["0"] * 6)[4])
        mq = libc.mq_open(mq_name.encode(), os.O_RDONLY)
        if mq >= 0:
            libc.mq_close(mq)
            libc.mq_unlink(mq_name.encode())
    finally:
        libc.shmctl(shm, _IPC_RMID, None)
        libc.msgctl(queue, _IPC_RMID, None)
    for ident in left:
        libc.shmctl(ident, _IPC_RMID, None)
    read = secret.decode() in outcome.output
    mb = sum(int(f[3]) for f in left.values()) // 2**20
    return [
        Attempt(2, "sysv shm: shmat by id", read and "shmat by id DONE" in outcome.output, ""),
        Attempt(2, "sysv shm: shmget by key", read and "shmget by key DONE" in outcome.output, ""),
        Attempt(2, "sysv shm: segment left behind", bool(left), f"{mb} MB left after the run"),
        Attempt(2, "sysv msg: msgsnd to the host's queue", queued > 0, f"{queued} queued"),
        Attempt(2, "posix mq: mq_open", mq >= 0, "the queue seen outside" if mq >= 0 else ""),
    ]


def _attributes(path: Path) -> tuple[int, int, list[str]]:
    info = os.lstat(path)
    try:
        names = sorted(os.listxattr(path))
    except OSError:
        names = []
    return info.st_mode, info.st_mtime_ns, names


def _metadata(sandbox: Sandbox) -> list[Attempt]:
    """3: chmod, utime and xattrs of files outside, owned by the program's own user."""
    owner = sandbox.isolation.owner
    with _folder(0o755) as folder:
        target = folder / "config.toml"
        target.write_text("[conductor]\n")
        target.chmod(0o600)
        for path in (folder, target):
            if owner:
                os.chown(path, *owner)
        home = Path(os.path.expanduser("~"))
        targets = [folder, target] + ([home] if home.stat().st_uid == os.getuid() else [])
        # The interpreter itself (reachable through /proc/self/exe, opened before its root
        # was its own) and the machine's /dev/null (its stdin, opened outside).
        machine = [Path(os.path.realpath(sys.executable)), Path("/dev/null")]
        before = {p: _attributes(p) for p in targets + machine}
        program = (
            _HEAD
            + f"""
AT_FDCWD = -100
for path in {[str(p) for p in targets]!r}:
    attempt("chmod " + path, lambda: os.chmod(path, 0o777))
    attempt("utime " + path, lambda: os.utime(path, (0, 0)))
    attempt("setxattr " + path, lambda: os.setxattr(path, "user.conductor", b"1"))
    attempt("fchmodat " + path, lambda: check(libc.fchmodat(AT_FDCWD, path.encode(), 0o777, 0)))
    attempt("utimensat " + path, lambda: check(libc.utimensat(AT_FDCWD, path.encode(), None, 0)))
    attempt("lsetxattr " + path,
            lambda: check(libc.lsetxattr(path.encode(), b"user.c2", b"1", 1, 0)))
    def by_handle(act):
        fd = os.open(path, os.O_PATH)
        return check(act(fd))
    attempt("fchmod O_PATH " + path, lambda: by_handle(lambda fd: libc.fchmod(fd, 0o777)))
    attempt("fsetxattr O_PATH " + path,
            lambda: by_handle(lambda fd: libc.fsetxattr(fd, b"user.c3", b"1", 1, 0)))
attempt("chmod exe", lambda: os.chmod("/proc/self/exe", 0o700))
attempt("utime exe", lambda: os.utime("/proc/self/exe", (0, 0)))
attempt("setxattr exe", lambda: os.setxattr("/proc/self/exe", "user.conductor", b"1"))
time.sleep(0.05)
attempt("utime stdin", lambda: os.utime(0))
"""
        )
        sandbox.run(program)
        after = {p: _attributes(p) for p in before}
        for path, (mode, mtime, _) in before.items():  # put back what a failing run changed
            if before[path] != after[path]:
                with contextlib.suppress(OSError):
                    os.chmod(path, mode & 0o7777)
                    os.utime(path, ns=(mtime, mtime))
    changed = [str(p) for p in targets if before[p] != after[p]]
    touched = [str(p) for p in machine if before[p] != after[p]]
    return [
        Attempt(3, "chmod/utime/xattr outside (8 ways)", bool(changed), ", ".join(changed)),
        Attempt(3, "the interpreter (/proc/self/exe), stdin", bool(touched), ", ".join(touched)),
    ]


def _free_mb(path: str) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**20


@contextlib.contextmanager
def _sampled(read: Callable[[], float]) -> Iterator[list[float]]:
    """Samples of `read()` every 20 ms while the block runs."""
    samples = [read()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            samples.append(read())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()


def _stdout_disk(sandbox: Sandbox) -> list[Attempt]:
    """4: disk taken through stdout and stderr with fallocate(KEEP_SIZE)."""
    where = tempfile.gettempdir()
    program = (
        _HEAD
        + """
for fd in (1, 2):
    attempt(f"fallocate {fd}", lambda: check(libc.fallocate(fd, 1, ctypes.c_long(0),
                                                          ctypes.c_long(400 << 20))))
time.sleep(1.0)
"""
    )
    taken = []
    for _ in range(2):  # the whole disk, so a reading over the line is taken again
        with _sampled(lambda: _free_mb(where)) as free:
            outcome = sandbox.run(program)
        taken.append(free[0] - min(free))
        if taken[-1] <= 300:
            break
    return [
        Attempt(
            4,
            "disk through stdout/stderr (fallocate)",
            min(taken) > 300,
            f"{min(taken):.0f} MB of {where}'s disk taken at most; "
            f"{outcome.output.count('DONE')} of 2 calls succeeded",
        )
    ]


def _meminfo(field: str) -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


_HOLD_MEMFD = """
held = []
def grow():
    for i in range(800):
        fd = os.memfd_create(f"m{i}")
        os.write(fd, b"x" * ((1 << 20) - 4096))  # under the file-size limit in each
        held.append(fd)
    return len(held)
attempt("memfd MB", grow)
time.sleep(1.5)
"""
_HOLD_SOCKETS = """
held = []
def grow():
    total = 0
    while total < (800 << 20):
        a, b = socket.socketpair()
        for s in (a, b):
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            except OSError:
                pass
        a.setblocking(False)
        try:
            while True:
                total += a.send(b"x" * 65536)
        except BlockingIOError:
            pass
        held.append((a, b))
    return total >> 20
attempt("socket buffers MB", grow)
time.sleep(1.5)
"""
_HOLD_INODES = """
def grow():
    os.mkdir("many")
    for i in range(100000):
        open(f"many/{i}", "w").close()
    return 100000
attempt("empty files", grow)
time.sleep(1.5)
"""


def _memory(sandbox: Sandbox) -> list[Attempt]:
    """5: memory outside RLIMIT_AS: memfds, socket buffers, tmpfs inodes (slab). Measured on
    the whole machine, so a reading over the line is taken again, and the lower one counts
    (a real escape repeats; another process's allocation seldom does)."""
    found = []
    for name, hold, field, limit in (
        ("memory: 800 MB in memfds", _HOLD_MEMFD, "Shmem", 300.0),
        ("memory: 800 MB in socket buffers", _HOLD_SOCKETS, "MemAvailable", 400.0),
        ("memory: slab of 100,000 empty files", _HOLD_INODES, "Slab", 60.0),
    ):
        readings = []
        for _ in range(2):
            with _sampled(lambda f=field: _meminfo(f)) as seen:
                outcome = sandbox.run(_HEAD + hold)
            falls = field == "MemAvailable"
            readings.append((seen[0] - min(seen)) if falls else (max(seen) - seen[0]))
            if readings[-1] <= limit:
                break
        moved = min(readings)
        said = next((ln for ln in outcome.output.splitlines() if "MB" in ln or "files" in ln), "")
        found.append(Attempt(5, name, moved > limit, f"{field} moved {moved:.0f} MB; {said[:60]}"))
    return found


def _inotify(sandbox: Sandbox) -> list[Attempt]:
    """6: names of files made in folders it may not list, through inotify."""
    marker = f"conductor-hostile-{secrets.token_hex(6)}"
    home = os.path.expanduser("~")
    program = (
        _HEAD
        + f"""
import select
def watch():
    fd = check(libc.inotify_init1(0))
    for folder in ("/tmp", {home!r}, {tempfile.gettempdir()!r}):
        libc.inotify_add_watch(fd, folder.encode(), 0x100)  # IN_CREATE
    names = []
    end = time.time() + 2.0
    while time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            names.append(os.read(fd, 4096))
    return b"".join(names)
attempt("inotify", watch)
"""
    )
    done = threading.Event()
    made: list[Path] = []

    def create() -> None:
        while not done.wait(0.1):
            path = Path(tempfile.gettempdir()) / f"{marker}-{len(made)}"
            path.touch()
            made.append(path)

    thread = threading.Thread(target=create, daemon=True)
    thread.start()
    try:
        outcome = sandbox.run(program)
    finally:
        done.set()
        thread.join()
        for path in made:
            path.unlink(missing_ok=True)
    return [Attempt(6, "inotify on folders outside", marker in outcome.output, "")]


def _surface(sandbox: Sandbox) -> list[Attempt]:
    """The rest issue 56 named (a nested user namespace, userfaultfd, perf_event_open) and
    dnotify. These act inside the run, so the program's own report is what there is to see."""
    program = (
        _HEAD
        + f"""
attempt("unshare user", lambda: check(libc.unshare(0x10000000)))
attempt("unshare net", lambda: check(libc.unshare(0x40000000)))
libc.syscall.restype = ctypes.c_long
attempt("userfaultfd", lambda: check(libc.syscall({_USERFAULTFD}, 0)))
import fcntl
def dnotify():
    fd = os.open("/usr", os.O_RDONLY)
    return fcntl.fcntl(fd, 1026, 0x4 | 0x80000000)  # F_NOTIFY: DN_CREATE, DN_MULTISHOT
attempt("dnotify", dnotify)
attr = (ctypes.c_char * 128)()
ctypes.memmove(attr, (1).to_bytes(4, "little") + (128).to_bytes(4, "little"), 8)
attempt("perf_event_open", lambda: check(libc.syscall({_PERF_EVENT_OPEN}, attr, 0, -1, -1, 0)))
"""
    )
    outcome = sandbox.run(program)
    return [
        Attempt(0, name, f"{name} DONE" in outcome.output, "")
        for name in ("unshare user", "unshare net", "userfaultfd", "dnotify", "perf_event_open")
    ]


# Issue 67: a program that leaves its session at once (pid 1 of its namespace calls setsid)
# and sleeps; the run's parent-death signal was lost when root dropped to `nobody`.
_OUTLIVER = """
import os, time
print("run", os.environ["CONDUCTOR_SANDBOX_RUN"], flush=True)
os.setsid()
if os.fork() == 0:
    os.setsid()
time.sleep(90)  # far past the run's wall clock and the wait for its call; ends by itself
"""
_OUTLIVER_WALL_S = 2.0
_RETURN_GRACE_S = 20.0  # far beyond the kill and the output's drain


def survivors(mark: str) -> list[int]:
    """Live processes (zombies excluded) whose environment carries this run's mark."""
    wanted = f"CONDUCTOR_SANDBOX_RUN={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0") and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


def _outliving(sandbox: Sandbox) -> list[Attempt]:
    """7 (issue 67): outlive the wall clock from a session of its own, with the run's memory
    cgroup and without one (then the PID namespace's kill is all there is). Seen from
    outside: whether the call came back, and whether a process with the run's mark lives."""
    from conductor_cli.sandbox.process import execute

    limits = dataclasses.replace(sandbox.limits, wall_s=_OUTLIVER_WALL_S)
    isolation = dataclasses.replace(sandbox.isolation, limits=limits)
    tried = [("setsid sleeper", isolation)]
    if isolation.memory and isolation.namespace:
        tried.append(("setsid sleeper, no cgroup", dataclasses.replace(isolation, memory="")))
    found = []
    for name, how in tried:
        said: list[str] = []
        call = threading.Thread(
            target=lambda how=how, said=said: said.append(execute(how, _OUTLIVER).output),
            daemon=True,
        )
        call.start()
        call.join(_OUTLIVER_WALL_S + _RETURN_GRACE_S)
        returned = not call.is_alive()
        mark = said[0].split("run ", 1)[1].split()[0] if said and "run " in said[0] else ""
        left = survivors(mark) if mark else []
        for pid in left:  # the test's own clean-up, whatever it found
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        seen = f"returned: {returned}, left: {len(left)}"
        found.append(Attempt(7, name, not returned or bool(left) or not mark, seen))
    return found


STEPS = (_datagrams, _ipc, _metadata, _stdout_disk, _memory, _inotify, _surface, _outliving)

# Issue 67: for a run as root, a `nobody` process of the host swaps the program between its
# writing and its start (the preamble that confines it is inside that file). Tries every
# run folder made while it watches, until the run is gone.
_SWAPPER = """
import os, sys
evil, stop = sys.argv[1], sys.argv[2]
tried = set(os.listdir("/tmp"))  # only the runs made while it watches
swapped = 0
while not os.path.exists(stop):
    for name in os.listdir("/tmp"):
        if not name.startswith("conductor-sandbox-") or name in tried:
            continue
        folder = "/tmp/" + name
        while os.path.isdir(folder) and not os.path.exists(stop):
            try:
                spare = folder + "/.swap"
                with open(spare, "w") as f:
                    f.write(evil)
                os.replace(spare, folder + "/program.py")
                swapped += 1
                break
            except OSError:
                pass
        tried.add(name)
print(swapped)
"""
SWAP_RUNS = 20


def runs_python(python: str, ids: tuple[int, int]) -> bool:
    """Whether user `ids` may run `python` with what the hostile programs import."""
    try:
        ran = subprocess.run(
            [python, "-I", "-c", "import ctypes, json"],
            user=ids[0],
            group=ids[1],
            extra_groups=[],
            cwd="/",
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return ran.returncode == 0


def swapped_program(sandbox: Sandbox, runs: int = SWAP_RUNS) -> list[Attempt]:
    """8 (issue 67): a watcher running as `nobody` replaces each run's program; seen from
    outside: a file only root may write, left by a swapped program that ran as root, and
    how many swaps landed. Empty where this process is not root (the program then runs as
    this user from the start) or no interpreter `nobody` may run is found."""
    from conductor_cli.sandbox.isolation import nobody

    if os.geteuid() != 0:
        return []
    ids = nobody()
    pythons = ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable)
    python = next((p for p in pythons if os.path.exists(p) and runs_python(p, ids)), None)
    if python is None:
        return []
    with _folder(0o755) as proof:  # root's: only root may write in it
        stop = proof / "stop"
        evil = f"import os\nopen({str(proof)!r} + '/root-' + str(os.getuid()), 'w').close()\n"
        watcher = subprocess.Popen(
            [python, "-I", "-c", _SWAPPER, evil, str(stop)],
            user=ids[0],
            group=ids[1],
            extra_groups=[],
            cwd="/",
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(0.5)  # the watcher is looking
            outcomes = [sandbox.run("print('mine')\n") for _ in range(runs)]
        finally:
            stop.touch()
            swapped, _ = watcher.communicate(timeout=60)
        won = [p.name for p in proof.iterdir() if p.name.startswith("root-")]
    kept = sum(o.passed and o.output.strip() == "mine" for o in outcomes)
    seen = f"{len(won)} run(s) as root, {swapped.strip()} swap(s), {kept} of {runs} ran as written"
    return [Attempt(8, "swap a root run's program as nobody", bool(won) or kept < runs, seen)]


def attempts(sandbox: Sandbox) -> list[Attempt]:
    return [found for step in STEPS for found in step(sandbox)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limits", default="{}", help="Limits' fields as JSON")
    args = parser.parse_args()
    sandbox = Sandbox(Limits(**json.loads(args.limits)))
    found = attempts(sandbox) + swapped_program(sandbox)
    json.dump(
        {
            "user": os.getuid(),
            "isolation": sandbox.isolation.describe(),
            # (an older sandbox, compared in bench/sandbox_escapes.py, has no such note)
            "memory_note": getattr(sandbox.isolation, "memory_note", str)(),
            "attempts": [dataclasses.asdict(a) for a in found],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
