"""Files kept for speed only, one kind a suffix in one folder (llama.cpp prompt states, hidden
states of planning prompts): listing them, keeping the newest, removing them. A file that
vanishes or cannot be removed meanwhile (another process pruning) is skipped, never an error:
losing one only costs its speed-up."""

from __future__ import annotations

import contextlib
from pathlib import Path


def listed(directory: Path, suffix: str) -> list[Path]:
    try:
        return sorted(directory.glob(f"*{suffix}"))
    except OSError:
        return []


def keep_newest(files: list[Path], keep: int) -> None:
    """Remove all but the `keep` most recently written or used of `files`."""

    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0

    remove(sorted(files, key=mtime, reverse=True)[keep:])


def remove(files: list[Path]) -> int:
    """Remove `files`; how many there were."""
    for p in files:
        with contextlib.suppress(OSError):
            p.unlink()
    return len(files)
