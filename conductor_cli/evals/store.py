"""Eval results on disk, one JSON line per (strategy, problem), so an eval can resume.

A line is appended and flushed to disk as soon as its problem is scored; a run killed mid-line
leaves at most one torn last line, which is ignored (and that problem runs again).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths
from conductor_cli.errors import InputError
from conductor_cli.evals.records import Result


def evals_dir() -> Path:
    return paths.data_dir() / "evals"


def run_key(meta: dict[str, Any]) -> str:
    """Results may be reused only by an eval with the same problems, pool and settings."""
    blob = json.dumps(meta, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


class ResultStore:
    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._results: dict[tuple[str, str], Result] = {}
        # A killed run can leave its last line torn; the next line must not be glued to it.
        self._torn_tail = False
        paths.private_dir(path.parent)
        meta_path = path.with_suffix(".meta.json")
        if not meta_path.exists():
            from conductor_cli.disk.atomic import atomic_write

            atomic_write(meta_path, json.dumps(meta, indent=1, ensure_ascii=False).encode())
        if path.exists():
            self._load()

    @classmethod
    def for_meta(cls, meta: dict[str, Any], directory: Path | None = None) -> ResultStore:
        return cls((directory or evals_dir()) / f"{run_key(meta)}.jsonl", meta)

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise InputError(f"{self.path}: cannot read earlier eval results ({e.strerror})") from e
        self._torn_tail = bool(data) and not data.endswith(b"\n")
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                result = Result.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line from a killed run: that problem runs again
            self._results[(result.strategy, result.problem_id)] = result

    def get(self, strategy: str, problem_id: str) -> Result | None:
        return self._results.get((strategy, problem_id))

    def __len__(self) -> int:
        return len(self._results)

    def add(self, result: Result) -> None:
        line = json.dumps(result.to_dict(), ensure_ascii=False) + "\n"
        with self._lock:
            # O_APPEND: one write per line, so lines from threads never interleave.
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                if self._torn_tail:
                    os.write(fd, b"\n")
                    self._torn_tail = False
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            self._results[(result.strategy, result.problem_id)] = result

    def clear(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)
            self._results.clear()
            self._torn_tail = False
