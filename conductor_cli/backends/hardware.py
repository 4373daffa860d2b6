"""What the machine offers llama.cpp: its physical cores."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_SYS_CPU = Path("/sys/devices/system/cpu")


def _usable_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def physical_cores(cpus: Iterable[int] | None = None, sys_cpu: Path = _SYS_CPU) -> int:
    """Physical cores among the CPUs this process may run on.

    llama.cpp's matrix work gains nothing from a core's second hyper-thread and loses to the
    contention, so its thread count follows cores, not logical CPUs.
    """
    usable = set(cpus) if cpus is not None else _usable_cpus()
    cores: set[tuple[str, str]] = set()
    for cpu in usable:
        topo = sys_cpu / f"cpu{cpu}" / "topology"
        try:
            package = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            return max(len(usable), 1)  # no topology (containers, macOS): count what we have
        cores.add((package, core))
    return max(len(cores), 1)
