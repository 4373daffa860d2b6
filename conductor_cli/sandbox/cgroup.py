"""A memory cgroup for one sandboxed run: one bound for the program and everything it starts.

Made beneath this process's own cgroup (v2 where the memory controller is delegated to it,
else v1's memory hierarchy, which root may always use); None where neither can be had, and
the runner falls back to per-process limits. The program joins it itself, first thing in its
preamble (confine.join_cgroup), so nothing it starts is outside it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str) -> str | None:
    """This process's cgroup path in the v2 hierarchy ('') or in v1's `controller`."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (controller in controllers.split(",")) if controller else controllers == "":
            return path
    return None


def _candidates() -> list[tuple[str, Path]]:
    """(version, folder to make the run's cgroup in), best first."""
    found = []
    v2 = _own_path("")
    if v2 is not None and (_ROOT / "cgroup.controllers").exists():
        found.append(("v2", _ROOT / v2.lstrip("/")))
    v1 = _own_path("memory")
    if v1 is not None and (_ROOT / "memory").is_dir():
        found.append(("v1", _ROOT / "memory" / v1.lstrip("/")))
        found.append(("v1", _ROOT / "memory"))
    return found


@dataclass(frozen=True)
class MemoryCgroup:
    version: str  # "v1" or "v2"
    path: Path

    @classmethod
    def make(cls, limit_bytes: int, owner: tuple[int, int] | None) -> MemoryCgroup | None:
        """A fresh cgroup limited to `limit_bytes` (swap included), whose procs file `owner`
        may write to; None where none can be made here."""
        for version, parent in _candidates():
            path = parent / f"conductor-sandbox-{secrets.token_hex(6)}"
            try:
                path.mkdir()
            except OSError:
                continue
            made = cls(version, path)
            try:
                made._limit(limit_bytes)
                if owner:
                    os.chown(made.procs, *owner)
            except OSError:
                made.remove()
                continue
            return made
        return None

    def _limit(self, limit_bytes: int) -> None:
        if self.version == "v2":
            (self.path / "memory.max").write_text(str(limit_bytes))
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            return
        (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
        swap = self.path / "memory.memsw.limit_in_bytes"
        if swap.exists():  # only where swap accounting is on; must not be below the above
            swap.write_text(str(limit_bytes))

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of it for memory."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return False
        counts = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return int(counts.get("oom_kill", "0")) > 0

    def kill(self) -> None:
        """Kill every process in it (one pass; what forks meanwhile is for remove())."""
        try:
            pids = [int(p) for p in self.procs.read_text().split()]
        except OSError:
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Kill what is left in it, then remove it (best effort: it may take a moment to
        empty)."""
        for _ in range(50):
            self.kill()
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
