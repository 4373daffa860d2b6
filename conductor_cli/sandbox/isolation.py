"""What confinement this machine gives a sandboxed program, found by trying, and how to say it.

`Isolation.guess()` picks the strongest way to start the interpreter (namespaces, the user it
runs as) and asks the kernel for the rest; runner.probe() then runs a program that tries what
the sandbox must stop (a read, a write, TCP and a unix socket outside its folder), and
`judge()` keeps only what really held. `describe()` lists
each confinement in force (doctor and the trace show it); `refusal()` is the one line a
machine that cannot confine gets.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.sandbox import confine
from conductor_cli.sandbox.cgroup import MemoryCgroup

# CONDUCTOR_SANDBOX=unconfined: run where a confinement is missing, knowingly, with the rest.
ENV = "CONDUCTOR_SANDBOX"
UNCONFINED = "unconfined"
CONFINE_FAILED = "conductor sandbox: could not confine"


@dataclass(frozen=True)
class Limits:
    wall_s: float = 15.0
    cpu_s: int = 10
    # The program and everything it starts, together (a cgroup; without one, each process
    # gets this and the process count is cut so that their product stays under a quarter of
    # the machine's memory).
    memory_mb: int = 512
    file_mb: int = 16  # one file, its output included
    disk_mb: int = 64  # its folder (a tmpfs of this size)
    # Processes and threads the program may add (RLIMIT_NPROC, which counts all of a user's).
    processes: int = 64
    # Open files a process may hold (RLIMIT_NOFILE): also bounds its sockets' and pipes'
    # buffers, and the descriptors it may keep in flight, which no memory limit counts.
    files: int = 128


SHM_MB = 8  # /dev/shm, a tmpfs of its own (multiprocessing's semaphores live there)


def machine_mb() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20


def nobody() -> tuple[int, int]:
    try:
        ids = pwd.getpwnam("nobody")
        return ids.pw_uid, ids.pw_gid
    except KeyError:
        return 65534, 65534


def popen_drop(ids: tuple[int, int]) -> dict[str, Any]:
    return {"user": ids[0], "group": ids[1], "extra_groups": []}


def popen_user(drop: dict[str, Any]) -> tuple[int, int] | None:
    """The (uid, gid) a popen_drop switches to; None for no switch."""
    return (drop["user"], drop["group"]) if drop else None


# Network, IPC, PID and mount namespaces (--mount-proc makes the mount namespace); --mount-proc
# so that the program sees only its own processes in /proc; IPC so that the host's SysV
# segments and queues do not exist for it, and what it makes dies with the run.
_NAMESPACES = ["-n", "-i", "-p", "-f", "--kill-child", "--mount-proc", "--"]
# `-r`: a user namespace, which lets a user other than root make the others.
USER_NAMESPACE = ["unshare", "-r", *_NAMESPACES]
# Root needs none, and must not have one: its program drops to `nobody`, whom `-r` leaves
# unmapped.
ROOT_NAMESPACE = ["unshare", *_NAMESPACES]

# What a Python program and the programs it starts read, besides the interpreter's own
# folders (found where it really lives) and the program's folder.
SYSTEM_READS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/pki/tls/certs",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/sys/devices/system/cpu",
)


# What the seccomp filter refuses besides socket(), as doctor and the trace say it.
REFUSED = (
    "datagram socketpairs, connect, SysV IPC, message queues, memfd, inotify, userfaultfd, "
    "perf_event_open, new namespaces, mounts, dnotify, bigger socket or pipe buffers"
)


def _sysctl(name: str, default: int) -> int:
    try:
        return int(Path(f"/proc/sys/{name}").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def descriptor_bytes() -> int:
    """The most an open file of the program may hold in kernel buffers: a socket's default
    send buffer or a pipe's default 16 pages, whichever is more."""
    return max(_sysctl("net/core/wmem_default", 212992), 16 * 4096)


def interpreter_reads() -> list[str]:
    """The folders this interpreter and its standard library live in (a venv's and its base
    Python's), never a home folder or the root itself."""
    found = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    home = os.path.realpath(os.path.expanduser("~"))
    too_wide = {"/", home, os.path.dirname(home)}
    return sorted(p for p in map(os.path.realpath, found) if p not in too_wide)


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
    under /root) starts it as root, and its preamble shows `nobody` the interpreter's folders
    alone and becomes `nobody` (confine.mount_view, confine.drop_privileges).
    """
    nobody_ids = nobody() if os.geteuid() == 0 else None
    namespaces = [True, False] if use_namespace is None else [use_namespace]
    if shutil.which("unshare") is None:
        namespaces = [False]
    for namespace in namespaces:
        if nobody_ids and _works(USER_NAMESPACE if namespace else [], popen_drop(nobody_ids)):
            return namespace, popen_drop(nobody_ids), None
        if _works((ROOT_NAMESPACE if nobody_ids else USER_NAMESPACE) if namespace else [], {}):
            return namespace, {}, nobody_ids
    return False, {}, nobody_ids


def _landlock_missing(error: OSError) -> str:
    if error.errno == errno.ENOSYS:
        return "this kernel has no Landlock"
    if error.errno == errno.EOPNOTSUPP:
        return "Landlock is built in but not enabled"
    return f"Landlock does not start: {error.strerror or error}"


@dataclass(frozen=True)
class Isolation:
    # Network, PID and mount namespaces: the folder and /dev/shm are bounded tmpfs there
    namespace: bool
    # Popen arguments that switch to `nobody` (empty when not root, or when `nobody` cannot
    # reach this Python, e.g. an interpreter under /root)
    drop: dict[str, Any]
    landlock: int = 0  # the Landlock ABI version in force; 0: reads and writes unconfined
    # (uid, gid) the program's preamble drops root to, with no capability left
    drop_in_program: tuple[int, int] | None = None
    seccomp: bool = False  # no socket() below Python (pathname unix sockets included)
    memory: str = ""  # "cgroup v1" / "cgroup v2": one bound for all; "": per process
    kernel_net_block: bool = False  # TCP to this machine failed below Python in the probe
    # What cannot be had here and why, one entry each ("reads and writes: ...")
    missing: tuple[str, ...] = ()
    unconfined: bool = False  # CONDUCTOR_SANDBOX=unconfined: running with what is missing
    limits: Limits | None = None

    @classmethod
    def guess(
        cls,
        use_namespace: bool | None = None,
        use_landlock: bool = True,
        limits: Limits | None = None,
    ) -> Isolation:
        """The strongest confinement this machine seems to allow, before a program tries it
        (runner.probe does): the launch is tried on real processes, the rest is asked of the
        kernel. `use_landlock=False` acts as if the kernel had none (tests of the refusal)."""
        namespace, drop, drop_in_program = _strongest_launch(use_namespace)
        missing = [] if namespace else ["disk: no mount namespace (user namespaces are off)"]
        version = 0
        if not use_landlock:
            missing.append("reads and writes: Landlock turned off by the caller")
        else:
            try:
                version = confine.abi()
            except OSError as e:
                missing.append(f"reads and writes: {_landlock_missing(e)}")
        seccomp = bool(confine.seccomp_arch())
        if not seccomp:
            missing.append(f"unix sockets: no seccomp filter for {os.uname().machine}")
        lim = limits or Limits()
        cgroup = MemoryCgroup.make(lim.memory_mb * 2**20, popen_user(drop))
        if cgroup:
            cgroup.remove()
        memory = f"cgroup {cgroup.version}" if cgroup else ""
        return cls(
            namespace,
            drop,
            version,
            drop_in_program,
            seccomp=seccomp,
            memory=memory,
            missing=tuple(missing),
            limits=limits,
        )

    @property
    def owner(self) -> tuple[int, int] | None:
        """Who the program runs as, where that is not this process's user."""
        return popen_user(self.drop) or self.drop_in_program

    def processes(self) -> int:
        """How many processes the program may add: without a cgroup, few enough that what
        each may hold adds up to at most a quarter of the machine's memory."""
        lim = self.limits or Limits()
        if self.memory:
            return lim.processes
        return max(1, min(lim.processes, machine_mb() // 4 // self.process_mb()))

    def process_mb(self) -> int:
        """What one process may hold without a cgroup: its address space, and the buffers of
        the sockets and pipes its open files may be (the filter keeps each at its default
        size; none where no filter runs, and then this undercounts)."""
        lim = self.limits or Limits()
        return lim.memory_mb + (lim.files * descriptor_bytes() // 2**20 if self.seccomp else 0)

    def total_mb(self) -> int | None:
        """The most the program and all it starts may hold together, counted where no cgroup
        bounds it: its processes, its tmpfs folders (inodes bounded too), the pipes its user
        may fill; None where that cannot be counted (no seccomp filter, no namespaces)."""
        lim = self.limits or Limits()
        if not (self.seccomp and self.namespace):
            return None
        pipes = _sysctl("fs/pipe-user-pages-soft", 16384) * 4096 // 2**20
        # Descriptors sent over a socketpair and closed: the kernel caps them per user at
        # RLIMIT_NOFILE + 253 (beyond the open files), each a socket buffer's worth.
        in_flight = (lim.files + 253) * descriptor_bytes() // 2**20
        held = self.processes() * self.process_mb() + in_flight + pipes
        return held + lim.disk_mb + SHM_MB

    def memory_note(self) -> str:
        """One line where memory is bounded process by process, not by the kernel in all."""
        if self.memory:
            return ""
        total = self.total_mb()
        counted = f"at most {total:,} MB in all, counted" if total else "no bound in all"
        return (
            f"memory: no cgroup for this user, so {counted} ({self.processes()} processes of "
            f"{(self.limits or Limits()).memory_mb} MB); a cgroup v2 delegated to this user "
            "(systemd's Delegate=yes) bounds it in all"
        )

    def confinements(self) -> list[str]:
        """Each confinement in force, one phrase each."""
        lim = self.limits or Limits()
        if self.landlock:
            where = f"Landlock v{self.landlock}"
            said = [
                f"reads: Python, system libraries and its folder only ({where})",
                f"writes: its folder only ({where})",
            ]
        else:
            said = ["reads: anything its user may", "writes: anywhere its user may"]
        tcp = [] if not self.landlock or self.landlock < 4 else ["Landlock"]
        tcp += ["network namespace"] if self.namespace else []
        if self.kernel_net_block:
            said.append(f"network: none ({', '.join(tcp)})")
        else:
            said.append("network: blocked in Python only")
        said.append("unix sockets: none (seccomp)" if self.seccomp else "unix sockets: any")
        if self.namespace:
            said.append("root: its own (the system read-only, a private /tmp)")
            said.append("IPC: its own (namespace)")
        if self.seccomp:
            said.append(f"system calls: {REFUSED} refused (seccomp)")
        count = self.processes()
        said.append(f"processes: {count}" + (" (own PID namespace)" if self.namespace else ""))
        if self.memory:
            said.append(f"memory: {lim.memory_mb} MB in all ({self.memory})")
        else:
            total = self.total_mb()
            bound = f", at most {total:,} MB in all (counted)" if total else ", no bound in all"
            said.append(f"memory: {lim.memory_mb} MB a process, {count} processes{bound}")
        if self.namespace:
            said.append(f"disk: {lim.disk_mb} MB (tmpfs), /dev/shm {SHM_MB} MB")
        else:
            said.append(f"disk: {lim.file_mb} MB a file, no bound on the folder")
        said.append(f"cpu: {lim.cpu_s} s, wall clock {lim.wall_s:g} s")
        if self.owner:
            said.append("user: nobody, no capabilities")
        elif os.geteuid() == 0:
            said.append("user: root")
        return said

    def how(self) -> str:
        """The mechanisms in force, in a few words."""
        said = [f"Landlock v{self.landlock}"] if self.landlock else []
        said += ["seccomp"] if self.seccomp else []
        said += ["namespaces"] if self.namespace else []
        said += [self.memory] if self.memory else []
        return ", ".join(said) or "nothing below Python"

    def unconfined_note(self) -> str:
        return f"unconfined ({ENV}={UNCONFINED}: {'; '.join(self.missing)})"

    def describe(self) -> str:
        said = "; ".join(self.confinements())
        return f"{self.unconfined_note()}; {said}" if self.unconfined else said

    def refusal(self) -> str:
        """One line: what is missing, and how to run anyway."""
        return (
            f"the code sandbox cannot confine a program here ({'; '.join(self.missing)}): "
            "it needs Linux 5.13+ with landlock in the kernel's lsm= list, seccomp, and "
            "namespaces (root, or user namespaces allowed); or set "
            f"{ENV}={UNCONFINED} to run code with only what this machine allows, knowingly"
        )


def _without(isolation: Isolation, field: str, value: Any, why: str) -> Isolation:
    return dataclasses.replace(isolation, **{field: value, "missing": (*isolation.missing, why)})


def _without_landlock(isolation: Isolation, why: str) -> Isolation:
    return _without(isolation, "landlock", 0, f"reads and writes: {why}")


def _without_namespace(isolation: Isolation, why: str) -> Isolation:
    return _without(isolation, "namespace", False, f"disk: {why}")


def _without_seccomp(isolation: Isolation, why: str) -> Isolation:
    return _without(isolation, "seccomp", False, f"unix sockets: {why}")


# (the preamble step a failure names, what the retry gives up)
_RETRIES: tuple[tuple[str, Callable[[Isolation, str], Isolation]], ...] = (
    ("cgroup", lambda i, why: dataclasses.replace(i, memory="")),
    ("mounting", _without_namespace),
    ("dropping root", lambda i, why: dataclasses.replace(i, drop_in_program=None)),
    ("Landlock", _without_landlock),
    ("seccomp", _without_seccomp),
)


def judge(
    isolation: Isolation, said: str, escaped: bool, sent: bool = False
) -> tuple[Isolation, bool]:
    """What held when a probe program ran under `isolation` (its output `said`; `escaped`:
    its write outside landed; `sent`: its datagram arrived outside), and whether to try again
    with what failed given up. Each retry gives up one thing, so retrying ends."""
    failure = next((line for line in said.splitlines() if CONFINE_FAILED in line), "")
    if not failure and "pair " not in said:  # it never got to its end: say why, not a guess
        last = said.strip().splitlines()[-1:] or ["no output"]
        failure = f"the probe program did not run: {last[0][:200]}"
    for step, give_up in _RETRIES:
        named = f"{CONFINE_FAILED}: {step}:" in failure
        if named and (retried := give_up(isolation, failure)) != isolation:
            return retried, True
    if isolation.landlock and (
        escaped or "write refused" not in said or "read refused" not in said
    ):
        why = failure or "a probe's read or write outside its folder was not stopped"
        return _without_landlock(isolation, why), True
    if isolation.seccomp and (sent or "unix refused" not in said or "dgram refused" not in said):
        why = failure or "a probe reached a unix socket outside its folder"
        return _without_seccomp(isolation, why), True
    return dataclasses.replace(isolation, kernel_net_block="tcp refused" in said), False
