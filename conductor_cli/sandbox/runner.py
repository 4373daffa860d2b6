"""Run untrusted Python (a model's code) in a subprocess that cannot hurt the machine.

Only `conductor eval`'s code scorer calls this: `ask` and `run` never execute what a model
writes. The program runs in a fresh temp dir with CPU-time, memory and file-size limits, no
network, and is killed with everything it started when the wall-clock limit passes.
Under root it runs as `nobody`, so it cannot write where root may.

No network: a network namespace (`unshare -rn`, with a PID namespace so that nothing it forks
outlives it) where the kernel allows one; otherwise socket creation is blocked inside Python.
The socket block is installed in both cases, so a namespace that still has loopback up cannot
be used either.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Runs before the program, in the same interpreter: the limits first, so nothing in the
# program runs without them; the network block last, after `resource` is imported.
_PREAMBLE = """\
import resource as _r
for _k, _v in ((_r.RLIMIT_CPU, {cpu}), (_r.RLIMIT_AS, {memory}), (_r.RLIMIT_FSIZE, {fsize}),
               (_r.RLIMIT_CORE, 0)):
    _r.setrlimit(_k, (_v, _v))
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
del _r, _k, _v, _s, _ss, _m, _n
"""

_OUTPUT_TAIL = 2000
# Inherited by everything the program starts: without a PID namespace, this finds the
# processes that escaped the process group.
_MARK = "CONDUCTOR_SANDBOX"


@dataclass(frozen=True)
class Limits:
    wall_s: float = 15.0
    cpu_s: int = 10
    memory_mb: int = 512
    file_mb: int = 16


@dataclass(frozen=True)
class Outcome:
    passed: bool
    # passed | failed | timeout | memory | file_size | error
    status: str
    returncode: int | None
    output: str  # the tail of stdout and stderr together
    seconds: float
    isolation: str  # "namespace" or "sockets blocked"


def _unprivileged() -> dict[str, Any]:
    """Popen arguments that drop root: a model's code must not write where root may."""
    if os.geteuid() != 0:
        return {}
    try:
        ids = pwd.getpwnam("nobody")
        uid, gid = ids.pw_uid, ids.pw_gid
    except KeyError:
        uid = gid = 65534
    return {"user": uid, "group": gid, "extra_groups": []}


_NAMESPACE = ["unshare", "-rn", "-p", "-f", "--kill-child", "--"]


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


@dataclass(frozen=True)
class Isolation:
    namespace: bool
    # Popen arguments that switch to `nobody` (empty when not root, or when `nobody` cannot
    # run this Python, e.g. an interpreter under /root)
    drop: dict[str, Any]

    @classmethod
    def probe(cls, use_namespace: bool | None = None) -> Isolation:
        drop = _unprivileged()
        namespaces = [True, False] if use_namespace is None else [use_namespace]
        if shutil.which("unshare") is None:
            namespaces = [False]
        for namespace in namespaces:
            for d in [drop, {}] if drop else [{}]:
                if _works(_NAMESPACE if namespace else [], d):
                    return cls(namespace, d)
        return cls(False, {})

    def describe(self) -> str:
        net = "network namespace" if self.namespace else "sockets blocked"
        return net + (", as nobody" if self.drop else "")


class Sandbox:
    """Probe the isolation once, then run any number of programs (thread-safe)."""

    def __init__(self, limits: Limits | None = None, *, use_namespace: bool | None = None):
        self.limits = limits or Limits()
        self.isolation = Isolation.probe(use_namespace)

    def _command(self, script: Path) -> list[str]:
        # -I: ignore PYTHON* variables and the user's site-packages; the program gets the
        # standard library only.
        python = [sys.executable, "-I", str(script)]
        return [*_NAMESPACE, *python] if self.isolation.namespace else python

    def run(self, program: str) -> Outcome:
        lim = self.limits
        preamble = _PREAMBLE.format(
            cpu=lim.cpu_s, memory=lim.memory_mb * 2**20, fsize=lim.file_mb * 2**20
        )
        drop = self.isolation.drop
        token = secrets.token_hex(8)
        workdir = Path(tempfile.mkdtemp(prefix="conductor-sandbox-"))
        start = time.monotonic()
        try:
            script = workdir / "program.py"
            script.write_text(preamble + program, encoding="utf-8")
            out_path = workdir / "output.txt"
            out_path.touch()
            if drop:
                for path in (workdir, script, out_path):
                    os.chown(path, drop["user"], drop["group"])
            env = {
                _MARK: token,
                "PATH": os.defpath,
                "HOME": str(workdir),
                "LANG": "C.UTF-8",
                "TMPDIR": str(workdir),
            }
            with open(out_path, "wb") as out:  # a file, not a pipe: RLIMIT_FSIZE bounds it
                proc = subprocess.Popen(
                    self._command(script),
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    process_group=0,  # killpg reaches everything it starts
                    **drop,
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
                    if not self.isolation.namespace:
                        _kill_marked(token)
            output = _tail(out_path)
            seconds = time.monotonic() - start
            full = out_path.stat().st_size >= lim.file_mb * 2**20
            status = "file_size" if full else _status(returncode, output, timed_out)
            return Outcome(
                status == "passed", status, returncode, output, seconds, self.isolation.describe()
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


def _status(returncode: int | None, output: str, timed_out: bool) -> str:
    if timed_out or returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "timeout"
    if returncode == 0:
        return "passed"
    if returncode == -signal.SIGXFSZ or "File too large" in output:
        return "file_size"
    if "MemoryError" in output:
        return "memory"
    return "failed" if returncode is not None and returncode > 0 else "error"
